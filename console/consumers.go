package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/relais/relais/engine"
)

// consumersPath is the admins' page of consumers and their grants.
const consumersPath = basePath + "/consumers"

// consumersPageSize is the consumer list's page size.
const consumersPageSize = 50

// consumerRow is one consumer of the list: what it may take, never its
// token.
type consumerRow struct {
	ID       string
	Name     string
	Grants   []string
	Created  timeView
	Revoked  timeView
	Reserved string
	All      string
}

// consumerListView is the consumers page.
type consumerListView struct {
	Chrome                                               chrome
	List                                                 cardList
	HeadID, HeadName, HeadGrants, HeadCreated, HeadState string
	HeadTasks                                            string
	Active, RevokedLabel, NoGrant, ReservedLink, AllLink string
	Rows                                                 []consumerRow
}

// consumerList lists the consumers, oldest first, with their grants: the
// console's view of GET /api/v1/consumers, for admins (who alone manage
// consumers in the API). Revoked consumers stay listed, marked: the tasks
// they settled still name them.
func (c *Console) consumerList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	after, errs := idCursorProblems(ctx, r.URL.Query().Get("after"), 0)
	errs = append(queryProblems(ctx, r.URL.RawQuery, "after"), errs...)
	empty := T(ctx, "No consumer yet.")
	if after != 0 {
		empty = T(ctx, "No more consumers.")
	}
	v := consumerListView{
		Chrome: c.chrome(r, T(ctx, "Consumers"), "consumers"),
		List: newCardList(ctx, "consumers",
			T(ctx, "The external services that take tasks, and the definitions each may take. Create consumers, change their grants and rotate their tokens through the API (/api/v1/consumers); tokens are never shown."),
			T(ctx, "Consumers, oldest first"), empty, errs),
		HeadID: T(ctx, "ID"), HeadName: T(ctx, "Name"), HeadGrants: T(ctx, "Grants"), HeadCreated: T(ctx, "Created on"),
		HeadState: T(ctx, "State"), HeadTasks: T(ctx, "Tasks"),
		Active: T(ctx, "active"), RevokedLabel: T(ctx, "revoked"), NoGrant: T(ctx, "no grant: it takes nothing"),
		ReservedLink: T(ctx, "Reserved now"), AllLink: T(ctx, "All its tasks"),
	}
	if len(errs) > 0 {
		c.render(w, r, http.StatusBadRequest, consumerListPage(v))
		return
	}
	consumers, more, err := onePage(consumersPageSize, func(limit int) ([]engine.Consumer, error) {
		return c.eng.ListConsumers(ctx, after, limit)
	})
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, cs := range consumers {
		id := strconv.FormatInt(cs.ID, 10)
		row := consumerRow{ID: id, Name: cs.Name, Created: formatTime(ctx, cs.CreatedAt), Revoked: formatTimePtr(ctx, cs.RevokedAt),
			Reserved: homePath + "?" + url.Values{"consumer": {id}, "status": {"reserved"}}.Encode(),
			All:      homePath + "?" + url.Values{"consumer": {id}}.Encode()}
		for _, g := range cs.Grants {
			row.Grants = append(row.Grants, grantLabel(ctx, g))
		}
		v.Rows = append(v.Rows, row)
	}
	linkPages(&v.List, consumersPath, "after", consumers, more, after == 0, func(cs engine.Consumer) string { return strconv.FormatInt(cs.ID, 10) })
	c.render(w, r, http.StatusOK, consumerListPage(v))
}

// grantLabel says which revisions of a definition a grant covers.
func grantLabel(ctx context.Context, g engine.Grant) string {
	if g.Revisions == nil {
		return T(ctx, "%s: every revision, present and future", g.Definition)
	}
	if len(g.Revisions) == 1 {
		revision := number(ctx, g.Revisions[0])
		return T(ctx, "%s: revision %s", g.Definition, revision)
	}
	revs := make([]string, len(g.Revisions))
	for i, n := range g.Revisions {
		revs[i] = number(ctx, n)
	}
	revisions := strings.Join(revs, ", ")
	return T(ctx, "%s: revisions %s", g.Definition, revisions)
}
