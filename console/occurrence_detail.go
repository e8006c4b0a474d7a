package console

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/isoduration"
)

// fact is one labelled value of a detail page.
type fact struct {
	Label  string
	Value  string
	Time   timeView // shown instead of Value when set
	Href   string   // Value links there when set
	TestID string
	Badge  string // status key: Value shows as a status badge
	Code   bool   // Value is an identifier or code
	// Note follows the value, in the reader's language (what an error
	// code means, a relative time).
	Note string
	// Lang marks Value as written in another language than the page (an
	// engine message kept in English) for assistive technology.
	Lang string
	// Message marks Value as an error message: it keeps its line breaks
	// (a stack trace) and wraps anywhere (a URL, an HTML answer).
	Message bool
}

// attemptRow is one reservation of the occurrence.
type attemptRow struct {
	Number       string
	Consumer     string
	Worker       string
	Reserved     timeView
	Ended        timeView
	Duration     string
	HTTP         string // push attempts: the destination's answer, as far as it is known
	Outcome      string
	OutcomeKey   string
	ErrorCode    string
	ErrorMessage string
	// ErrorShort, when set, is the start of a long ErrorMessage: the
	// table shows it, the whole message one click away.
	ErrorShort string
	// ErrorBy, when set, says Relais wrote ErrorMessage, in ErrorLang.
	ErrorBy   string
	ErrorLang string
	// Refused says which of the attempt's reports Relais refused: an
	// attempt that then expired had a worker that answered.
	Refused string
	// RetriedBefore, on the first attempt after an operator's retry, says
	// whose and when (on-call QA: nothing marked where the fresh budget
	// began).
	RetriedBefore string
}

// maxAttemptRows bounds the attempts an occurrence's page lists: the
// latest, the earlier ones counted.
const maxAttemptRows = 100

// shortMessage is how many characters of an error message the attempts
// table shows before cutting it.
const shortMessage = 160

// cutMessage is the start of msg, cut at a space, when msg is longer than
// shortMessage characters; "" when it is short enough to show whole.
func cutMessage(msg string) string {
	r := []rune(msg)
	if len(r) <= shortMessage {
		return ""
	}
	cut := string(r[:shortMessage])
	if i := strings.LastIndexByte(cut, ' '); i > shortMessage/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}

// valueTable is the inputs or outputs of an occurrence or an instance.
type valueTable struct {
	Title   string
	TestID  string
	Caption string
	Empty   string
	Rows    []valueRow
	// Reveal, when set, puts a reveal form on every row masked as
	// sensitive; it is set for admins only, on occurrence pages.
	Reveal *revealControl
}

// revealable reports whether the table shows a reveal form.
func (t valueTable) revealable() bool {
	return t.Reveal != nil && slices.ContainsFunc(t.Rows, func(r valueRow) bool { return r.Masked && r.Sensitive })
}

// revealControl is what each reveal form of a value table carries.
type revealControl struct {
	Action string
	CSRF   string
	Side   string // engine.SideInputs or engine.SideOutputs
	Label  string
	// ReasonLabel names the reason field (required, recorded with the
	// reveal); ReasonMax bounds it as the engine does.
	ReasonLabel string
	ReasonMax   string
	// ReasonHint says the reason outlives retention.
	ReasonHint string
}

// occurrenceView is the occurrence detail page.
type occurrenceView struct {
	Chrome chrome

	SummaryLabel string
	Summary      []fact
	DatesLabel   string
	Dates        []fact
	PolicyLabel  string
	Policy       []fact

	// State says in words what the occurrence is doing or waiting for.
	StateLabel, State string
	StateTime         timeView
	StateNote         string
	ActionHref        string
	ActionLabel       string

	AttemptsLabel, AttemptsSummary, AttemptsCaption string
	// AttemptsHidden, when set, says how many earlier attempts the table
	// leaves out (see maxAttemptRows).
	AttemptsHidden                                                    string
	HeadNumber, HeadConsumer, HeadWorker, HeadReserved, HeadEnded     string
	HeadDuration, HeadHTTP                                            string
	HeadOutcome, HeadErrorCode, HeadErrorMessage, NoAttempts, Running string
	WholeMessage                                                      string
	Push                                                              bool
	HTTPNote                                                          string
	Attempts                                                          []attemptRow

	HeadField, HeadValue string
	Inputs, Outputs      valueTable
}

// occurrenceDetail shows one occurrence: where it belongs, its state,
// dates, policy, attempts, and its inputs and outputs under the masking
// rules.
func (c *Console) occurrenceDetail(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	v, err := c.occurrenceView(r, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, occurrencePage(v))
}

// occurrenceView builds the occurrence page, with reveal forms on its
// sensitive rows when the session is an admin's.
func (c *Console) occurrenceView(r *http.Request, id uuid.UUID) (occurrenceView, error) {
	ctx := r.Context()
	o, err := c.eng.GetOccurrence(ctx, id)
	if err != nil {
		return occurrenceView{}, err
	}
	rev, err := c.eng.GetRevision(ctx, o.Definition, o.Revision)
	if err != nil {
		return occurrenceView{}, err
	}

	inst, err := c.eng.GetInstance(ctx, o.InstanceID)
	if err != nil {
		return occurrenceView{}, err
	}
	holds := false
	if inst.Status == engine.InstanceHeld && o.Status == engine.StatusFailed {
		// Held here, or past this failure along an error path and held
		// at a later node: only the instance's latest failure holds it.
		held, err := c.eng.HoldingInstance(ctx, []uuid.UUID{o.ID})
		if err != nil {
			return occurrenceView{}, err
		}
		holds = held[o.ID]
	}
	push := o.Mode == "push"
	limits, destCap := c.eng.ProcessLimits(), c.destinationCap(ctx, o)
	v := occurrenceView{
		Chrome:          c.liveChrome(r, T(ctx, "Occurrence %s", id), "occurrences"),
		SummaryLabel:    T(ctx, "Summary"),
		Summary:         c.occurrenceSummary(ctx, o, inst, holds),
		DatesLabel:      T(ctx, "Dates"),
		Dates:           occurrenceDates(ctx, o),
		PolicyLabel:     T(ctx, "Policy"),
		Policy:          occurrencePolicy(ctx, o, limits, destCap),
		AttemptsLabel:   T(ctx, "Attempts"),
		AttemptsCaption: T(ctx, "Every attempt, oldest first"),
		HeadNumber:      "#", HeadConsumer: T(ctx, "Consumer"), HeadWorker: T(ctx, "Worker id"),
		HeadReserved: T(ctx, "Reserved"), HeadEnded: T(ctx, "Finished"), HeadDuration: T(ctx, "Duration"),
		HeadHTTP:    T(ctx, "Destination’s answer"),
		HeadOutcome: T(ctx, "Outcome"), HeadErrorCode: T(ctx, "Error code"), HeadErrorMessage: T(ctx, "Error message"),
		NoAttempts:   T(ctx, "No worker has reserved this occurrence yet."),
		Running:      T(ctx, "in progress"),
		WholeMessage: T(ctx, "Whole message"),
		HeadField:    T(ctx, "Field"), HeadValue: T(ctx, "Value"),
		Push: push,
	}
	if settled(o.Status) {
		v.NoAttempts = T(ctx, "No worker ever reserved this occurrence: it ended before any attempt.")
	}
	if push {
		v.HeadConsumer, v.HeadWorker = T(ctx, "Destination"), T(ctx, "Replica")
		v.NoAttempts = T(ctx, "Relais has not called the destination yet.")
		if settled(o.Status) {
			v.NoAttempts = T(ctx, "Relais never called the destination: the occurrence ended before any call.")
		}
		v.HTTPNote = T(ctx, "Relais keeps the destination’s status code only when it refused the call (destination_http_NNN); a completed call answered 2xx. The duration runs from the claim of the call to its settlement.")
	}
	stop := c.stopRecord(ctx, o, inst)
	v.StateLabel = T(ctx, "Now")
	called := o // its calls' budget, not the node's timeout, tells when one has ended
	if o.Timeout != nil {
		budget := engine.CallBudget(*o.Timeout, destCap, limits.MaxPushTimeout)
		called.Timeout = &budget
	}
	v.State, v.StateTime, v.StateNote = occurrenceState(ctx, called, inst, holds, stop)
	if v.StateNote == "" {
		v.StateNote = c.nobodyTakes(ctx, o, rev)
	}
	if holds {
		v.ActionHref, v.ActionLabel = instanceHref(inst.ID)+"#actions", T(ctx, "Retry or abandon it from its instance")
	}
	retries := c.retries(ctx, o, inst)
	v.AttemptsSummary = attemptsSummary(ctx, o, len(retries) > 0)
	shown := o.AttemptList
	if n := len(shown); n > maxAttemptRows {
		// A worker that releases what it cannot take now, in a loop,
		// writes an attempt each time (Camunda QA: 1,000 rows, 835 KB):
		// the latest are the ones an operator reads.
		shown = shown[n-maxAttemptRows:]
		hidden, total, occurrence := number(ctx, int64(n-maxAttemptRows)), number(ctx, int64(n)), id.String()
		v.AttemptsCaption = T(ctx, "The latest %d attempts, oldest first", maxAttemptRows)
		v.AttemptsHidden = T(ctx, "The %s earlier attempts (of %s) are not shown: GET /api/v1/occurrences/%s lists them all.", hidden, total, occurrence)
	}
	var previous time.Time
	for _, a := range shown {
		row := attemptRowOf(ctx, a, push, o.DeferredAt != nil, o.Destination)
		for _, r := range retries {
			if r.At.After(previous) && !r.At.After(a.ReservedAt) {
				who, when := r.ActorName, formatTime(ctx, r.At).Text
				row.RetriedBefore = T(ctx, "after %s’s retry at %s", who, when)
			}
		}
		previous = a.ReservedAt
		v.Attempts = append(v.Attempts, row)
	}
	v.Inputs, v.Outputs = occurrenceValues(ctx, id, o, rev)
	if v.Inputs.revealable() || v.Outputs.revealable() {
		// A reload would lose the reason an admin is typing.
		v.Chrome.still()
	}
	return v, nil
}

// occurrenceSummary is what the occurrence is: where it comes from, its
// state, and its last error.
func (c *Console) occurrenceSummary(ctx context.Context, o engine.Occurrence, inst engine.Instance, holds bool) []fact {
	fs := []fact{
		{Label: T(ctx, "Definition"), Value: definitionAtRevision(ctx, o.Definition, o.Revision),
			Href: revisionHref(o.Definition, o.Revision), TestID: "definition-link"},
		{Label: T(ctx, "Process instance"), Value: o.InstanceID.String(), Href: instanceHref(o.InstanceID), TestID: "instance-link", Code: true},
		{Label: T(ctx, "Process"), Value: processAtVersion(ctx, inst.ProcessKey, inst.Version), Href: processVersionHref(inst.ProcessKey, inst.Version)},
		{Label: T(ctx, "Node"), Value: o.Node, Code: true},
		{Label: T(ctx, "Mode"), Value: modeLabel(ctx, o.Mode)},
		{Label: T(ctx, "Status"), Value: statusLabel(ctx, o.Status), Badge: o.Status, TestID: "status"},
	}
	if o.BusinessKey != nil {
		fs = append(fs, fact{Label: T(ctx, "Business key"), Value: *o.BusinessKey, Code: true, TestID: "business-key"})
	}
	if o.Route != nil {
		fs = append(fs, fact{Label: T(ctx, "Route"), Value: *o.Route, Code: true, TestID: "route"})
	}
	fs = append(fs, c.lastError(ctx, o, holds)...)
	// Kept once settled: who waited for what, and how long, is the
	// history an operator reads after a person's decision.
	if o.DeferReason != nil {
		fs = append(fs, fact{Label: T(ctx, "Reason given by the worker"), Value: *o.DeferReason, TestID: "defer-reason"})
	}
	return fs
}

// destinationCap is the max_timeout of o's destination as it stands, or
// nil when o is no push call, is settled (its calls are over: the page
// reads their budget from its message), or its destination is gone (the
// page is shown without it).
func (c *Console) destinationCap(ctx context.Context, o engine.Occurrence) *time.Duration {
	if o.Destination == nil || o.Timeout == nil || settled(o.Status) {
		return nil
	}
	d, err := c.eng.GetDestination(ctx, *o.Destination)
	if err != nil {
		return nil
	}
	return &d.MaxTimeout
}

// occurrencePolicy is the occurrence's retry policy; for a push call, its
// destination and timeout, and the shorter budget its calls get when the
// destination's max_timeout (destCap) or Relais's ceiling cuts it.
func occurrencePolicy(ctx context.Context, o engine.Occurrence, limits process.Limits, destCap *time.Duration) []fact {
	retries := fact{Label: T(ctx, "Maximum attempts"), Value: number(ctx, o.Policy.MaxAttempts)}
	delay := &fact{Label: T(ctx, "Retry delay"), Value: retryDelayText(ctx, o.Policy.RetryDelay, o.Policy.RetryBackoff, o.Policy.MaxRetryDelay, limits.MaxRetryDelay)}
	if o.Mode == "push" {
		// A push call is never retried: its failure takes the node's
		// error path at once, whatever max_attempts says.
		retries, delay = fact{Label: T(ctx, "Retries"), Value: T(ctx, "none: a failed call takes the node’s error path")}, nil
	}
	fs := []fact{retries}
	if delay != nil {
		fs = append(fs, *delay)
	}
	fs = append(fs,
		fact{Label: T(ctx, "Deadline"), Value: optionalDuration(ctx, o.Policy.Deadline)},
		fact{Label: T(ctx, "Priority"), Value: T(ctx, "%d (0 lowest, 9 highest)", o.Policy.Priority)})
	if o.Destination != nil {
		fs = append(fs, fact{Label: T(ctx, "Destination"), Value: *o.Destination, Code: true})
	}
	if o.Timeout != nil {
		value := callTimeoutText(ctx, *o.Timeout, limits.MaxPushTimeout, destCap)
		if settled(o.Status) {
			// Its calls are over: the budget they had is the one its last
			// error names, not what the destination allows now (verifier
			// QA: a call made with 5 s read "cut to 2 seconds" once the
			// destination was lowered after it).
			value = formatDuration(ctx, *o.Timeout)
			msg := ""
			if o.ErrorMessage != nil {
				msg = *o.ErrorMessage
			}
			if budget, ok := callBudget(msg, o.Timeout); ok && budget < *o.Timeout {
				node, had := value, formatDuration(ctx, budget)
				value = T(ctx, "%s; its last call had %s (a destination’s max_timeout or RELAIS_PUSH_MAX_TIMEOUT cut it)", node, had)
			}
		}
		fs = append(fs, fact{Label: T(ctx, "Call timeout"), Value: value, TestID: "call-timeout"})
	}
	return fs
}

// callTimeoutText is a push node's call timeout, and what its calls get
// when that is shorter (the runner gives the least of the three): the page
// said 5 seconds of a call a destination's max_timeout cut at 2 (push QA).
func callTimeoutText(ctx context.Context, timeout, ceiling time.Duration, destCap *time.Duration) string {
	node := formatDuration(ctx, timeout)
	got := engine.CallBudget(timeout, destCap, ceiling)
	switch {
	case got == timeout:
		return node
	case destCap != nil && got == *destCap:
		budget := formatDuration(ctx, got)
		return T(ctx, "%s, cut to %s by the destination’s max_timeout", node, budget)
	}
	budget := formatDuration(ctx, got)
	return T(ctx, "%s, cut to %s by RELAIS_PUSH_MAX_TIMEOUT", node, budget)
}

// retryDelayText says how long a retryable failure waits: a fixed delay,
// or one that grows after each failure, up to its cap (nil: Relais's
// ceiling, as it stands).
func retryDelayText(ctx context.Context, delay time.Duration, backoff float64, capped *time.Duration, ceiling time.Duration) string {
	first := formatDuration(ctx, delay)
	if backoff <= 1 {
		return first
	}
	factor := localNumber(ctx, strconv.FormatFloat(backoff, 'f', -1, 64))
	if capped == nil {
		limit := formatDuration(ctx, ceiling)
		return T(ctx, "%s, multiplied by %s after each failure, up to %s (Relais’s ceiling)", first, factor, limit)
	}
	limit := formatDuration(ctx, *capped)
	return T(ctx, "%s, multiplied by %s after each failure, up to %s", first, factor, limit)
}

// attemptsSummary counts the attempts against their budget.
func attemptsSummary(ctx context.Context, o engine.Occurrence, retried bool) string {
	budget := T(ctx, "at most %d", o.Policy.MaxAttempts)
	if retried {
		// A retry gives a fresh max_attempts on top of the attempts made:
		// "3 attempts · at most 2" would read as a broken limit.
		budget = T(ctx, "at most %d since the last operator retry", o.Policy.MaxAttempts)
	}
	s := T(ctx, "%d attempts", o.Attempts)
	// A hand-back (a release, a Camunda unlock) spends nothing: without
	// saying so, "43 attempts · at most 3" would read as a broken limit.
	handedBack := 0
	for _, a := range o.AttemptList {
		if a.Outcome != nil && *a.Outcome == engine.OutcomeReleased {
			handedBack++
		}
	}
	if handedBack > 0 {
		s += " " + T(ctx, "(%d handed back, not counted)", handedBack)
	}
	s += " · " + budget
	if !settled(o.Status) {
		s += " · " + T(ctx, "%d left", o.AttemptsLeft)
	}
	return s
}

// occurrenceValues are the occurrence's inputs and outputs, labelled by its
// revision's contract, with reveal forms on sensitive rows for an admin.
func occurrenceValues(ctx context.Context, id uuid.UUID, o engine.Occurrence, rev *engine.Revision) (inputs, outputs valueTable) {
	inputs = valueTable{Title: sideTitle(ctx, engine.SideInputs), TestID: "inputs", Caption: T(ctx, "Inputs, labelled by revision %d's contract", o.Revision),
		Empty: T(ctx, "This contract has no inputs."), Rows: valueRows(ctx, rev.Working.Inputs, o.Inputs)}
	outputs = valueTable{Title: sideTitle(ctx, engine.SideOutputs), TestID: "outputs", Caption: T(ctx, "Outputs, labelled by revision %d's contract", o.Revision),
		Empty: T(ctx, "No outputs yet: the occurrence has not completed."), Rows: nil}
	switch {
	case o.Outputs != nil:
		outputs.Rows = valueRows(ctx, rev.Working.Outputs, o.Outputs)
		outputs.Empty = T(ctx, "This contract has no outputs.")
	case o.Status == engine.StatusFailed || o.Status == engine.StatusCancelled:
		outputs.Empty = T(ctx, "No outputs: the occurrence ended without completing.")
	}
	if p, ok := auth.FromContext(ctx); ok && p.Role == auth.RoleAdmin {
		label := T(ctx, "Reveal — this is recorded")
		csrf := currentOf(ctx).csrf
		reason, max := T(ctx, "Why (recorded with the reveal)"), strconv.Itoa(engine.MaxReason)
		hint := T(ctx, "Every admin reads it, and it is kept whatever the retention: write no customer data in it.")
		inputs.Reveal = &revealControl{Action: revealHref(id), CSRF: csrf, Side: engine.SideInputs, Label: label, ReasonLabel: reason, ReasonMax: max, ReasonHint: hint}
		outputs.Reveal = &revealControl{Action: revealHref(id), CSRF: csrf, Side: engine.SideOutputs, Label: label, ReasonLabel: reason, ReasonMax: max, ReasonHint: hint}
		for _, t := range []*valueTable{&inputs, &outputs} {
			for i := range t.Rows {
				if row := &t.Rows[i]; row.Masked && row.Sensitive {
					// Every button says the same; its accessible name
					// also says which field (it begins with the visible
					// words, as WCAG's "label in name" asks).
					row.RevealField = t.Title + " " + row.Pointer
					row.RevealName = label + " (" + row.RevealField + ")"
					row.RevealID = "reveal-" + t.Reveal.Side + "-" + strconv.Itoa(i)
					row.RowID = "value-" + t.Reveal.Side + "-" + strconv.Itoa(i)
				}
			}
		}
	}
	return inputs, outputs
}

// sideTitle names the inputs or the outputs of an occurrence: its page
// heads their tables with it, and the reveal log names a field's side
// with the same words.
func sideTitle(ctx context.Context, side string) string {
	switch side {
	case engine.SideInputs:
		return T(ctx, "Inputs")
	case engine.SideOutputs:
		return T(ctx, "Outputs")
	}
	return side
}

// settled reports whether an occurrence status is final.
func settled(status string) bool {
	return status == engine.StatusCompleted || status == engine.StatusFailed || status == engine.StatusCancelled
}

// occurrenceDates are the dates that mean something in the occurrence's
// state: no lock expiry once it settled, for a push call (its budget is
// the timeout), or while nothing holds it; no deadline once it settled,
// unless the deadline had passed by then.
func occurrenceDates(ctx context.Context, o engine.Occurrence) []fact {
	fs := []fact{{Label: T(ctx, "Created"), Time: formatTime(ctx, o.CreatedAt), TestID: "created"}}
	if !settled(o.Status) {
		label := T(ctx, "Available from")
		if o.Status == engine.StatusAvailable && o.AvailableAt.After(prefsOf(ctx).now) && o.Attempts > 0 {
			label = T(ctx, "Next attempt")
		}
		if o.Status == engine.StatusAvailable {
			fs = append(fs, fact{Label: label, Time: formatTime(ctx, o.AvailableAt), TestID: "available-at"})
		}
	}
	if o.ReservedAt != nil {
		fs = append(fs, fact{Label: T(ctx, "Last reserved"), Time: formatTime(ctx, *o.ReservedAt)})
	}
	if o.Status == engine.StatusReserved && o.Mode == "pull" && o.LockExpiresAt != nil {
		fs = append(fs, fact{Label: T(ctx, "Lock expires"), Time: formatTime(ctx, *o.LockExpiresAt), TestID: "lock-expires"})
	}
	if o.DeferredAt != nil {
		fs = append(fs, fact{Label: T(ctx, "Deferred"), Time: formatTime(ctx, *o.DeferredAt), TestID: "deferred-at"})
	}
	if o.SettledAt != nil && settled(o.Status) {
		fs = append(fs, fact{Label: T(ctx, "Settled"), Time: formatTime(ctx, *o.SettledAt), TestID: "settled-at"})
	}
	switch {
	case o.DeadlineAt == nil:
	case !settled(o.Status):
		fs = append(fs, fact{Label: T(ctx, "Deadline"), Time: formatTime(ctx, *o.DeadlineAt), TestID: "deadline-at"})
	case o.SettledAt != nil && !o.DeadlineAt.After(*o.SettledAt):
		// It passed before the occurrence settled: when, without a
		// countdown, which would run on after the settlement.
		t := formatTime(ctx, *o.DeadlineAt)
		t.Rel = ""
		fs = append(fs, fact{Label: T(ctx, "Deadline"), Time: t, TestID: "deadline-at"})
	}
	// A deadline still ahead of a settled occurrence no longer applies.
	return fs
}

// lastError is the summary's error: the last one, said to be so and of
// which attempt, while it matters (the occurrence failed, or waits to be
// tried again after it); a completed occurrence's earlier failures stay in
// its attempts. Advice to check before retrying is given only while it
// may be retried: its instance held at it (holds), or a retry of its own
// due.
func (c *Console) lastError(ctx context.Context, o engine.Occurrence, holds bool) []fact {
	if o.ErrorCode == nil || o.Status == engine.StatusCompleted {
		return nil
	}
	if o.Status == engine.StatusReserved || o.Status == engine.StatusDeferred {
		// A worker holds it again: its previous error is history.
		return nil
	}
	code := *o.ErrorCode
	n := 0
	for _, a := range o.AttemptList {
		if a.ErrorCode != nil && *a.ErrorCode == code {
			n = a.Number
		}
	}
	byTimer := n == 0 && code == engine.CodeDeadlineExceeded
	if n == 0 {
		n = o.Attempts
	}
	label := T(ctx, "Last error (attempt %d)", n)
	switch {
	case byTimer && n > 0:
		// The timer failed it, not the attempt: that one ended as its
		// own row says (failed with a retry due, say, or still running).
		label = T(ctx, "Error (the deadline passed after attempt %d)", n)
	case n == 0:
		label = T(ctx, "Error (before any attempt)")
	}
	fs := []fact{{Label: label, Value: code, Code: true, TestID: "error-code", Note: occurrenceErrorMeaning(ctx, code, &o, holds || o.Status == engine.StatusAvailable, true)}}
	if f, ok := errorMessageFact(ctx, code, &o); ok {
		fs = append(fs, f)
	}
	if o.Status == engine.StatusFailed && o.Mode == "pull" && !relaisWrote(&o, code) && o.AttemptsLeft > 0 {
		// It failed with attempts left: its worker said not to retry.
		fs = append(fs, fact{Label: T(ctx, "Retryable"), TestID: "not-retryable",
			Value: T(ctx, "no: the worker marked this failure as not retryable (attempts left unused: %d)", o.AttemptsLeft)})
	}
	return fs
}

// relaisCode reports whether Relais, not a worker or a destination's
// body, made an error code: its message is then Relais's, in English.
func relaisCode(code string) bool {
	switch code {
	case "deadline_exceeded", "invalid_outputs", "outcome_unknown", "push_unprepared", "connection_failed",
		"response_too_large", "attempts_exhausted", "invalid_inputs", engine.AbandonedCode:
		return true
	}
	return strings.HasPrefix(code, "destination_http_")
}

// workerWrote reports whether code, o's error, is its worker's report
// though Relais makes that code too (a worker may report invalid_outputs
// or deadline_exceeded: designer QA, "Message from Relais" over a worker's
// French): a pull occurrence whose last attempt ended failed with that
// code and message, as only a worker's report ends one (Relais ends those
// it fails expired). o's attempts must be loaded (GetOccurrence): without
// them, the code alone decides.
func workerWrote(o *engine.Occurrence, code string) bool {
	if o == nil || o.Mode != engine.ModePull {
		return false
	}
	for _, a := range o.AttemptList {
		if a.Number == o.Attempts && a.Outcome != nil && *a.Outcome == engine.OutcomeFailed &&
			a.ErrorCode != nil && *a.ErrorCode == code && (a.ErrorMessage == nil) == (o.ErrorMessage == nil) &&
			(a.ErrorMessage == nil || *a.ErrorMessage == *o.ErrorMessage) {
			return true
		}
	}
	return false
}

// relaisWrote reports whether Relais, not a worker, wrote o's error of
// code (o may be nil: the code alone says).
func relaisWrote(o *engine.Occurrence, code string) bool {
	return relaisCode(code) && !workerWrote(o, code)
}

// occurrenceErrorMeaning explains code as o's error: a push call's
// deadline_exceeded is its call timeout passing (the runner's "within the
// budget of" message), not a policy deadline, which it may not even have.
// o may be nil when the occurrence is unknown. retryable is false when
// no operator may retry it any more (its instance was stopped or
// abandoned): the advice to check before retrying is then left out.
func occurrenceErrorMeaning(ctx context.Context, code string, o *engine.Occurrence, retryable, onItsPage bool) string {
	if workerWrote(o, code) {
		// Its worker's code: Relais's meaning of it would put words in
		// the worker's mouth (a deadline of its own is not the policy's).
		return ""
	}
	if code == "invalid_outputs" && o != nil && o.Mode == "push" {
		// A destination's answer may be unusable before any contract is
		// read (data after its JSON, no outputs member): the message
		// says which.
		return T(ctx, "The destination’s answer could not be used: it must be one JSON object whose outputs member matches the revision’s outputs contract, and nothing after it. Its message says what was wrong.")
	}
	if code == "deadline_exceeded" && o != nil && o.Mode == "push" {
		msg := ""
		if o.ErrorMessage != nil {
			msg = *o.ErrorMessage
		}
		if o.Policy.Deadline == nil || strings.Contains(msg, "within the budget of") {
			// A call cut short may still have been carried out (a card
			// charged): an operator checks before retrying it.
			if !retryable {
				return T(ctx, "The destination did not answer within the call’s timeout: it may have acted all the same.")
			}
			if budget, ok := callBudget(msg, o.Timeout); ok {
				timeout := formatDuration(ctx, budget)
				return T(ctx, "The destination did not answer within the call’s timeout (%s): it may have acted all the same, so check before retrying.", timeout)
			}
			return T(ctx, "The destination did not answer within the call’s timeout: it may have acted all the same, so check before retrying.")
		}
	}
	if code == "attempts_exhausted" && o != nil && len(o.AttemptList) > 0 {
		// The last attempt's outcome says which of the two ended it,
		// where it is known (verifier QA: the page hedged).
		a := o.AttemptList[len(o.AttemptList)-1]
		if last := a.Outcome; last != nil {
			switch *last {
			case engine.OutcomeExpired:
				if a.Refused > 0 && a.RefusalCode != nil {
					// Its worker answered: the lock is not what to
					// lengthen (Camunda QA).
					code := *a.RefusalCode
					if !onItsPage {
						// The instance's page lists no attempts.
						return T(ctx, "The last attempt’s lock expired with no attempt left, after Relais refused its worker’s report (%s; see the failed occurrence’s attempts): the worker answered, and its answer must change, not its lock.", code)
					}
					return T(ctx, "The last attempt’s lock expired with no attempt left, after Relais refused its worker’s report (%s; see the attempts below): the worker answered, and its answer must change, not its lock.", code)
				}
				return T(ctx, "The last attempt’s lock expired with no attempt left.")
			case engine.OutcomeDisconnected:
				return T(ctx, "The last attempt’s worker stream ended (its worker left or was dropped) with no attempt left.")
			}
		}
	}
	return errorCodeMeaning(ctx, code)
}

// callBudget is the budget a push call that timed out had: the one its
// message names (the runner's "within the budget of PT2S"), which a
// destination's max_timeout lowered below the node's timeout may have
// made shorter than it (push QA: the page said 5 seconds of a call cut at
// 2), else the node's timeout.
func callBudget(msg string, timeout *time.Duration) (time.Duration, bool) {
	const lead = "within the budget of "
	if i := strings.Index(msg, lead); i >= 0 {
		rest := msg[i+len(lead):]
		if end := strings.IndexAny(rest, " :;,)"); end >= 0 {
			rest = rest[:end]
		}
		if d, err := isoduration.Parse(rest); err == nil {
			return d, true
		}
	}
	if timeout != nil {
		return *timeout, true
	}
	return 0, false
}

// errorCodeMeaning explains the error codes Relais makes; a worker's own
// code means what its service says.
func errorCodeMeaning(ctx context.Context, code string) string {
	switch code {
	case "deadline_exceeded":
		return T(ctx, "The deadline passed before the occurrence was completed: no attempt succeeded in time.")
	case "invalid_outputs":
		return T(ctx, "The result did not match the revision's outputs contract.")
	case "outcome_unknown":
		return T(ctx, "The answer to the call was lost (the connection broke after the request was sent, or Relais stopped or could not reach its database before recording it): whether the destination acted is unknown, so Relais does not call it again by itself (an operator’s retry does).")
	case "push_unprepared":
		return T(ctx, "The call could not be prepared.")
	case "connection_failed":
		return T(ctx, "The destination could not be reached.")
	case "response_too_large":
		return T(ctx, "The destination’s answer was too large.")
	case "attempts_exhausted":
		// Lapsed, or handed back as its stream ended: the attempts
		// table says which (verifier QA: a stream's end read as a lock).
		return T(ctx, "The last attempt ended without a result (its lock expired, or its worker’s stream ended) with no attempt left.")
	case "invalid_inputs":
		return T(ctx, "The inputs could not be built from the process’s bindings.")
	case engine.AbandonedCode:
		return T(ctx, "An operator abandoned the instance.")
	case "external_task_failure": // camunda.FailureCode; surfaces do not import each other
		return T(ctx, "A Camunda 7 worker reported a failure with no retries left (retries: 0, no retries sent, which Camunda reads as 0, or a budget already spent): it is not run again.")
	}
	if status, ok := strings.CutPrefix(code, "destination_http_"); ok {
		return T(ctx, "The destination answered HTTP %s.", status)
	}
	return ""
}

// stopRecord is the audit record of the stop that cancelled a cancelled
// occurrence's instance, if the log has one.
func (c *Console) stopRecord(ctx context.Context, o engine.Occurrence, inst engine.Instance) *engine.OperatorAction {
	if o.Status != engine.StatusCancelled || inst.Status != engine.InstanceCancelled {
		return nil
	}
	acts, err := c.eng.ListOperatorActions(ctx, engine.AuditFilter{Instance: &inst.ID, Action: string(engine.ActionStop), Limit: 1})
	if err != nil || len(acts) == 0 {
		if err != nil {
			c.logger.Warn("console: audit log unavailable", "err", err)
		}
		return nil
	}
	return &acts[0]
}

// retries are the operators' retries of o (the audit log names the
// occurrence a retry offered again), read once per page.
func (c *Console) retries(ctx context.Context, o engine.Occurrence, inst engine.Instance) []engine.OperatorAction {
	if !engine.Retryable(o) {
		return nil
	}
	acts, err := c.eng.ListOperatorActions(ctx, engine.AuditFilter{Instance: &inst.ID, Action: string(engine.ActionRetry), Limit: maxHistory})
	if err != nil {
		c.logger.Warn("console: audit log unavailable", "err", err)
		return nil
	}
	var out []engine.OperatorAction
	for _, a := range acts {
		if a.OccurrenceID != nil && *a.OccurrenceID == o.ID {
			out = append(out, a)
		}
	}
	return out
}

// nobodyTakes says, of a pull occurrence waiting for a worker, when no
// live worker takes its revision: workers of the definition may all be
// live and healthy on other revisions (a process version moved to a new
// one, its workers not yet), which the Health page, counting workers by
// definition, does not show. A grant may still exclude a revision a
// worker subscribes to "every" of: such a worker counts as taking it;
// one declaring fields takes only the revisions that have them, as a
// fetch resolves it.
func (c *Console) nobodyTakes(ctx context.Context, o engine.Occurrence, rev *engine.Revision) string {
	if o.Mode != "pull" || o.Status != engine.StatusAvailable || o.AvailableAt.After(prefsOf(ctx).now) {
		return ""
	}
	workers, err := c.eng.ListWorkers(ctx, engine.WorkerFilter{Definition: o.Definition, Limit: workersServingMax})
	if err != nil {
		c.logger.Warn("console: live workers unavailable", "err", err)
		return ""
	}
	if len(workers) == 0 {
		return T(ctx, "No live worker takes %s now (Workers page).", o.Definition)
	}
	revs := []int{}
	for _, wk := range workers {
		for _, s := range wk.Subscriptions {
			if !engine.KeyMatches(s.Definition, o.Definition) {
				continue
			}
			if len(s.Revisions) > 0 && !engine.IsKeyPattern(s.Definition) {
				if slices.Contains(s.Revisions, o.Revision) {
					return ""
				}
				for _, r := range s.Revisions {
					if !slices.Contains(revs, r) {
						revs = append(revs, r)
					}
				}
				continue
			}
			if rev == nil || len(rev.Working.Inputs.LacksFields(s.Fields)) == 0 {
				return "" // every revision, or every one with its fields, this one's included
			}
		}
	}
	slices.Sort(revs)
	revision := o.Revision
	switch len(revs) {
	case 0:
		return T(ctx, "No live worker takes revision %d: the live workers of %s declare inputs it does not have.", revision, o.Definition)
	case 1:
		taken := revs[0]
		return T(ctx, "No live worker takes revision %d: the live workers of %s take revision %d only.", revision, o.Definition, taken)
	}
	taken := joinInts(revs)
	return T(ctx, "No live worker takes revision %d: the live workers of %s take revisions %s only.", revision, o.Definition, taken)
}

// occurrenceState says in words what the occurrence is doing or waiting
// for, with the instant that matters and how far it is. holds says a
// failed o is the failure its held instance waits at.
func occurrenceState(ctx context.Context, o engine.Occurrence, inst engine.Instance, holds bool, stop *engine.OperatorAction) (string, timeView, string) {
	now := prefsOf(ctx).now
	var last *engine.Attempt
	if n := len(o.AttemptList); n > 0 {
		last = &o.AttemptList[n-1]
	}
	switch o.Status {
	case engine.StatusAvailable:
		at := formatTime(ctx, o.AvailableAt)
		when := clockTime(ctx, o.AvailableAt)
		if o.AvailableAt.After(now) {
			if o.Attempts > 0 {
				return T(ctx, "Retry at %s — %s.", when, at.Rel), at, ""
			}
			return T(ctx, "Offered from %s — %s.", when, at.Rel), at, ""
		}
		if last != nil && last.Outcome != nil && *last.Outcome == engine.OutcomeExpired && last.LockExpiresAt != nil &&
			last.LockExpiresAt.Equal(o.AvailableAt) {
			return T(ctx, "Lock expired %s — waiting to be offered again.", when), at, ""
		}
		if o.Mode == "push" {
			return T(ctx, "Waiting for Relais to call the destination since %s (%s).", when, at.Rel), at, ""
		}
		return T(ctx, "Waiting for a worker since %s (%s).", when, at.Rel), at, ""
	case engine.StatusReserved:
		holder := o.ConsumerName
		if o.WorkerID != nil {
			holder = strings.TrimSpace(holder + " " + T(ctx, "(worker %s)", *o.WorkerID))
		}
		if o.Mode == "push" {
			if o.ReservedAt != nil && o.Timeout != nil && o.LockExpiresAt != nil && now.After(o.ReservedAt.Add(*o.Timeout+time.Second)) {
				// Past its budget the call has ended: its answer is being
				// recorded (through a database outage, say), or the replica
				// making it stopped, and the timers fail it at the lock's end.
				end := formatTime(ctx, *o.LockExpiresAt)
				return T(ctx, "The call’s budget (%s) ended %s without its result recorded: the replica making it may have stopped. If so, it fails outcome_unknown at %s (%s): ask the destination whether it took effect.",
					formatDuration(ctx, *o.Timeout), formatTime(ctx, o.ReservedAt.Add(*o.Timeout)).Rel, clockTime(ctx, *o.LockExpiresAt), end.Rel), end, ""
			}
			t := formatTimePtr(ctx, o.ReservedAt)
			return T(ctx, "Relais is calling the destination (since %s).", t.Rel), t, ""
		}
		if o.LockExpiresAt != nil {
			t := formatTime(ctx, *o.LockExpiresAt)
			when := clockTime(ctx, *o.LockExpiresAt)
			return T(ctx, "Reserved by %s; lock until %s — %s.", holder, when, t.Rel), t, ""
		}
		return T(ctx, "Reserved by %s.", holder), timeView{}, ""
	case engine.StatusDeferred:
		t := formatTimePtr(ctx, o.DeferredAt)
		when := ""
		if o.DeferredAt != nil {
			when = clockTime(ctx, *o.DeferredAt)
		}
		return T(ctx, "Deferred since %s (%s): a worker of the same consumer, or a front end with a settle token, completes it later.", when, t.Rel), t, ""
	case engine.StatusCompleted:
		t := formatTimePtr(ctx, o.SettledAt)
		return T(ctx, "Completed (%s).", t.Rel), t, ""
	case engine.StatusFailed:
		t := formatTimePtr(ctx, o.SettledAt)
		note := ""
		switch {
		case holds:
			note = T(ctx, "Its instance is held here, waiting for an operator.")
		case inst.Status == engine.InstanceHeld:
			note = T(ctx, "Its instance went on along the node’s error path, and is held at a later node.")
		case inst.Status == engine.InstanceRunning:
			note = T(ctx, "Its instance went on along the node’s error path.")
		}
		return T(ctx, "Failed (%s).", t.Rel), t, note
	case engine.StatusCancelled:
		t := formatTimePtr(ctx, o.SettledAt)
		if stop != nil {
			who, when := stop.ActorName, clockTime(ctx, stop.At)
			return T(ctx, "Cancelled: the instance was stopped by %s at %s — “%s”.", who, when, visibleBidi(stop.Reason)), t, ""
		}
		return T(ctx, "Cancelled: the instance was stopped (%s).", t.Rel), t, ""
	}
	return statusLabel(ctx, o.Status), timeView{}, ""
}

// deferred says the occurrence was deferred when it ended (its attempt's
// stop note is a deferral's).
func attemptRowOf(ctx context.Context, a engine.Attempt, push, deferred bool, destination *string) attemptRow {
	row := attemptRow{Number: strconv.Itoa(a.Number), Reserved: formatTime(ctx, a.ReservedAt), Ended: formatTimePtr(ctx, a.EndedAt)}
	if a.EndedAt != nil {
		row.Duration = formatShortDuration(ctx, a.EndedAt.Sub(a.ReservedAt).Round(time.Millisecond))
	} else {
		// Truncated as relative truncates: the "… ago" beside it must agree.
		elapsed := approxDuration(ctx, prefsOf(ctx).now.Sub(a.ReservedAt))
		row.Duration = T(ctx, "%s so far", elapsed)
	}
	if push {
		row.HTTP = pushAnswer(ctx, a)
		if destination != nil {
			row.Consumer = *destination
		}
	}
	switch {
	case a.ConsumerName != nil:
		row.Consumer = *a.ConsumerName
	case a.ConsumerID != nil:
		consumer := strconv.FormatInt(*a.ConsumerID, 10)
		row.Consumer = T(ctx, "consumer #%s", consumer)
	}
	if a.WorkerID != nil {
		row.Worker = *a.WorkerID
	}
	if a.SettledBy != nil {
		// A deferred attempt keeps the worker that deferred it; another
		// worker, or a front end with its settle token, settled it.
		worker, by := row.Worker, *a.SettledBy
		switch {
		case a.SettledWithToken && by == engine.SettleTokenWorker:
			// The token's call named no worker.
			row.Worker = T(ctx, "%s (deferred; settled with its settle token)", worker)
		case a.SettledWithToken:
			row.Worker = elided(ctx, T(ctx, "%s (deferred; settled with its settle token, as %s)", worker, by), by)
		default:
			row.Worker = T(ctx, "%s (deferred; settled by %s)", worker, by)
		}
	}
	if a.Outcome != nil {
		row.Outcome, row.OutcomeKey = outcomeLabel(ctx, *a.Outcome), *a.Outcome
	}
	if a.ErrorCode != nil {
		row.ErrorCode = *a.ErrorCode
	}
	if a.ErrorMessage != nil {
		row.ErrorMessage = errorMessage(ctx, *a.ErrorMessage)
		row.ErrorShort = cutMessage(row.ErrorMessage)
		if a.ErrorCode != nil {
			// Labelled as on the summary, each row: French readers are
			// told the words are Relais's English (console QA).
			// A pull attempt ended failed was its worker's report.
			if push || a.Outcome == nil || *a.Outcome != engine.OutcomeFailed {
				row.ErrorBy, row.ErrorLang = relaisMessage(ctx, *a.ErrorCode)
			}
		}
	}
	if a.Outcome != nil && *a.Outcome == engine.OutcomeCancelled && a.ErrorCode == nil && a.ErrorMessage != nil {
		// The stop's note (AttemptCancelOpen), in the reader's language:
		// what the stop's confirmation warned of, said where it happened.
		msg := T(ctx, "The instance was stopped while the worker held the task: its report is refused, but it may already have done the work.")
		switch {
		case push:
			msg = T(ctx, "The instance was stopped during the call, which was aborted: the destination may already have acted on the request (check there).")
		case deferred:
			msg = T(ctx, "The instance was stopped while the task was deferred: a settlement by id is refused, but the work it waited for may already be done.")
		}
		row.ErrorMessage, row.ErrorShort = msg, ""
	}
	row.Refused = refusedReports(ctx, a)
	return row
}

// refusedReports says how many of an attempt's reports Relais refused,
// and the last one's code and pointers; "" when none was.
func refusedReports(ctx context.Context, a engine.Attempt) string {
	if a.Refused == 0 || a.RefusedAt == nil || a.RefusalCode == nil {
		return ""
	}
	what, at := *a.RefusalCode, clockTime(ctx, *a.RefusedAt)
	if len(a.RefusalPointers) > 0 {
		pointers := strings.Join(a.RefusalPointers, ", ")
		what = T(ctx, "%s at %s", what, pointers)
	}
	n := number(ctx, int64(a.Refused))
	if a.Outcome != nil && (*a.Outcome == engine.OutcomeCompleted || *a.Outcome == engine.OutcomeFailed) {
		// A later report was taken (verifier QA: the row said none was).
		if a.Refused == 1 {
			return T(ctx, "Relais refused a report of this attempt at %s (%s) before taking another.", at, what)
		}
		return T(ctx, "Relais refused %s reports of this attempt, the last at %s (%s), before taking another.", n, at, what)
	}
	if a.Refused == 1 {
		return T(ctx, "Relais refused this attempt’s report at %s (%s): its worker answered, and the answer was not taken.", at, what)
	}
	return T(ctx, "Relais refused %s reports of this attempt, the last at %s (%s): its worker answered, and no answer was taken.", n, at, what)
}

// pushAnswer is what is known of the destination's answer to one call:
// the status it refused with (kept in the error code), 2xx for a
// completed call, or why there was none. Nothing else is stored, so
// nothing else is shown.
func pushAnswer(ctx context.Context, a engine.Attempt) string {
	if a.Outcome == nil {
		return T(ctx, "waiting")
	}
	code := ""
	if a.ErrorCode != nil {
		code = *a.ErrorCode
	}
	if status, ok := strings.CutPrefix(code, "destination_http_"); ok {
		return "HTTP " + status
	}
	switch {
	case *a.Outcome == engine.OutcomeCompleted:
		return "HTTP 2xx"
	case code == "invalid_outputs":
		return T(ctx, "HTTP 2xx, unusable body")
	case code == "deadline_exceeded":
		return T(ctx, "no answer within the timeout")
	case code == "connection_failed":
		return T(ctx, "no connection")
	case code == "response_too_large":
		return T(ctx, "answer too large")
	}
	return T(ctx, "unknown")
}

// errorMessage shows a stored error message with the engine's scrubbing
// marker in the reader's language; the rest of the message is the
// worker's or destination's own words.
func errorMessage(ctx context.Context, msg string) string {
	// TRANSLATORS: stands where a protected value was removed from a worker's error message.
	return visibleBidi(strings.ReplaceAll(msg, contracts.Redacted, T(ctx, "[redacted]")))
}

func optionalDuration(ctx context.Context, d *time.Duration) string {
	if d == nil {
		return T(ctx, "none")
	}
	return formatDuration(ctx, *d)
}

// errorMessageFact shows the message o's error of code came with, saying
// who wrote it: Relais (in English) or the service; ok is false without
// one.
func errorMessageFact(ctx context.Context, code string, o *engine.Occurrence) (fact, bool) {
	if o.ErrorMessage == nil || *o.ErrorMessage == "" {
		return fact{}, false
	}
	f := fact{Value: errorMessage(ctx, *o.ErrorMessage), TestID: "error-message", Message: true}
	if !workerWrote(o, code) {
		f.Label, f.Lang = relaisMessage(ctx, code)
	}
	if f.Label == "" {
		f.Label = T(ctx, "Message from the worker (its own words, protected values masked)")
	}
	return f, true
}

// relaisMessage says, for the message of an error of code, that Relais
// wrote it, and in which language: label and lang are empty when the
// service did. Relais writes in English: French pages' labels say so,
// English ones need not (console QA: "(in English)" on an English page).
func relaisMessage(ctx context.Context, code string) (label, lang string) {
	switch {
	case strings.HasPrefix(code, "destination_http_"):
		// Relais's words around the destination's own (its answer's
		// start): not all of it is Relais's.
		return T(ctx, "Message from Relais, quoting the destination’s answer"), "en"
	case relaisCode(code):
		return T(ctx, "Message from Relais"), "en"
	}
	return "", ""
}
