package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
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
}

// attemptRow is one reservation of the occurrence.
type attemptRow struct {
	Number       string
	Consumer     string
	Worker       string
	Reserved     timeView
	Ended        timeView
	Outcome      string
	OutcomeKey   string
	ErrorCode    string
	ErrorMessage string
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

// revealControl is what each reveal form of a value table carries.
type revealControl struct {
	Action string
	CSRF   string
	Side   string // engine.SideInputs or engine.SideOutputs
	Label  string
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

	AttemptsLabel, AttemptsSummary                                    string
	HeadNumber, HeadConsumer, HeadWorker, HeadReserved, HeadEnded     string
	HeadOutcome, HeadErrorCode, HeadErrorMessage, NoAttempts, Running string
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

	v := occurrenceView{
		Chrome:       c.chrome(r, T(ctx, "Occurrence %s", id), "occurrences"),
		SummaryLabel: T(ctx, "Summary"),
		Summary: []fact{
			{Label: T(ctx, "Definition"), Value: definitionAtRevision(ctx, o.Definition, o.Revision),
				Href: revisionHref(o.Definition, o.Revision), TestID: "definition-link"},
			{Label: T(ctx, "Process instance"), Value: o.InstanceID.String(), Href: instanceHref(o.InstanceID), TestID: "instance-link", Code: true},
			{Label: T(ctx, "Node"), Value: o.Node, Code: true},
			{Label: T(ctx, "Mode"), Value: modeLabel(ctx, o.Mode)},
			{Label: T(ctx, "Status"), Value: statusLabel(ctx, o.Status), Badge: o.Status, TestID: "status"},
		},
		DatesLabel: T(ctx, "Dates"),
		Dates: []fact{
			{Label: T(ctx, "Created"), Time: formatTime(ctx, o.CreatedAt), TestID: "created"},
			{Label: T(ctx, "Available"), Time: formatTime(ctx, o.AvailableAt)},
			{Label: T(ctx, "Reserved"), Time: formatTimePtr(ctx, o.ReservedAt)},
			{Label: T(ctx, "Lock expires"), Time: formatTimePtr(ctx, o.LockExpiresAt)},
			{Label: T(ctx, "Settled"), Time: formatTimePtr(ctx, o.SettledAt)},
			{Label: T(ctx, "Deadline"), Time: formatTimePtr(ctx, o.DeadlineAt)},
		},
		PolicyLabel: T(ctx, "Policy"),
		Policy: []fact{
			{Label: T(ctx, "Maximum attempts"), Value: number(ctx, o.Policy.MaxAttempts)},
			{Label: T(ctx, "Retry delay"), Value: formatDuration(ctx, o.Policy.RetryDelay)},
			{Label: T(ctx, "Deadline"), Value: optionalDuration(ctx, o.Policy.Deadline)},
			{Label: T(ctx, "Priority"), Value: T(ctx, "%d (0 lowest, 9 highest)", o.Policy.Priority)},
		},
		AttemptsLabel: T(ctx, "Attempts"),
		AttemptsSummary: T(ctx, "%d attempts", o.Attempts) + " · " +
			T(ctx, "at most %d", o.Policy.MaxAttempts),
		HeadNumber: "#", HeadConsumer: T(ctx, "Consumer"), HeadWorker: T(ctx, "Worker id"),
		HeadReserved: T(ctx, "Reserved"), HeadEnded: T(ctx, "Ended"), HeadOutcome: T(ctx, "Outcome"),
		HeadErrorCode: T(ctx, "Error code"), HeadErrorMessage: T(ctx, "Error message"),
		NoAttempts: T(ctx, "No service has reserved this occurrence yet."),
		Running:    T(ctx, "in progress"),
		HeadField:  T(ctx, "Field"), HeadValue: T(ctx, "Value"),
	}
	if o.Route != nil {
		v.Summary = append(v.Summary, fact{Label: T(ctx, "Route"), Value: *o.Route, Code: true, TestID: "route"})
	}
	if o.ErrorCode != nil {
		v.Summary = append(v.Summary, fact{Label: T(ctx, "Error code"), Value: *o.ErrorCode, Code: true, TestID: "error-code"})
	}
	if o.ErrorMessage != nil {
		// Worker-supplied; the engine scrubbed the occurrence's protected
		// values from it before storing it.
		v.Summary = append(v.Summary, fact{Label: T(ctx, "Error message"), Value: errorMessage(ctx, *o.ErrorMessage), TestID: "error-message"})
	}
	if o.Destination != nil {
		v.Policy = append(v.Policy, fact{Label: T(ctx, "Destination"), Value: *o.Destination, Code: true})
	}
	if o.Timeout != nil {
		v.Policy = append(v.Policy, fact{Label: T(ctx, "Call timeout"), Value: formatDuration(ctx, *o.Timeout)})
	}
	for _, a := range o.AttemptList {
		v.Attempts = append(v.Attempts, attemptRowOf(ctx, a))
	}
	v.Inputs = valueTable{Title: T(ctx, "Inputs"), TestID: "inputs", Caption: T(ctx, "Inputs, labelled by revision %d's contract", o.Revision),
		Empty: T(ctx, "This contract has no inputs."), Rows: valueRows(ctx, rev.Working.Inputs, o.Inputs)}
	v.Outputs = valueTable{Title: T(ctx, "Outputs"), TestID: "outputs", Caption: T(ctx, "Outputs, labelled by revision %d's contract", o.Revision),
		Empty: T(ctx, "No outputs yet: the occurrence has not completed."), Rows: nil}
	switch {
	case o.Outputs != nil:
		v.Outputs.Rows = valueRows(ctx, rev.Working.Outputs, o.Outputs)
		v.Outputs.Empty = T(ctx, "This contract has no outputs.")
	case o.Status == engine.StatusFailed || o.Status == engine.StatusCancelled:
		v.Outputs.Empty = T(ctx, "No outputs: the occurrence ended without completing.")
	}
	if p, ok := auth.FromContext(ctx); ok && p.Role == auth.RoleAdmin {
		label := T(ctx, "Reveal — this is recorded")
		csrf := currentOf(ctx).csrf
		v.Inputs.Reveal = &revealControl{Action: revealHref(id), CSRF: csrf, Side: engine.SideInputs, Label: label}
		v.Outputs.Reveal = &revealControl{Action: revealHref(id), CSRF: csrf, Side: engine.SideOutputs, Label: label}
	}
	return v, nil
}

func attemptRowOf(ctx context.Context, a engine.Attempt) attemptRow {
	row := attemptRow{Number: strconv.Itoa(a.Number), Reserved: formatTime(ctx, a.ReservedAt), Ended: formatTimePtr(ctx, a.EndedAt)}
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
	if a.Outcome != nil {
		row.Outcome, row.OutcomeKey = outcomeLabel(ctx, *a.Outcome), *a.Outcome
	}
	if a.ErrorCode != nil {
		row.ErrorCode = *a.ErrorCode
	}
	if a.ErrorMessage != nil {
		row.ErrorMessage = errorMessage(ctx, *a.ErrorMessage)
	}
	return row
}

// errorMessage shows a stored error message with the engine's scrubbing
// marker in the reader's language; the rest of the message is the
// worker's or destination's own words.
func errorMessage(ctx context.Context, msg string) string {
	// TRANSLATORS: stands where a protected value was removed from a worker's error message.
	return strings.ReplaceAll(msg, contracts.Redacted, T(ctx, "[redacted]"))
}

func optionalDuration(ctx context.Context, d *time.Duration) string {
	if d == nil {
		return T(ctx, "none")
	}
	return formatDuration(ctx, *d)
}
