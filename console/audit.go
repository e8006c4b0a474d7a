package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
)

// auditRow is one operator action of the audit log.
type auditRow struct {
	At                       timeView
	Who                      string
	WhoHref                  string // the actor's records
	Action, ActionLabel      string
	Reason                   string
	InstanceID, InstanceHref string
	// Deleted says the instance (and so the occurrence) is gone, deleted
	// by retention: shown without a link, which would lead to a 404.
	Deleted          string
	OccurrenceID     string
	OccurrenceHref   string
	BulkID, BulkHref string
}

// auditTable is the audit log as a table, on its page and on an
// instance's.
type auditTable struct {
	Caption                                                 string
	HeadWhen, HeadWho, HeadAction, HeadReason, HeadInstance string
	HeadOccurrence, HeadBulk                                string
	ShowInstance                                            bool
	Rows                                                    []auditRow
}

// actorLabel names who made an operator action, as tokenHolder says.
func actorLabel(ctx context.Context, a engine.OperatorAction) string {
	return tokenHolder(ctx, a.ActorName, a.ActorTokenID, auth.Role(a.ActorRole))
}

// tokenHolder names who acted with a token, in the audit and reveal logs
// alike: its name, which is not unique, with its id and role; the name
// alone when no stored token acted (tokenID nil).
func tokenHolder(ctx context.Context, name string, tokenID *int64, role auth.Role) string {
	if tokenID == nil {
		return name
	}
	token, roleName := *tokenID, roleLabel(ctx, role)
	return T(ctx, "%s (token #%d, %s)", name, token, roleName)
}

func (c *Console) auditTable(ctx context.Context, acts []engine.OperatorAction, caption string, showInstance bool) auditTable {
	t := auditTable{Caption: caption, HeadWhen: T(ctx, "When"), HeadWho: T(ctx, "Who"), HeadAction: T(ctx, "Action"),
		HeadReason: T(ctx, "Reason"), HeadInstance: T(ctx, "Process instance"), HeadOccurrence: T(ctx, "Occurrence offered again"),
		HeadBulk: T(ctx, "Bulk action"), ShowInstance: showInstance}
	for _, a := range acts {
		row := auditRow{At: listTime(ctx, a.At), Who: actorLabel(ctx, a), WhoHref: auditPath + "?actor=" + url.QueryEscape(a.ActorName), Action: a.Action, ActionLabel: actionName(ctx, a.Action),
			Reason: visibleBidi(a.Reason), InstanceID: a.InstanceID.String(), InstanceHref: instanceHref(a.InstanceID)}
		if a.BroughtForward {
			// Not a held instance's retry with a fresh budget.
			row.ActionLabel = T(ctx, "retry now (attempts unchanged)")
		}
		if a.OccurrenceID != nil && a.Action == string(engine.ActionRetry) {
			row.OccurrenceID, row.OccurrenceHref = a.OccurrenceID.String(), occurrenceHref(*a.OccurrenceID)
		}
		if a.InstanceDeleted {
			row.InstanceHref, row.OccurrenceHref = "", ""
			row.Deleted = T(ctx, "deleted")
		}
		if a.BulkID != nil {
			row.BulkID, row.BulkHref = a.BulkID.String(), auditPath+"?bulk="+a.BulkID.String()
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// auditListView is the audit log page.
type auditListView struct {
	Chrome                                   chrome
	Intro                                    string
	FiltersLabel, ActionLabel, InstanceLabel string
	ActorLabel, ActorHint, Actor             string
	BusinessKeyLabel, BusinessKeyHint        string
	BusinessKey                              string
	WhenLabel, FromLabel, ToLabel            string
	ActedFrom, ActedTo                       string
	BulkLabel, Bulk                          string
	Apply, Reset, ResetHref                  string
	ActionOptions                            []option
	Instance                                 string
	Errors                                   []string
	Table                                    auditTable
	Empty                                    string
	Pager                                    pagerView
}

// auditParams are the parameters the audit log reads: its filters and
// its page.
var auditParams = []string{"action", "instance", "business_key", "actor", "acted_from", "acted_to", "bulk", "before"}

// auditList is the operator audit log: who did what, when, why and to
// which instance, newest first, filtered by action, instance or bulk
// action, by who acted or by the days they acted (in the operator's time
// zone), keyset paginated.
func (c *Console) auditList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	action, instance, bulk, before := strings.TrimSpace(q.Get("action")), strings.TrimSpace(q.Get("instance")),
		strings.TrimSpace(q.Get("bulk")), q.Get("before")
	actor, businessKey := strings.TrimSpace(q.Get("actor")), strings.TrimSpace(q.Get("business_key"))
	from, to := strings.TrimSpace(q.Get("acted_from")), strings.TrimSpace(q.Get("acted_to"))
	v := auditListView{
		Chrome:       c.liveChrome(r, T(ctx, "Audit log"), "audit"),
		Intro:        T(ctx, "Every retry, abandon and stop an operator applied, and every erasure an administrator made, with its reason. Reveals of sensitive values have their own log, which administrators read on the Reveals page (GET /api/v1/audit/reveals)."),
		FiltersLabel: T(ctx, "Filters"), ActionLabel: T(ctx, "Action"), InstanceLabel: T(ctx, "Process instance"),
		ActorLabel: T(ctx, "Who"), ActorHint: T(ctx, "a token’s name, exact"), Actor: actor,
		// A data subject's request starts from their key (privacy QA).
		BusinessKeyLabel: T(ctx, "Business key"), BusinessKeyHint: T(ctx, "exact; instances deleted since are not found"), BusinessKey: businessKey,
		WhenLabel: T(ctx, "When"), FromLabel: T(ctx, "from"), ToLabel: T(ctx, "to"), ActedFrom: from, ActedTo: to,
		Apply: T(ctx, "Apply filters"), Reset: T(ctx, "Clear filters"), ResetHref: auditPath,
		Instance: instance, Bulk: bulk,
		Empty: T(ctx, "No operator action matches."),
	}
	v.Errors = queryProblems(ctx, r.URL.RawQuery, auditParams...)
	f := engine.AuditFilter{Action: action, Actor: actor, BusinessKey: businessKey, Limit: defaultPageSize + 1}
	v.ActionOptions = []option{{Value: "", Label: T(ctx, "All actions"), Selected: action == ""}}
	for _, a := range []string{string(engine.ActionRetry), string(engine.ActionAbandon), string(engine.ActionStop), string(engine.ActionErase)} {
		v.ActionOptions = append(v.ActionOptions, option{Value: a, Label: actionName(ctx, a), Selected: a == action})
	}
	if action != "" && !slices.ContainsFunc(v.ActionOptions, func(o option) bool { return o.Value == action }) {
		v.Errors = append(v.Errors, T(ctx, "Unknown action."))
	}
	var errs []string
	f.ActedAfter, f.ActedBefore, errs = dayBounds(ctx, from, to, T(ctx, "When"))
	v.Errors = append(v.Errors, errs...)
	if instance != "" {
		id, err := uuid.Parse(instance)
		if err != nil {
			v.Errors = append(v.Errors, T(ctx, "The process instance must be a whole instance id (a UUID): the lists show the end of each id; open the instance, or copy its link, for the whole id."))
		}
		f.Instance = &id
	}
	if bulk != "" {
		id, err := uuid.Parse(bulk)
		if err != nil {
			v.Errors = append(v.Errors, T(ctx, "The bulk action must be its id (a UUID)."))
		}
		f.Bulk = &id
	}
	// Ids start at 1: before=1 is an empty page, before=0 a mangled link.
	n, errs := idCursorProblems(ctx, before, 1)
	v.Errors = append(v.Errors, errs...)
	f.Before = n
	caption := T(ctx, "Operator actions, newest first")
	status := http.StatusOK
	if len(v.Errors) == 0 && f.Bulk != nil {
		// A bulk action's page may be opened while it runs (its
		// confirmation links here): the count says how far it got.
		label, known, err := c.bulkLabel(ctx, *f.Bulk)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		if !known {
			status = http.StatusNotFound
			v.Errors = append(v.Errors, T(ctx, "No bulk action has the id %s: check the link, or open the action from the audit log.", bulk))
		}
		v.BulkLabel = label
	}
	if len(v.Errors) == 0 {
		acts, err := c.eng.ListOperatorActions(ctx, f)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		more := len(acts) > defaultPageSize
		if more {
			acts = acts[:defaultPageSize]
		}
		v.Table = c.auditTable(ctx, acts, caption, true)
		v.Pager = newPager(ctx)
		link := func(before int64) string {
			q := url.Values{}
			for k, val := range map[string]string{"action": action, "instance": instance, "business_key": businessKey, "actor": actor,
				"acted_from": from, "acted_to": to, "bulk": bulk} {
				if val != "" {
					q.Set(k, val)
				}
			}
			if before > 0 {
				q.Set("before", strconv.FormatInt(before, 10))
			}
			if e := q.Encode(); e != "" {
				return auditPath + "?" + e
			}
			return auditPath
		}
		if more {
			v.Pager.NextHref = link(acts[len(acts)-1].ID)
		}
		if before != "" {
			v.Pager.FirstHref = link(0)
		}
	}
	if status == http.StatusOK {
		status = listStatus(v.Errors)
	}
	c.render(w, r, status, auditListPage(v))
}

// bulkStalled is how long a running bulk action may go without a batch
// before its page says its replica may have stopped: a batch of 100
// instances takes about 50 ms.
const bulkStalled = 2 * time.Minute

// bulkLabel says what a bulk action asked and how far it got, from its
// record; from its audit records alone for an action older than the
// record. known is false when neither knows the id.
func (c *Console) bulkLabel(ctx context.Context, id uuid.UUID) (label string, known bool, err error) {
	b, err := c.eng.BulkAction(ctx, id)
	if isNotFound(err) {
		n, err := c.eng.CountBulkRecords(ctx, id)
		if err != nil || n == 0 {
			return "", false, err
		}
		short := shortIDText(id.String())
		return T(ctx, "Showing the %d instances bulk action %s changed. While it runs, each reload shows how far it got.", n, short), true, nil
	}
	if err != nil {
		return "", false, err
	}
	name, who, started := actionName(ctx, b.Action), tokenHolder(ctx, b.ActorName, b.ActorTokenID, auth.Role(b.ActorRole)), formatTime(ctx, b.StartedAt).Text
	if a := engine.Action(b.Action); a == engine.ActionRetry && bulkBroughtForward(b.Filter) {
		// Not a held instance's retry with a fresh budget (no nested
		// parentheses in the sentence it goes in).
		name = T(ctx, "retry now")
	}
	label, known, err = c.bulkProgress(ctx, b, name, who, started)
	if filter := bulkFilterText(ctx, b.Filter); filter != "" {
		// What it acted on (on-call QA: the page said how many, not which).
		label += " " + T(ctx, "Filter: %s.", filter)
	}
	return label, known, err
}

// bulkBroughtForward reports whether a bulk retry's recorded filter kept
// running instances, as the engine decides it: it brought their waiting
// retries forward.
func bulkBroughtForward(raw json.RawMessage) bool {
	var f struct {
		Status     string `json:"status"`
		RetryingAt string `json:"retrying_at"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return false
	}
	return engine.ActionRetry.BringsForward(engine.InstanceFilter{Status: f.Status, RetryingAt: f.RetryingAt})
}

// bulkFilterText says a bulk action's recorded filter (the API's names, as
// engine.bulkFilterRecord writes it) in the console's words.
func bulkFilterText(ctx context.Context, raw json.RawMessage) string {
	var f map[string]any
	if json.Unmarshal(raw, &f) != nil {
		return ""
	}
	var parts []string
	text := func(k string) string { s, _ := f[k].(string); return s }
	if text("created_before") != "" && text("created_before") == text("matched_before") {
		// The console's pin to the moment of its count, not a criterion
		// the operator chose.
		delete(f, "created_before")
	}
	when := func(k string) string {
		t, err := time.Parse(time.RFC3339Nano, text(k))
		if err != nil {
			return text(k)
		}
		return formatTime(ctx, t).Text
	}
	for _, p := range []struct {
		key, label string
		value      func(string) string
	}{
		{"process", T(ctx, "Process"), text},
		{"version", T(ctx, "Version"), func(k string) string {
			n, _ := f[k].(float64)
			return strconv.Itoa(int(n))
		}},
		{"status", T(ctx, "Status"), func(k string) string { return statusLabel(ctx, text(k)) }},
		{"business_key_given", T(ctx, "Business key"), func(string) string { return T(ctx, "given (not kept)") }},
		{"error_code", T(ctx, "Error code"), text},
		{"held_at", T(ctx, "Held at a node of"), text},
		{"retrying_at", T(ctx, "Waiting for a retry at a node of"), text},
		{"created_after", T(ctx, "Created since"), when},
		{"created_before", T(ctx, "Created before"), when},
	} {
		if _, ok := f[p.key]; ok {
			// Named as the chart's "label: value" is: one message.
			slotLabel, what := p.label, p.value(p.key)
			parts = append(parts, T(ctx, "%s: %s", slotLabel, what))
		}
	}
	if len(parts) == 0 {
		// The widest action of all says so.
		return T(ctx, "none (every instance)")
	}
	joined := parts[0]
	for _, next := range parts[1:] {
		// French puts a narrow space before the semicolon.
		joined = T(ctx, "%s; %s", joined, next)
	}
	return joined
}

// bulkProgress says how far bulk action b got.
func (c *Console) bulkProgress(ctx context.Context, b engine.BulkRecord, name, who, started string) (string, bool, error) {
	switch b.Status() {
	case "completed":
		if b.Skipped == 0 && b.Applied == b.Matched {
			// "1 of the 1 instances counted, 0 skipped" (QA) says less.
			return T(ctx, "Bulk %s by %s, started %s: applied to every instance counted (%d). It ended %s.",
				name, who, started, b.Applied, formatTime(ctx, *b.EndedAt).Text), true, nil
		}
		return T(ctx, "Bulk %s by %s, started %s: applied to %d of the %d instances counted, %d skipped (they changed after the count). It ended %s.",
			name, who, started, b.Applied, b.Matched, b.Skipped, formatTime(ctx, *b.EndedAt).Text), true, nil
	case "stopped":
		return T(ctx, "Bulk %s by %s, started %s, was stopped by an error after %d of the %d instances counted (%d skipped). What it applied stays; act on the filter again for the rest.",
			name, who, started, b.Applied, b.Matched, b.Skipped), true, nil
	}
	done := b.Applied + b.Skipped
	msg := T(ctx, "Bulk %s by %s, started %s, is running: %d of the %d instances counted done so far (%d skipped). Each reload shows how far it got.",
		name, who, started, done, b.Matched, b.Skipped)
	if prefsOf(ctx).now.Sub(b.Progressed) > bulkStalled {
		msg += " " + T(ctx, "No progress since %s: the replica running it may have stopped. What it applied stays; act on the filter again for the rest.", formatTime(ctx, b.Progressed).Text)
	}
	return msg, true, nil
}
