package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
)

const (
	// defaultPageSize is the lists' page size.
	defaultPageSize = 50
	// maxPageSize bounds ?limit= so one request cannot ask for the table.
	maxPageSize = 200
	// maxOptions bounds the definitions, processes and consumers offered
	// in filter forms; a longer list would not be usable as a menu anyway.
	maxOptions = 500
)

// occurrenceFilter is the operations view's query, exactly as it appears
// in the URL so that a view can be shared.
type occurrenceFilter struct {
	Definition, Status, Instance, Revision, Consumer string
	Destination                                      string
	// WaitingRetry is "true" for the occurrences waiting out a retry
	// delay only.
	WaitingRetry                                   string
	Process, BusinessKey, ErrorCode                string
	CreatedFrom, CreatedTo, SettledFrom, SettledTo string
	Limit                                          string
	Page                                           page
}

// occurrenceParams are the parameters the operations view reads: its
// filters (query's) and its page.
var occurrenceParams = append([]string{"definition", "status", "instance", "revision", "consumer", "destination", "process", "business_key",
	"error_code", "created_from", "created_to", "settled_from", "settled_to", "waiting_retry", "limit"}, pagingParams...)

func filterFromQuery(q url.Values) occurrenceFilter {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return occurrenceFilter{Definition: get("definition"), Status: get("status"), Instance: get("instance"),
		Revision: get("revision"), Consumer: get("consumer"), Destination: get("destination"), Process: get("process"), BusinessKey: get("business_key"),
		ErrorCode: get("error_code"), CreatedFrom: get("created_from"), CreatedTo: get("created_to"),
		SettledFrom: get("settled_from"), SettledTo: get("settled_to"), WaitingRetry: get("waiting_retry"), Limit: get("limit"), Page: pageFromQuery(q)}
}

// query encodes the filter, without empty parameters.
func (f occurrenceFilter) query() url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"definition", f.Definition}, {"status", f.Status}, {"instance", f.Instance},
		{"revision", f.Revision}, {"consumer", f.Consumer}, {"destination", f.Destination}, {"process", f.Process}, {"business_key", f.BusinessKey},
		{"error_code", f.ErrorCode}, {"created_from", f.CreatedFrom}, {"created_to", f.CreatedTo},
		{"settled_from", f.SettledFrom}, {"settled_to", f.SettledTo}, {"waiting_retry", f.WaitingRetry}, {"limit", f.Limit}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	f.Page.set(q)
	return q
}

func (f occurrenceFilter) href() string {
	if q := f.query().Encode(); q != "" {
		return homePath + "?" + q
	}
	return homePath
}

// narrowed reports whether the filter selects by more than the
// definition: the counts by status, cached per definition, then cannot
// follow it and say so.
func (f occurrenceFilter) narrowed() bool {
	// A status too: its count is highlighted, but the total beside it
	// read as the list's above "no occurrence matches" (console QA).
	return f.Status != "" || f.Instance != "" || f.Revision != "" || f.Consumer != "" || f.Destination != "" || f.Process != "" || f.BusinessKey != "" ||
		f.ErrorCode != "" || f.CreatedFrom != "" || f.CreatedTo != "" || f.SettledFrom != "" || f.SettledTo != "" || f.WaitingRetry != ""
}

// moreOpen reports whether a filter of the form's second part is set, so
// that it opens unfolded.
func (f occurrenceFilter) moreOpen() bool {
	return f.Instance != "" || f.Revision != "" || f.Consumer != "" || f.Destination != "" || f.CreatedFrom != "" || f.CreatedTo != "" ||
		f.SettledFrom != "" || f.SettledTo != ""
}

// engineFilter validates the filter; each problem is a translated message.
func (f occurrenceFilter) engineFilter(ctx context.Context) (engine.OccurrenceFilter, filterProblems) {
	ef := engine.OccurrenceFilter{Definition: f.Definition, ProcessKey: f.Process, BusinessKey: f.BusinessKey,
		ErrorCode: f.ErrorCode, Limit: defaultPageSize}
	var errs filterProblems
	if f.Status != "" {
		if !slices.Contains(occurrenceStatuses, f.Status) {
			errs.add(unknownStatus(ctx, f.Status, occurrenceStatuses), "status")
		}
		ef.Status = f.Status
	}
	switch f.WaitingRetry {
	case "":
	case "false", "true":
		waiting := f.WaitingRetry == "true"
		ef.WaitingRetry = &waiting
		if waiting && f.Status != "" && f.Status != engine.StatusAvailable {
			// Nothing would match, which would read as none waiting.
			errs.add(T(ctx, "An occurrence waiting for a retry is available: choose the status available, or none."), "status", "waiting_retry")
		}
	default:
		errs.add(T(ctx, "Unknown value of the next attempt filter."), "waiting_retry")
	}
	if f.Instance != "" {
		id, err := uuid.Parse(f.Instance)
		if err != nil {
			errs.add(T(ctx, "The process instance must be a whole instance id (a UUID): the lists show the end of each id; open the instance, or copy its link, for the whole id."), "instance")
		}
		ef.Instance = &id
	}
	if f.Revision != "" {
		n, err := strconv.Atoi(f.Revision)
		switch {
		case err != nil || n < 1:
			errs.add(T(ctx, "The revision must be a whole number, 1 or more."), "revision")
		case f.Definition == "":
			// Revision 1 of every definition is no selection anyone means.
			errs.add(T(ctx, "A revision is a definition’s: choose the definition too."), "revision", "definition")
		}
		ef.Revision = n
	}
	if f.Consumer != "" {
		n, err := strconv.ParseInt(f.Consumer, 10, 64)
		if err != nil || n < 1 {
			errs.add(T(ctx, "Unknown consumer."), "consumer")
		}
		ef.ConsumerID = n
	}
	if f.Destination != "" {
		if !engine.IsDestinationName(f.Destination) {
			errs.add(T(ctx, "Unknown destination “%s”.", f.Destination), "destination")
		}
		ef.Destination = f.Destination
	}
	var e []string
	ef.CreatedAfter, ef.CreatedBefore, e = dayBounds(ctx, f.CreatedFrom, f.CreatedTo, T(ctx, "Creation date"))
	errs.addAll(e, "created_from", "created_to")
	ef.SettledAfter, ef.SettledBefore, e = dayBounds(ctx, f.SettledFrom, f.SettledTo, T(ctx, "Settlement date"))
	errs.addAll(e, "settled_from", "settled_to")
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

// option is one entry of a <select>.
type option struct {
	Value    string
	Label    string
	Selected bool
}

// statusCount is one status in the counts bar.
type statusCount struct {
	Status  string
	Label   string
	Count   string
	Href    string
	Current bool
}

// occurrenceRow is one line of the operations view.
type occurrenceRow struct {
	ID, Href                   string
	Definition, DefinitionHref string
	Revision                   string
	Process, ProcessHref, Node string
	BusinessKey                string
	Status, StatusLabel        string
	Attempts                   string
	ErrorCode, ErrorMessage    string
	// ErrorLang is "en" when Relais wrote ErrorMessage (its own codes),
	// empty for a worker's or destination's own words.
	ErrorLang string
	// ErrorBefore labels an error an earlier attempt ended with, on an
	// occurrence that did not fail (completed after a retry, waiting for
	// its next attempt): read bare, a completed row's code read as its
	// outcome. Empty on a failed occurrence, whose error it is.
	ErrorBefore      string
	Consumer, Worker string
	// When says what the occurrence waits for or when it settled.
	WhenLabel                string
	When                     timeView
	Created                  timeView
	InstanceID, InstanceHref string
	// Holds marks a failure its instance is held at (an incident), which
	// the status alone reads as one that failed its instance; HoldsHref
	// leads to the instance's actions.
	Holds, HoldsHref string
}

// occurrenceHeads are the column names, also each card's labels.
type occurrenceHeads struct {
	ID, Definition, Process, BusinessKey, Status, Attempts, Error, Consumer, When, Instance string
}

// occurrenceListView is the operations view.
type occurrenceListView struct {
	Chrome chrome

	FiltersLabel, MoreFilters                                                 string
	DefinitionLabel, StatusLabel, InstanceLabel, RevisionLabel, ConsumerLabel string
	DestinationLabel, DestinationHint                                         string
	ProcessLabel, BusinessKeyLabel, BusinessKeyHint, ErrorCodeLabel           string
	CreatedLabel, SettledLabel, FromLabel, ToLabel                            string
	Apply, Reset, ResetHref                                                   string
	InstancePlaceholder                                                       string
	DefinitionOptions, StatusOptions, ConsumerOptions, ProcessOptions         []option
	WaitingLabel                                                              string
	WaitingOptions                                                            []option
	// UnknownKey says a filter names a key nothing has: its counts (zeros
	// under that key's name) are not shown.
	UnknownKey bool
	Filter     occurrenceFilter
	MoreOpen   bool
	Errors     []string
	Invalid    map[string]bool // the query parameters an error is about

	CountsLabel   string
	CountsScope   string
	CountsTotal   string
	CountsNote    string
	CountsMissing string
	Counts        []statusCount

	TableLabel string
	// MessageLabel opens a row's error message; RelaisMessageLabel one
	// Relais wrote, in English whatever the page's language.
	MessageLabel, RelaisMessageLabel string
	Head                             occurrenceHeads
	Rows                             []occurrenceRow
	Empty                            string
	Pager                            pagerView
}

// occurrenceList is the operations view: occurrences newest first, filtered
// by the query, with counts by status and keyset pagination both ways.
func (c *Console) occurrenceList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := filterFromQuery(r.URL.Query())
	ef, problems := f.engineFilter(ctx)
	errs := append(queryProblems(ctx, r.URL.RawQuery, occurrenceParams...), problems.Texts...)

	v := occurrenceListView{
		Chrome:       c.liveChrome(r, T(ctx, "External tasks"), "occurrences"),
		FiltersLabel: T(ctx, "Filters"), MoreFilters: T(ctx, "More filters: instance, revision, consumer, destination, dates"),
		DestinationLabel: T(ctx, "Push destination"), DestinationHint: T(ctx, "its name, exactly"),
		DefinitionLabel: T(ctx, "Definition"), StatusLabel: T(ctx, "Status"), WaitingLabel: T(ctx, "Next attempt"),
		InstanceLabel: T(ctx, "Process instance"), RevisionLabel: T(ctx, "Revision"), ConsumerLabel: T(ctx, "Consumer"),
		ProcessLabel: T(ctx, "Process"), BusinessKeyLabel: T(ctx, "Business key"), BusinessKeyHint: T(ctx, "exact, case-sensitive"), ErrorCodeLabel: T(ctx, "Error code"),
		CreatedLabel: T(ctx, "Creation date"), SettledLabel: T(ctx, "Settlement date"), FromLabel: T(ctx, "from"), ToLabel: T(ctx, "to"),
		InstancePlaceholder: T(ctx, "instance id"),
		Apply:               T(ctx, "Apply filters"), Reset: T(ctx, "Clear filters"), ResetHref: homePath,
		Filter:   f,
		MoreOpen: f.moreOpen(),
		Errors:   errs, Invalid: problems.Params,
		CountsLabel: T(ctx, "Counts by status"),
		TableLabel:  T(ctx, "Occurrences, newest first"),
		// TRANSLATORS: under an error code in the list, opens the error's message.
		MessageLabel: T(ctx, "Message"), RelaisMessageLabel: T(ctx, "Message from Relais"),
		Head: occurrenceHeads{ID: T(ctx, "Occurrence"), Definition: T(ctx, "Definition"), Process: T(ctx, "Process and node"),
			BusinessKey: T(ctx, "Business key"), Status: T(ctx, "Status"), Attempts: T(ctx, "Attempts"), Error: T(ctx, "Error"),
			Consumer: T(ctx, "Consumer and worker"), When: T(ctx, "Next attempt or settled"), Instance: T(ctx, "Process instance")},
		Empty: T(ctx, "No occurrence matches these filters."),
	}
	if f.ErrorCode != "" {
		// Codes are workers' own spelling (on-call QA: psp_down found
		// nothing, silently, where PSP_DOWN was meant).
		v.Empty += " " + T(ctx, "An error code is matched exactly, capitals included.")
	}

	menus, _, err := c.menus.Get(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v.DefinitionOptions = menuOptions(T(ctx, "All definitions"), menus.definitions, f.Definition)
	v.ProcessOptions = menuOptions(T(ctx, "All processes"), menus.processes, f.Process)
	v.WaitingOptions = []option{{Value: "", Label: T(ctx, "Any"), Selected: f.WaitingRetry == ""},
		{Value: "true", Label: T(ctx, "Waiting for a retry (due later)"), Selected: f.WaitingRetry == "true"}}
	v.StatusOptions = []option{{Value: "", Label: T(ctx, "All statuses"), Selected: f.Status == ""}}
	for _, s := range occurrenceStatuses {
		v.StatusOptions = append(v.StatusOptions, option{Value: s, Label: statusLabel(ctx, s), Selected: s == f.Status})
	}
	v.ConsumerOptions = []option{{Value: "", Label: T(ctx, "All consumers"), Selected: f.Consumer == ""}}
	listed := false
	for _, cs := range menus.consumers {
		id := strconv.FormatInt(cs.id, 10)
		v.ConsumerOptions = append(v.ConsumerOptions, option{Value: id, Label: cs.name, Selected: id == f.Consumer})
		listed = listed || id == f.Consumer
	}
	if f.Consumer != "" && !listed {
		consumer := f.Consumer
		v.ConsumerOptions = append(v.ConsumerOptions, option{Value: consumer, Label: T(ctx, "consumer #%s", consumer), Selected: true})
	}

	c.occurrenceCounts(r, f, &v)

	if len(errs) == 0 {
		limit := ef.Limit
		occs, moreOlder, moreNewer, err := c.occurrencePage(ctx, ef, limit)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		if len(occs) == 0 && ef.Before == nil && ef.After == nil {
			// As the instances list: a key nothing has is said, not
			// listed empty.
			unknown, err := c.unknownOccurrenceKeys(ctx, ef)
			if err != nil {
				c.serverError(w, r, err)
				return
			}
			if len(unknown.Texts) > 0 {
				v.Errors, v.Invalid, v.UnknownKey = unknown.Texts, unknown.Params, true
				c.render(w, r, http.StatusBadRequest, occurrenceListPage(v))
				return
			}
		}
		var failed []uuid.UUID
		for _, o := range occs {
			if o.Status == engine.StatusFailed {
				failed = append(failed, o.ID)
			}
		}
		holding, err := c.eng.HoldingInstance(ctx, failed)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		ids := make([]string, len(occs))
		for i, o := range occs {
			row := occurrenceRowOf(ctx, o)
			if holding[o.ID] {
				row.Holds, row.HoldsHref = T(ctx, "instance held here"), instanceHref(o.InstanceID)+"#actions"
			}
			v.Rows = append(v.Rows, row)
			ids[i] = o.ID.String()
		}
		cur := f.Page
		if ef.After != nil && ef.Before == nil && !moreNewer {
			cur = page{} // the page above the cursor is the first page
		}
		v.Pager = keysetPage(ctx, cur, ids, limit, moreOlder, moreNewer, func(p page) string {
			g := f
			g.Page = p
			return g.href()
		})
	}
	c.render(w, r, listStatus(v.Errors), occurrenceListPage(v))
}

// occurrencePage reads one page of ef (before a cursor, after one, or the
// first), newest first, and whether older and newer rows exist beyond it.
// A previous page that comes back short is the start of the list: the
// first page is read instead, so that it shows full.
func (c *Console) occurrencePage(ctx context.Context, ef engine.OccurrenceFilter, limit int) (occs []engine.Occurrence, moreOlder, moreNewer bool, err error) {
	ef.Limit = limit + 1 // one more than the page says whether more follow
	occs, err = c.eng.ListOccurrences(ctx, ef)
	if err != nil {
		return nil, false, false, err
	}
	if ef.After != nil && ef.Before == nil {
		if len(occs) > limit {
			// Read upwards and returned newest first: the extra row is the
			// newest, beyond the page.
			return occs[1:], true, true, nil
		}
		if len(occs) == limit {
			return occs, true, false, nil
		}
		ef.After = nil
		occs, err = c.eng.ListOccurrences(ctx, ef)
		if err != nil {
			return nil, false, false, err
		}
	}
	moreOlder = len(occs) > limit
	if moreOlder {
		occs = occs[:limit]
	}
	return occs, moreOlder, ef.Before != nil, nil
}

// occurrenceCounts fills the counts by status: cached per definition (a
// count over a million rows per request would not do), scoped to the
// definition filter, labelled as totals when other filters narrow the list
// further, and dated.
func (c *Console) occurrenceCounts(r *http.Request, f occurrenceFilter, v *occurrenceListView) {
	ctx := r.Context()
	switch key := f.Definition; {
	case key != "" && f.narrowed():
		v.CountsScope = T(ctx, "Totals of definition %s, not narrowed by the other filters", key)
	case key != "":
		v.CountsScope = T(ctx, "Definition %s", key)
	case f.narrowed():
		v.CountsScope = T(ctx, "Totals of all definitions, not narrowed by the other filters")
	default:
		v.CountsScope = T(ctx, "All definitions")
	}
	snap, at, err := c.counts(ctx)
	if err != nil {
		v.CountsMissing = c.countsMissing(ctx, err)
		return
	}
	byStatus := snap.forDefinition(f.Definition)
	var total int64
	for _, s := range occurrenceStatuses {
		n := byStatus[s]
		total += n
		link := occurrenceFilter{Definition: f.Definition, Status: s}
		v.Counts = append(v.Counts, statusCount{Status: s, Label: statusLabel(ctx, s), Count: number(ctx, n),
			Href: link.href(), Current: s == f.Status})
	}
	v.CountsTotal = T(ctx, "%d occurrences", total)
	when := formatTime(ctx, at)
	v.CountsNote = T(ctx, "as of %s (%s); counts are recounted every few seconds, shown anew at each reload.", when.Text, when.Rel)
}

// menuOptions is a filter's <select>: every choice, and the current value
// even when the menu does not list it (a shared link), so it stays visible.
func menuOptions(all string, values []string, current string) []option {
	out := []option{{Value: "", Label: all, Selected: current == ""}}
	for _, k := range values {
		out = append(out, option{Value: k, Label: k, Selected: k == current})
	}
	if current != "" && !slices.Contains(values, current) {
		out = append(out, option{Value: current, Label: current, Selected: true})
	}
	return out
}

func occurrenceRowOf(ctx context.Context, o engine.Occurrence) occurrenceRow {
	row := occurrenceRow{
		ID: o.ID.String(), Href: occurrenceHref(o.ID), Definition: o.Definition,
		DefinitionHref: revisionHref(o.Definition, o.Revision), Revision: T(ctx, "revision %d", o.Revision), Node: o.Node,
		Process: o.ProcessKey, Status: o.Status, StatusLabel: statusLabel(ctx, o.Status), Attempts: T(ctx, "%d attempts", o.Attempts),
		InstanceID: o.InstanceID.String(), InstanceHref: instanceHref(o.InstanceID),
		Consumer: o.ConsumerName,
	}
	if o.ProcessKey != "" && o.ProcessVersion > 0 {
		row.ProcessHref = processVersionHref(o.ProcessKey, o.ProcessVersion)
	}
	if o.BusinessKey != nil {
		row.BusinessKey = *o.BusinessKey
	}
	if row.Consumer == "" && o.ConsumerID != nil {
		consumer := strconv.FormatInt(*o.ConsumerID, 10)
		row.Consumer = T(ctx, "consumer #%s", consumer)
	}
	if o.WorkerID != nil {
		row.Worker = *o.WorkerID
	}
	if o.ErrorCode != nil {
		row.ErrorCode = *o.ErrorCode
		if o.Status != engine.StatusFailed {
			// TRANSLATORS: before an error code in the occurrences list, on an occurrence that did not fail: an earlier attempt's error.
			row.ErrorBefore = T(ctx, "Earlier attempt:")
		}
		if o.ErrorMessage != nil {
			row.ErrorMessage = errorMessage(ctx, *o.ErrorMessage)
			// Without its attempts, a pull occurrence's code is Relais's
			// only when no worker may report it.
			if relaisCode(row.ErrorCode) && (o.Mode != engine.ModePull || engine.ReservedCode(row.ErrorCode)) {
				row.ErrorLang = "en"
			}
		}
	}
	row.WhenLabel, row.When = whenOf(ctx, o)
	return row
}

// whenOf says, in a list, what an occurrence waits for and until when, or
// when it settled.
func whenOf(ctx context.Context, o engine.Occurrence) (string, timeView) {
	now := prefsOf(ctx).now
	switch o.Status {
	case engine.StatusCompleted, engine.StatusFailed, engine.StatusCancelled:
		return T(ctx, "settled"), listTimePtr(ctx, o.SettledAt)
	case engine.StatusAvailable:
		if o.AvailableAt.After(now) {
			return T(ctx, "next attempt"), listTime(ctx, o.AvailableAt)
		}
		return T(ctx, "claimable since"), listTime(ctx, o.AvailableAt)
	case engine.StatusReserved:
		if o.Mode == "push" {
			return T(ctx, "call in progress since"), listTimePtr(ctx, o.ReservedAt)
		}
		return T(ctx, "lock until"), listTimePtr(ctx, o.LockExpiresAt)
	case engine.StatusDeferred:
		return T(ctx, "deferred since"), listTimePtr(ctx, o.DeferredAt)
	}
	return "", timeView{}
}

func occurrenceHref(id uuid.UUID) string { return basePath + "/occurrences/" + id.String() }

func instanceHref(id uuid.UUID) string { return basePath + "/instances/" + id.String() }

func definitionHref(key string) string { return basePath + "/definitions/" + url.PathEscape(key) }

// revisionHref links to one revision's section of its definition's page.
func revisionHref(key string, n int) string {
	return definitionHref(key) + "#revision-" + strconv.Itoa(n)
}

// processVersionHref links to a process version's page.
func processVersionHref(key string, version int) string {
	return processesPath + "/" + url.PathEscape(key) + "/versions/" + strconv.Itoa(version)
}

// invalidField is the attributes of a filter's field an error is about:
// marked invalid, and described by the errors (filterErrors' id), so that
// a screen reader says so on the field itself.
func invalidField(invalid bool) templ.Attributes {
	if !invalid {
		return nil
	}
	return templ.Attributes{"aria-invalid": "true", "aria-describedby": "filter-errors"}
}

// listStatus is a list page's status: 400 when a filter could not be
// applied, as the bulk page answers the same filters.
func listStatus(errs []string) int {
	if len(errs) > 0 {
		return http.StatusBadRequest
	}
	return http.StatusOK
}
