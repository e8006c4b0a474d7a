package console

import (
	"net/http"
	"strconv"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
)

// revealsPath is the admins' page of the reveal audit log.
const revealsPath = basePath + "/reveals"

// revealsPageSize is the reveal log's page size.
const revealsPageSize = 50

// revealRow is one reveal of the log: who saw which field, when and why;
// never the value.
type revealRow struct {
	ID  string
	At  timeView
	Who string
	// OccurrenceHref is empty once retention deleted the occurrence;
	// Deleted then says so.
	OccurrenceHref string
	Deleted        string
	Occurrence     string
	Field          string
	Reason         string
}

// revealListView is the reveal log page.
type revealListView struct {
	Chrome                                                 chrome
	List                                                   cardList
	HeadAt, HeadWho, HeadOccurrence, HeadField, HeadReason string
	NoReason                                               string
	Rows                                                   []revealRow
}

// revealList is the reveal audit log, newest first, keyset-paginated: the
// console's view of GET /api/v1/audit/reveals, for admins (who alone may
// reveal).
func (c *Console) revealList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// Ids start at 1: before=1 is an empty page, before=0 a mangled link.
	before, errs := idCursorProblems(ctx, r.URL.Query().Get("before"), 1)
	errs = append(queryProblems(ctx, r.URL.RawQuery, "before"), errs...)
	v := revealListView{
		Chrome: c.chrome(r, T(ctx, "Reveals"), "reveals"),
		List: newCardList(ctx, "reveals",
			T(ctx, "Every sensitive value an administrator revealed: who, when, which field and why. The values themselves are never kept."),
			T(ctx, "Reveals, newest first"), T(ctx, "No value was revealed."), errs),
		HeadAt: T(ctx, "When"), HeadWho: T(ctx, "Who"), HeadOccurrence: T(ctx, "Occurrence"), HeadField: T(ctx, "Field"), HeadReason: T(ctx, "Reason"),
		NoReason: T(ctx, "none (revealed before reasons were asked for)"),
	}
	if len(errs) > 0 {
		c.render(w, r, http.StatusBadRequest, revealListPage(v))
		return
	}
	reveals, more, err := onePage(revealsPageSize, func(limit int) ([]engine.Reveal, error) {
		return c.eng.ListReveals(ctx, engine.RevealFilter{Before: before, Limit: limit})
	})
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, rv := range reveals {
		// Only administrators may reveal (the engine refuses anyone else):
		// the record keeps no role, as it could only be this one.
		row := revealRow{ID: strconv.FormatInt(rv.ID, 10), At: formatTime(ctx, rv.RevealedAt),
			Who:            tokenHolder(ctx, rv.Principal, rv.TokenID, auth.RoleAdmin),
			OccurrenceHref: occurrenceHref(rv.OccurrenceID), Occurrence: rv.OccurrenceID.String(),
			Field: sideTitle(ctx, rv.Side) + " " + rv.Field}
		if rv.Reason != nil {
			row.Reason = visibleBidi(*rv.Reason)
		}
		if rv.OccurrenceDeleted {
			// Retention deleted it: a link would lead to a 404.
			row.OccurrenceHref, row.Deleted = "", T(ctx, "deleted")
		}
		v.Rows = append(v.Rows, row)
	}
	linkPages(&v.List, revealsPath, "before", reveals, more, before == 0, func(rv engine.Reveal) string { return strconv.FormatInt(rv.ID, 10) })
	c.render(w, r, http.StatusOK, revealListPage(v))
}
