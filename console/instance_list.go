package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
)

// instanceStatuses are the statuses an instance can be in, in the order
// the filter lists them.
var instanceStatuses = []string{engine.InstanceRunning, engine.InstanceHeld, engine.InstanceCompleted, engine.InstanceFailed, engine.InstanceCancelled}

// instanceFilter is the instances list's query, as the URL carries it; the
// bulk actions take the same filter.
type instanceFilter struct {
	Process, Version, Status, BusinessKey, ErrorCode, HeldAt string
	RetryingAt                                               string
	CreatedFrom, CreatedTo                                   string
	Limit                                                    string
	Page                                                     page
}

// instanceCriteria are the parameters of an instance filter that select
// (criteria's); instanceParams are those the instances list reads.
var (
	instanceCriteria = []string{"process", "version", "status", "business_key", "error_code", "held_at", "retrying_at", "created_from", "created_to"}
	instanceParams   = append(append(slices.Clone(instanceCriteria), "limit"), pagingParams...)
)

func instanceFilterFrom(get func(string) string) instanceFilter {
	g := func(k string) string { return strings.TrimSpace(get(k)) }
	return instanceFilter{Process: g("process"), Version: g("version"), Status: g("status"), BusinessKey: g("business_key"), ErrorCode: g("error_code"), HeldAt: g("held_at"), RetryingAt: g("retrying_at"),
		CreatedFrom: g("created_from"), CreatedTo: g("created_to"), Limit: g("limit"),
		Page: page{Before: g("before"), After: g("after"), From: g("from")}}
}

// criteria are the filter's selecting parameters, without paging.
func (f instanceFilter) criteria() url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"process", f.Process}, {"version", f.Version}, {"status", f.Status}, {"business_key", f.BusinessKey},
		{"error_code", f.ErrorCode}, {"held_at", f.HeldAt}, {"retrying_at", f.RetryingAt}, {"created_from", f.CreatedFrom}, {"created_to", f.CreatedTo}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q
}

func (f instanceFilter) href() string {
	q := f.criteria()
	if f.Limit != "" {
		q.Set("limit", f.Limit)
	}
	f.Page.set(q)
	if e := q.Encode(); e != "" {
		return instancesPath + "?" + e
	}
	return instancesPath
}

// engineFilter validates the filter; each problem is a translated message.
func (f instanceFilter) engineFilter(ctx context.Context) (engine.InstanceFilter, filterProblems) {
	ef := engine.InstanceFilter{ProcessKey: f.Process, Status: f.Status, BusinessKey: f.BusinessKey, ErrorCode: f.ErrorCode, HeldAt: f.HeldAt, RetryingAt: f.RetryingAt, Limit: defaultPageSize}
	var errs filterProblems
	if f.Status != "" && !slices.Contains(instanceStatuses, f.Status) {
		errs.add(unknownStatus(ctx, f.Status, instanceStatuses), "status")
	} else if f.RetryingAt != "" && f.Status != "" && f.Status != engine.InstanceRunning {
		// Nothing would match, which would read as nothing waiting.
		errs.add(T(ctx, "A retry waits on a running instance only: choose the status running, or none."), "status", "retrying_at")
	}
	if refused := engine.RunningFilterErrors(ef, ""); f.RetryingAt != "" && len(refused) > 0 {
		// The fields the engine refuses are what to clear (a11y QA: an
		// empty one was marked invalid, the error code not), in the
		// console's words.
		var given []string
		for _, fe := range refused {
			given = append(given, fe.Path)
		}
		errs.add(T(ctx, "The error code and “Held at a node of” filter held and failed instances, by the code they stopped with and where; a running instance has neither: leave them out. The code a retry waits after is shown on each row, and External tasks filter waiting retries by it."), given...)
	}
	if f.Version != "" {
		n, err := strconv.Atoi(f.Version)
		switch {
		case err != nil || n < 1:
			errs.add(T(ctx, "The version must be a whole number from 1."), "version")
		case f.Process == "":
			errs.add(T(ctx, "A version is a process’s: choose the process too."), "version", "process")
		default:
			ef.Version = n
		}
	}
	var e []string
	ef.CreatedAfter, ef.CreatedBefore, e = dayBounds(ctx, f.CreatedFrom, f.CreatedTo, T(ctx, "Creation date"))
	errs.addAll(e, "created_from", "created_to")
	ef.Before, ef.After, e = f.Page.cursors(ctx)
	errs.addAll(e)
	if f.Limit != "" {
		n, err := strconv.Atoi(f.Limit)
		if err != nil || n < 1 || n > maxPageSize {
			errs.add(T(ctx, "The page size must be between 1 and %d.", maxPageSize))
		}
		ef.Limit = n
	}
	return ef, errs
}

// instanceRow is one line of the instances list.
type instanceRow struct {
	ID, Href             string
	Process, ProcessHref string
	BusinessKey          string
	Status, StatusLabel  string
	ErrorCode, EndNode   string
	// Waiting says, on a running instance whose occurrence waits out a
	// retry delay, when its next attempt is due (ErrorCode is then the
	// code that occurrence failed with).
	Waiting        string
	Created, Ended timeView
}

type instanceHeads struct {
	ID, Process, BusinessKey, Status, Outcome, Created, Ended string
}

// bulkLink offers one bulk action over the list's filter.
type bulkLink struct {
	Action, Label, Href string
}

// instanceListView is the instances list.
type instanceListView struct {
	Chrome chrome

	FiltersLabel, ProcessLabel, StatusLabel, BusinessKeyLabel, BusinessKeyHint string
	VersionLabel, VersionHint                                                  string
	ErrorCodeLabel, ErrorCodeHint, HeldAtLabel                                 string
	HeldAtOptions                                                              []option
	RetryingAtLabel                                                            string
	RetryingAtOptions                                                          []option
	// RetryingNote, with a retrying_at filter, leads to the occurrences
	// whose retry waits, each with its error and its next attempt.
	RetryingNote, RetryingHref                                string
	CreatedLabel, FromLabel, ToLabel, Apply, Reset, ResetHref string
	ProcessOptions, StatusOptions                             []option
	Filter                                                    instanceFilter
	Errors                                                    []string
	// RetryingOnError keeps the link to the waiting occurrences on a page
	// whose one refusal is an error code over waiting retries.
	RetryingOnError bool
	// Invalid are the query parameters an error is about: their fields
	// say so (aria-invalid) and point at the errors.
	Invalid map[string]bool

	BulkLabel, BulkIntro string
	Bulk                 []bulkLink

	TableLabel string
	// ResultsLabel heads the list (for a screen reader's headings).
	ResultsLabel string
	Head         instanceHeads
	Rows         []instanceRow
	Empty        string
	Pager        pagerView
}

// instanceList lists process instances newest first, filtered by process,
// status (held included), business key, error code and creation dates, keyset
// paginated both ways; from it, an operator acts on every instance the
// filter matches.
func (c *Console) instanceList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := instanceFilterFrom(r.URL.Query().Get)
	ef, problems := f.engineFilter(ctx)
	errs := append(queryProblems(ctx, r.URL.RawQuery, instanceParams...), problems.Texts...)
	v := instanceListView{
		Chrome:       c.liveChrome(r, T(ctx, "Process instances"), "instances"),
		FiltersLabel: T(ctx, "Filters"), ProcessLabel: T(ctx, "Process"), VersionLabel: T(ctx, "Version"), VersionHint: T(ctx, "any"), StatusLabel: T(ctx, "Status"),
		BusinessKeyLabel: T(ctx, "Business key"), BusinessKeyHint: T(ctx, "exact, case-sensitive"),
		ErrorCodeLabel: T(ctx, "Error code"), ErrorCodeHint: T(ctx, "exact, case-sensitive"), HeldAtLabel: T(ctx, "Held at a node of"), RetryingAtLabel: T(ctx, "Waiting for a retry at a node of"), CreatedLabel: T(ctx, "Creation date"), FromLabel: T(ctx, "from"), ToLabel: T(ctx, "to"),
		Apply: T(ctx, "Apply filters"), Reset: T(ctx, "Clear filters"), ResetHref: instancesPath,
		Filter: f, Errors: errs, Invalid: problems.Params,
		BulkLabel:  T(ctx, "Act on every instance this filter matches"),
		BulkIntro:  T(ctx, "The next page counts them and asks for a reason before anything changes."),
		TableLabel: T(ctx, "Process instances, newest first"), ResultsLabel: T(ctx, "Instances matching the filters"),
		Head: instanceHeads{ID: T(ctx, "Instance"), Process: T(ctx, "Process"), BusinessKey: T(ctx, "Business key"),
			Status: T(ctx, "Status"), Outcome: T(ctx, "End node or error"), Created: T(ctx, "Started"), Ended: T(ctx, "Ended")},
		Empty: T(ctx, "No instance matches these filters."),
	}
	if f.ErrorCode != "" {
		v.Empty += " " + T(ctx, "An error code is matched exactly, capitals included.")
		if f.Status == "" || f.Status == engine.InstanceRunning {
			// An outage's failures wait out their retries on running
			// instances, which carry no error code yet (on-call QA: the
			// right code read as a typo).
			v.Empty += " " + T(ctx, "A running instance has no error code yet: occurrences that failed with it and wait for their retry are listed under External tasks, filtered by that code.")
		}
	}
	menus, _, err := c.menus.Get(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v.ProcessOptions = menuOptions(T(ctx, "All processes"), menus.processes, f.Process)
	v.HeldAtOptions = menuOptions(T(ctx, "Any definition"), menus.definitions, f.HeldAt)
	v.RetryingAtOptions = menuOptions(T(ctx, "Any definition"), menus.retryable, f.RetryingAt)
	if f.RetryingAt != "" {
		v.RetryingNote = elided(ctx, T(ctx, "The occurrences of %s waiting for a retry, each with its error and its next attempt", f.RetryingAt), f.RetryingAt)
		v.RetryingHref = occurrenceFilter{Definition: f.RetryingAt, WaitingRetry: "true"}.href()
		if f.ErrorCode != "" {
			// Refused here (a running instance has no code yet), what was
			// asked is a list away: the occurrences waiting after that
			// code, linked from the refusal itself (QA: it named External
			// tasks without a way there).
			code := f.ErrorCode
			v.RetryingNote = elided(ctx, T(ctx, "The occurrences of %s waiting for a retry after %s", f.RetryingAt, code), f.RetryingAt)
			v.RetryingHref = occurrenceFilter{Definition: f.RetryingAt, ErrorCode: code, WaitingRetry: "true"}.href()
			v.RetryingOnError = f.HeldAt == "" && len(errs) == 1
		}
	}
	v.StatusOptions = []option{{Value: "", Label: T(ctx, "All statuses"), Selected: f.Status == ""}}
	for _, s := range instanceStatuses {
		v.StatusOptions = append(v.StatusOptions, option{Value: s, Label: statusLabel(ctx, s), Selected: s == f.Status})
	}
	if len(errs) == 0 {
		for _, a := range []engine.Action{engine.ActionRetry, engine.ActionAbandon, engine.ActionStop} {
			if !bulkApplies(a, f) {
				continue
			}
			q := f.criteria()
			q.Set("action", string(a))
			v.Bulk = append(v.Bulk, bulkLink{Action: string(a), Label: bulkActionLabel(ctx, a, f), Href: bulkPath + "?" + q.Encode()})
		}

		limit := ef.Limit
		insts, moreOlder, moreNewer, err := c.instancePage(ctx, ef, limit)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		if len(insts) == 0 && ef.Before == nil && ef.After == nil {
			// A key nothing has (a typo, an edited link) lists nothing,
			// which would read as "none left": said instead.
			unknown, err := c.unknownKeys(ctx, ef)
			if err != nil {
				c.serverError(w, r, err)
				return
			}
			if len(unknown.Texts) > 0 {
				v.Errors, v.Invalid, v.Bulk = unknown.Texts, unknown.Params, nil
				c.render(w, r, http.StatusBadRequest, instanceListPage(v))
				return
			}
			// Nothing matches: no action over all of it to offer (its
			// confirmation would count 0).
			v.Bulk = nil
		}
		// Running instances say why they wait, when a retry does: the
		// code and the next attempt (on-call QA: every row read "—"
		// during an outage).
		var running []uuid.UUID
		for _, in := range insts {
			if in.Status == engine.InstanceRunning {
				running = append(running, in.ID)
			}
		}
		var waiting map[uuid.UUID]engine.WaitingRetry
		if len(running) > 0 {
			if waiting, err = c.eng.WaitingRetries(ctx, running); err != nil {
				c.serverError(w, r, err)
				return
			}
		}
		ids := make([]string, len(insts))
		for i, in := range insts {
			row := instanceRowOf(ctx, in)
			if wr, ok := waiting[in.ID]; ok {
				if wr.ErrorCode != nil {
					row.ErrorCode = *wr.ErrorCode
				}
				row.Waiting = nextAttempt(ctx, wr.Due)
			}
			v.Rows = append(v.Rows, row)
			ids[i] = in.ID.String()
		}
		cur := f.Page
		if ef.After != nil && ef.Before == nil && !moreNewer {
			cur = page{}
		}
		v.Pager = keysetPage(ctx, cur, ids, limit, moreOlder, moreNewer, func(p page) string {
			g := f
			g.Page = p
			return g.href()
		})
	}
	c.render(w, r, listStatus(v.Errors), instanceListPage(v))
}

// instancePage is occurrencePage for instances.
func (c *Console) instancePage(ctx context.Context, ef engine.InstanceFilter, limit int) (insts []engine.Instance, moreOlder, moreNewer bool, err error) {
	ef.Limit = limit + 1
	insts, err = c.eng.ListInstances(ctx, ef)
	if err != nil {
		return nil, false, false, err
	}
	if ef.After != nil && ef.Before == nil {
		if len(insts) > limit {
			return insts[1:], true, true, nil
		}
		if len(insts) == limit {
			return insts, true, false, nil
		}
		ef.After = nil
		if insts, err = c.eng.ListInstances(ctx, ef); err != nil {
			return nil, false, false, err
		}
	}
	moreOlder = len(insts) > limit
	if moreOlder {
		insts = insts[:limit]
	}
	return insts, moreOlder, ef.Before != nil, nil
}

func instanceRowOf(ctx context.Context, in engine.Instance) instanceRow {
	row := instanceRow{ID: in.ID.String(), Href: instanceHref(in.ID), Process: processAtVersion(ctx, in.ProcessKey, in.Version),
		ProcessHref: processVersionHref(in.ProcessKey, in.Version), Status: in.Status, StatusLabel: statusLabel(ctx, in.Status),
		Created: listTime(ctx, in.CreatedAt), Ended: listTimePtr(ctx, in.EndedAt)}
	if in.BusinessKey != nil {
		row.BusinessKey = *in.BusinessKey
	}
	if in.ErrorCode != nil {
		row.ErrorCode = *in.ErrorCode
	}
	if in.EndNode != nil {
		row.EndNode = *in.EndNode
	}
	return row
}

// bulkApplies reports whether action a, over what f matches, can change
// anything: a retry of running instances brings their waiting retries
// forward, retrying_at keeps running instances (no abandon).
func bulkApplies(a engine.Action, f instanceFilter) bool {
	switch {
	case a == engine.ActionAbandon && f.RetryingAt != "":
		return false
	case bringsForward(a, f):
		// Running instances have no error code and are held nowhere.
		return f.ErrorCode == "" && f.HeldAt == ""
	}
	return f.Status == "" || actionAppliesTo(a, f.Status)
}

// actionAppliesTo reports whether action changes an instance in status.
func actionAppliesTo(a engine.Action, status string) bool {
	if a == engine.ActionStop {
		return status == engine.InstanceRunning || status == engine.InstanceHeld
	}
	return status == engine.InstanceHeld
}
