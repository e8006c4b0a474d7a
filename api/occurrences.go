package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/suggest"
)

type policyJSON struct {
	MaxAttempts   int                   `json:"max_attempts"`
	RetryDelay    isoduration.Duration  `json:"retry_delay"`
	RetryBackoff  float64               `json:"retry_backoff"`
	MaxRetryDelay *isoduration.Duration `json:"max_retry_delay"`
	Deadline      *isoduration.Duration `json:"deadline"`
	Priority      int                   `json:"priority"`
}

type attemptJSON struct {
	Number        int          `json:"number"`
	Consumer      *consumerRef `json:"consumer"`
	WorkerID      *string      `json:"worker_id"`
	ReservedAt    time.Time    `json:"reserved_at"`
	LockExpiresAt *time.Time   `json:"lock_expires_at"`
	EndedAt       *time.Time   `json:"ended_at"`
	Outcome       *string      `json:"outcome"`
	ErrorCode     *string      `json:"error_code"`
	ErrorMessage  *string      `json:"error_message"`
	// Who settled a deferred attempt, which any worker of the consumer or
	// a settle token may do: worker_id stays the worker that deferred it.
	SettledBy        *string `json:"settled_by"`
	SettledWithToken bool    `json:"settled_with_token"`
	// RefusedReports, when the attempt's worker sent reports Relais
	// refused: an attempt that then expired had a worker that answered.
	RefusedReports *refusedReportsJSON `json:"refused_reports"`
}

// refusedReportsJSON is how many of an attempt's reports were refused,
// and the last one's code and pointers (never its words: they may quote
// the refused value).
type refusedReportsJSON struct {
	Count    int       `json:"count"`
	LastAt   time.Time `json:"last_at"`
	Code     string    `json:"code"`
	Pointers []string  `json:"pointers"`
}

type consumerRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name,omitempty"`
}

// OccurrenceJSON is an occurrence as the observation API shows it: inputs
// and outputs masked, in the detail only (lists read none: each may be a
// megabyte).
type occurrenceJSON struct {
	ID            uuid.UUID             `json:"id"`
	InstanceID    uuid.UUID             `json:"instance_id"`
	Node          string                `json:"node"`
	Definition    string                `json:"definition"`
	Revision      int                   `json:"revision"`
	Mode          string                `json:"mode"`
	Status        string                `json:"status"`
	Policy        policyJSON            `json:"policy"`
	Destination   *string               `json:"destination,omitempty"`
	Timeout       *isoduration.Duration `json:"timeout,omitempty"`
	AttemptCount  int                   `json:"attempt_count"`
	Consumer      *consumerRef          `json:"consumer"`
	WorkerID      *string               `json:"worker_id"`
	CreatedAt     time.Time             `json:"created_at"`
	AvailableAt   time.Time             `json:"available_at"`
	ReservedAt    *time.Time            `json:"reserved_at"`
	LockExpiresAt *time.Time            `json:"lock_expires_at"`
	SettledAt     *time.Time            `json:"settled_at"`
	DeadlineAt    *time.Time            `json:"deadline_at"`
	Route         *string               `json:"route"`
	ErrorCode     *string               `json:"error_code"`
	ErrorMessage  *string               `json:"error_message"`
	AttemptsLeft  int                   `json:"attempts_left"`
	DeferredAt    *time.Time            `json:"deferred_at"`
	DeferReason   *string               `json:"defer_reason"`
	Inputs        json.RawMessage       `json:"inputs,omitempty"`  // absent from lists
	Outputs       json.RawMessage       `json:"outputs,omitempty"` // absent from lists; null before a result
	Attempts      []attemptJSON         `json:"attempts,omitempty"`
}

// occurrenceDetailJSON is an occurrence's detail: its attempts always
// present, [] before any claim (lists leave them out).
type occurrenceDetailJSON struct {
	occurrenceJSON
	Attempts []attemptJSON `json:"attempts"`
}

func durPtr(d *time.Duration) *isoduration.Duration {
	if d == nil {
		return nil
	}
	v := isoduration.Duration(*d)
	return &v
}

func toOccurrenceJSON(o engine.Occurrence) occurrenceJSON {
	out := occurrenceJSON{ID: o.ID, InstanceID: o.InstanceID, Node: o.Node, Definition: o.Definition, Revision: o.Revision, Mode: o.Mode,
		Status: o.Status, Destination: o.Destination, Timeout: durPtr(o.Timeout), AttemptCount: o.Attempts, WorkerID: o.WorkerID,
		CreatedAt: o.CreatedAt, AvailableAt: o.AvailableAt, ReservedAt: o.ReservedAt, LockExpiresAt: o.LockExpiresAt,
		SettledAt: o.SettledAt, DeadlineAt: o.DeadlineAt, Route: o.Route, ErrorCode: o.ErrorCode, ErrorMessage: o.ErrorMessage,
		Inputs: o.Inputs, Outputs: o.Outputs, AttemptsLeft: o.AttemptsLeft, DeferredAt: o.DeferredAt, DeferReason: o.DeferReason,
		Policy: policyJSON{MaxAttempts: o.Policy.MaxAttempts, RetryDelay: isoduration.Duration(o.Policy.RetryDelay), RetryBackoff: o.Policy.RetryBackoff,
			MaxRetryDelay: durPtr(o.Policy.MaxRetryDelay), Deadline: durPtr(o.Policy.Deadline), Priority: o.Policy.Priority}}
	if o.ConsumerID != nil {
		out.Consumer = &consumerRef{ID: *o.ConsumerID, Name: o.ConsumerName}
	}
	if o.Status != engine.StatusReserved {
		// The row keeps its last reservation's end; once settled, handed
		// back or lapsed it is that attempt's history (its own
		// lock_expires_at), and shown here it read as a lock still held.
		// (The Camunda facade keeps it, as Camunda keeps an expired
		// lock's lockExpirationTime.)
		out.LockExpiresAt = nil
	}
	if out.Outputs == nil && out.Inputs != nil {
		out.Outputs = json.RawMessage("null")
	}
	for _, a := range o.AttemptList {
		aj := attemptJSON{Number: a.Number, WorkerID: a.WorkerID, ReservedAt: a.ReservedAt, LockExpiresAt: a.LockExpiresAt, EndedAt: a.EndedAt,
			Outcome: a.Outcome, ErrorCode: a.ErrorCode, ErrorMessage: a.ErrorMessage, SettledBy: a.SettledBy, SettledWithToken: a.SettledWithToken}
		if a.ConsumerID != nil {
			aj.Consumer = &consumerRef{ID: *a.ConsumerID, Name: deref(a.ConsumerName)}
		}
		if a.Refused > 0 && a.RefusedAt != nil {
			aj.RefusedReports = &refusedReportsJSON{Count: a.Refused, LastAt: *a.RefusedAt, Code: deref(a.RefusalCode), Pointers: a.RefusalPointers}
			if aj.RefusedReports.Pointers == nil {
				aj.RefusedReports.Pointers = []string{}
			}
		}
		out.Attempts = append(out.Attempts, aj)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func occurrenceStatus(s string) bool { return slices.Contains(engine.OccurrenceStatuses, s) }

// occurrenceParams are the query parameters of occurrenceFilter.
var occurrenceParams = []string{"definition", "status", "instance", "revision", "consumer", "destination", "process", "business_key", "error_code",
	"created_after", "created_before", "settled_after", "settled_before", "waiting_retry"}

// occurrenceFilter reads the observation filters shared by the API and
// the console's URLs.
func occurrenceFilter(r *http.Request) (engine.OccurrenceFilter, error) {
	q := r.URL.Query()
	f := engine.OccurrenceFilter{Definition: q.Get("definition"), Status: q.Get("status")}
	var errs []fault.FieldError
	if f.Status != "" && !occurrenceStatus(f.Status) {
		msg := "must be one of " + strings.Join(engine.OccurrenceStatuses, ", ") + suggest.Hint(f.Status, engine.OccurrenceStatuses)
		if f.Status == engine.InstanceHeld || f.Status == engine.InstanceRunning {
			// An instance's status (operator QA): said so.
			msg += "; " + f.Status + " is an instance's status (GET /instances?status=" + f.Status + ")"
		}
		errs = append(errs, fault.FieldError{Path: "status", Message: msg})
	}
	if s := q.Get("instance"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			errs = append(errs, fault.FieldError{Path: "instance", Message: "must be an instance id"})
		}
		f.Instance = &id
	}
	if s := q.Get("revision"); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil || n < 1:
			errs = append(errs, fault.FieldError{Path: "revision", Message: "must be a revision number"})
		case q.Get("definition") == "":
			errs = append(errs, fault.FieldError{Path: "revision", Message: "is a definition's revision: give definition too"})
		}
		f.Revision = n
	}
	if s := q.Get("consumer"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, fault.FieldError{Path: "consumer", Message: "must be a consumer id"})
		}
		f.ConsumerID = n
	}
	if s := q.Get("destination"); s != "" {
		if !engine.IsDestinationName(s) {
			errs = append(errs, fault.FieldError{Path: "destination", Message: "must be a destination name"})
		}
		f.Destination = s
	}
	switch s := q.Get("waiting_retry"); s {
	case "":
	case "false", "true":
		waiting := s == "true"
		f.WaitingRetry = &waiting
		if waiting && f.Status != "" && f.Status != engine.StatusAvailable {
			// Nothing would match, which would read as none waiting.
			errs = append(errs, fault.FieldError{Path: "waiting_retry", Message: "keeps available occurrences (whose next attempt is due later): give status available, or none"})
		}
	default:
		errs = append(errs, fault.FieldError{Path: "waiting_retry", Message: "must be true or false"})
	}
	f.ProcessKey, f.BusinessKey, f.ErrorCode = textParam(q, "process", &errs), textParam(q, "business_key", &errs), textParam(q, "error_code", &errs)
	f.CreatedAfter = timeParam(q, "created_after", &errs)
	f.CreatedBefore = timeParam(q, "created_before", &errs)
	f.SettledAfter = timeParam(q, "settled_after", &errs)
	f.SettledBefore = timeParam(q, "settled_before", &errs)
	if len(errs) > 0 {
		return f, fault.New(fault.BadRequest, "invalid_request", "invalid filter").WithErrors(errs)
	}
	return f, nil
}

// textParam reads a text filter (left out: no filter; given empty, the
// page parameters refused it already). A value padded with white space,
// or nothing else, is refused: no key or code holds one (a business key's
// is refused at start), so it would match nothing and read as "none".
func textParam(q url.Values, name string, errs *[]fault.FieldError) string {
	s := q.Get(name)
	if s != "" && strings.TrimSpace(s) != s {
		*errs = append(*errs, fault.FieldError{Path: name, Message: "must not be blank or padded with white space: no key or code is"})
	}
	return s
}

// timeParam reads an RFC 3339 time (or a date, meaning its midnight UTC)
// from query parameter name.
func timeParam(q url.Values, name string, errs *[]fault.FieldError) *time.Time {
	return timeFilter(q.Get(name), name, errs)
}

// timeFilter reads a time filter, wherever it comes from (a query
// parameter, a bulk action's filter): an RFC 3339 time, a time without
// seconds or a date (midnight UTC). A refusal names path and says what is
// accepted in words, never in Go's layout notation.
func timeFilter(s, path string, errs *[]fault.FieldError) *time.Time {
	if s == "" {
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return &t
		}
	}
	msg := "must be an RFC 3339 time (2026-12-01T15:04:05Z) or a date (2026-12-01)"
	if i := strings.LastIndexByte(s, ' '); i > 0 {
		if _, err := time.Parse(time.RFC3339Nano, s[:i]+"+"+s[i+1:]); err == nil {
			// 2026-12-05T07:01:30+01:00 sent unencoded: its + read as a
			// space, as every query string's is.
			msg += "; a + in a query string is read as a space: write it %2B (" + s[:i] + "%2B" + s[i+1:] + ")"
		}
	}
	*errs = append(*errs, fault.FieldError{Path: path, Message: msg})
	return nil
}

func (a *API) listOccurrences() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		before, limit, err := httpjson.PageParams[*uuid.UUID](r, occurrenceParams...)
		if err != nil {
			return err
		}
		f, err := occurrenceFilter(r)
		if err != nil {
			return err
		}
		f.Before, f.Limit = before, limit+1
		occs, err := a.eng.ListOccurrences(r.Context(), f)
		if err != nil {
			return err
		}
		if len(occs) == 0 && before == nil {
			// As the instances list: only an empty answer is checked.
			u, err := a.eng.UnknownOccurrenceKeys(r.Context(), f)
			if err != nil {
				return err
			}
			if errs := unknownKeyErrors(u, "", filterKeys{Process: f.ProcessKey, Definition: f.Definition, Revision: f.Revision,
				Consumer: f.ConsumerID, Destination: f.Destination}); len(errs) > 0 {
				return fault.New(fault.BadRequest, "invalid_request", "invalid filter").WithErrors(errs)
			}
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(occs, limit, func(o engine.Occurrence) any { return o.ID }, toOccurrenceJSON))
		return nil
	})
}

func (a *API) getOccurrence() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "occurrence")
		if err != nil {
			return err
		}
		o, err := a.eng.GetOccurrence(r.Context(), id)
		if err != nil {
			return err
		}
		out := occurrenceDetailJSON{occurrenceJSON: toOccurrenceJSON(o)}
		out.Attempts = out.occurrenceJSON.Attempts
		if out.Attempts == nil {
			out.Attempts = []attemptJSON{}
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}
