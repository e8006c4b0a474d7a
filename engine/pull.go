package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// Subscription is what a worker says it can handle: a definition and the
// revisions it understands (none: every granted revision).
type Subscription struct {
	Definition string
	Revisions  []int
}

// Pairs is a resolved subscription list: parallel definition keys and
// revisions, the shape the claim statement takes.
type Pairs struct {
	Keys      []string
	Revisions []int32
}

// Matches reports whether (key, revision) is in the pairs.
func (p Pairs) Matches(key string, revision int) bool {
	for i, k := range p.Keys {
		if k == key && int(p.Revisions[i]) == revision {
			return true
		}
	}
	return false
}

// ResolveSubscriptions intersects a worker's subscriptions with its
// consumer's grants. Asking for something not granted is refused
// (not_granted) rather than silently ignored, so a misconfigured worker
// learns why it gets nothing; the refusal does not reveal whether the
// definition exists.
func (e *Engine) ResolveSubscriptions(ctx context.Context, consumerID int64, subs []Subscription) (Pairs, error) {
	grants, err := e.grants(ctx, consumerID)
	if err != nil {
		return Pairs{}, err
	}
	byKey := make(map[string]Grant, len(grants))
	for _, g := range grants {
		byKey[g.Definition] = g
	}
	var p Pairs
	var errs []fault.FieldError
	seen := map[string]bool{}
	for i, s := range subs {
		g, ok := byKey[s.Definition]
		if !ok {
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/subscriptions/%d/definition", i), Message: "not granted to this consumer"})
			continue
		}
		revs := s.Revisions
		if len(revs) == 0 {
			if g.Revisions != nil {
				revs = g.Revisions
			} else {
				all, err := e.q.RevisionNumbers(ctx, s.Definition)
				if err != nil {
					return Pairs{}, wrap("resolve subscriptions", err)
				}
				revs = toInts(all)
			}
		} else if g.Revisions != nil {
			for j, r := range revs {
				if !slices.Contains(g.Revisions, r) {
					errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/subscriptions/%d/revisions/%d", i, j), Message: "not granted to this consumer"})
				}
			}
		}
		for _, r := range revs {
			k := fmt.Sprintf("%s@%d", s.Definition, r)
			if !seen[k] {
				seen[k] = true
				p.Keys, p.Revisions = append(p.Keys, s.Definition), append(p.Revisions, int32(r))
			}
		}
	}
	if len(errs) > 0 {
		return Pairs{}, fault.New(fault.Forbidden, "not_granted", "the consumer is not granted every subscription").WithErrors(errs)
	}
	return p, nil
}

// ClaimRequest claims available occurrences for one worker.
type ClaimRequest struct {
	ConsumerID   int64
	WorkerID     string
	Pairs        Pairs
	MaxTasks     int
	LockDuration time.Duration
	RequestID    string
}

// Reservation is an occurrence delivered to a worker, with its inputs in
// clear (secrets included: the consumer is authorized).
type Reservation struct {
	ID            uuid.UUID
	Definition    string
	Revision      int
	Inputs        json.RawMessage
	Attempt       int
	AttemptsLeft  int
	LockExpiresAt time.Time
	DeadlineAt    *time.Time
	InstanceID    uuid.UUID
	Node          string
	Priority      int
}

// Claim reserves up to MaxTasks claimable occurrences in one statement. A
// RequestID already used by this worker returns the reservations it made
// that it still holds (lock not expired) instead of claiming more.
func (e *Engine) Claim(ctx context.Context, req ClaimRequest) ([]Reservation, error) {
	if len(req.Pairs.Keys) == 0 {
		return nil, nil
	}
	var rid *string
	if req.RequestID != "" {
		rid = &req.RequestID
		// Only reservations still held are replayed: a lapsed lock is no
		// longer the worker's, and with none left the request claims anew.
		prior, err := e.q.OccurrenceReplayRequest(ctx, queries.OccurrenceReplayRequestParams{ConsumerID: &req.ConsumerID, WorkerID: &req.WorkerID, RequestID: rid, Now: e.at()})
		if err != nil {
			return nil, wrap("claim replay", err)
		}
		if len(prior) > 0 {
			return e.reservations(prior)
		}
	}
	rows, err := e.q.OccurrenceClaimPull(ctx, queries.OccurrenceClaimPullParams{
		DefinitionKeys: req.Pairs.Keys, Revisions: req.Pairs.Revisions, Now: e.at(), MaxTasks: int32(req.MaxTasks),
		ConsumerID: &req.ConsumerID, WorkerID: &req.WorkerID, LockDuration: req.LockDuration, RequestID: rid})
	if err != nil {
		return nil, wrap("claim", err)
	}
	occs := make([]queries.Occurrence, len(rows))
	for i, row := range rows {
		occs[i] = queries.Occurrence(row)
	}
	return e.reservations(occs)
}

func (e *Engine) reservations(rows []queries.Occurrence) ([]Reservation, error) {
	out := make([]Reservation, 0, len(rows))
	for _, o := range rows {
		inputs, err := e.unseal(o.Inputs, o.SealedInputs, aadOccurrenceInputs(o.ID))
		if err != nil {
			return nil, err
		}
		out = append(out, Reservation{ID: o.ID, Definition: o.DefinitionKey, Revision: int(o.Revision), Inputs: inputs,
			Attempt: int(o.Attempts), AttemptsLeft: int(o.MaxAttempts - o.Attempts), LockExpiresAt: *o.LockExpiresAt,
			DeadlineAt: o.DeadlineAt, InstanceID: o.InstanceID, Node: o.Node, Priority: int(o.Priority)})
	}
	return out, nil
}

// NextClaimable returns when the earliest not-yet-claimable occurrence of
// the pairs becomes claimable (a retry delay or a lock ending), if any.
func (e *Engine) NextClaimable(ctx context.Context, p Pairs) (time.Time, bool, error) {
	t, err := e.q.OccurrenceNextClaimable(ctx, queries.OccurrenceNextClaimableParams{DefinitionKeys: p.Keys, Revisions: p.Revisions, Now: e.at()})
	if isNoRows(err) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, wrap("next claimable", err)
	}
	return t, true, nil
}

// Settlement is the answer to complete and fail.
type Settlement struct {
	Status       string
	Route        string
	AttemptsLeft int
	AvailableAt  *time.Time
}

// WorkerRef identifies the worker acting on an occurrence.
type WorkerRef struct {
	ConsumerID int64
	WorkerID   string
	Occurrence uuid.UUID
}

// held locks the instance then the occurrence of ref, and checks that the
// worker holds a live lock on it. A stale worker never gets through: each
// refusal names its situation. For an occurrence the consumer may not see,
// it answers 404 exactly as for an unknown id.
func (e *Engine) held(ctx context.Context, q *queries.Queries, ref WorkerRef) (*run, queries.Occurrence, error) {
	r, err := e.runForOccurrence(ctx, q, ref.Occurrence)
	if err != nil {
		return nil, queries.Occurrence{}, err
	}
	o, err := q.OccurrenceLock(ctx, ref.Occurrence)
	if err != nil {
		return nil, queries.Occurrence{}, err
	}
	if o.Mode != ModePull {
		return nil, o, notFound("occurrence %s", ref.Occurrence)
	}
	ok, err := granted(ctx, q, ref.ConsumerID, o.DefinitionKey, int(o.Revision))
	if err != nil {
		return nil, o, err
	}
	if !ok {
		return nil, o, notFound("occurrence %s", ref.Occurrence)
	}
	return r, o, nil
}

// lockRefusal explains why ref does not hold a live lock on o, or returns
// nil when it does.
func lockRefusal(o queries.Occurrence, ref WorkerRef, now time.Time) error {
	switch o.Status {
	case StatusCompleted, StatusFailed:
		return fault.New(fault.Conflict, "already_settled", "occurrence %s is already %s", o.ID, o.Status)
	case StatusCancelled:
		return fault.New(fault.Conflict, "occurrence_cancelled", "occurrence %s was cancelled (its instance was stopped)", o.ID)
	case StatusAvailable:
		return fault.New(fault.Conflict, "not_reserved", "occurrence %s is not reserved; fetch it first", o.ID)
	}
	if o.ConsumerID == nil || *o.ConsumerID != ref.ConsumerID || o.WorkerID == nil || *o.WorkerID != ref.WorkerID {
		return fault.New(fault.Conflict, "locked_by_other_worker", "occurrence %s is reserved by another worker", o.ID)
	}
	if o.LockExpiresAt == nil || !o.LockExpiresAt.After(now) {
		return fault.New(fault.Conflict, "lock_expired", "the lock on occurrence %s expired at %s", o.ID, o.LockExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// canonicalOutputs is an outputs document in one form for replay
// detection: equal JSON is equal whatever its formatting.
func canonicalOutputs(outputs json.RawMessage) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(outputs))
	dec.UseNumber()
	_ = dec.Decode(&v)
	b, _ := json.Marshal(v)
	return b
}

// Complete settles an occurrence with the worker's outputs, validated
// against the pinned revision; the route is derived from the routing output
// and the instance advances, all in one transaction. Invalid outputs are
// refused (invalid_outputs) and the reservation stays. An identical replay
// of the completion answers the same.
func (e *Engine) Complete(ctx context.Context, ref WorkerRef, outputs json.RawMessage) (Settlement, error) {
	var out Settlement
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		r, o, err := e.held(ctx, q, ref)
		if err != nil {
			return err
		}
		canonical := canonicalOutputs(outputs)
		if o.Status == StatusCompleted && o.OutputsDigest != nil && e.sameDigest(canonical, *o.OutputsDigest) &&
			o.ConsumerID != nil && *o.ConsumerID == ref.ConsumerID && o.WorkerID != nil && *o.WorkerID == ref.WorkerID {
			out = Settlement{Status: StatusCompleted, Route: deref(o.Route), AttemptsLeft: int(o.MaxAttempts - o.Attempts)}
			return nil
		}
		if err := lockRefusal(o, ref, r.now); err != nil {
			return err
		}
		rev, err := e.revision(ctx, q, o.DefinitionKey, int(o.Revision))
		if err != nil {
			return err
		}
		_, ov, err := e.Validators(rev)
		if err != nil {
			return err
		}
		if vs := ov.Validate(outputs); len(vs) > 0 {
			for i := range vs {
				vs[i].Path = "/outputs" + vs[i].Path
			}
			return violations("invalid_outputs", "the outputs violate revision "+fmt.Sprint(o.Revision)+" of "+o.DefinitionKey, vs)
		}
		route, err := rev.Working.Route(outputs)
		if err != nil {
			return err
		}
		if err := r.complete(o, rev, outputs, canonical, route); err != nil {
			return err
		}
		out = Settlement{Status: StatusCompleted, Route: route, AttemptsLeft: int(o.MaxAttempts - o.Attempts)}
		return nil
	})
	return out, wrap("complete", err)
}

// complete records validated outputs (canonical is their canonicalOutputs,
// which the caller has at hand), ends the attempt and advances.
func (r *run) complete(o queries.Occurrence, rev *Revision, outputs json.RawMessage, canonical []byte, route string) error {
	public, sealed, err := r.e.seal(rev.Working.Outputs, outputs, aadOccurrenceOutputs(o.ID))
	if err != nil {
		return err
	}
	var routePtr *string
	if route != "" {
		routePtr = &route
	}
	if err := r.q.OccurrenceComplete(r.ctx, queries.OccurrenceCompleteParams{ID: o.ID, Outputs: public, SealedOutputs: sealed,
		OutputsDigest: r.e.digest(canonical), Route: routePtr, Now: &r.now}); err != nil {
		return err
	}
	if err := r.q.AttemptEnd(r.ctx, queries.AttemptEndParams{OccurrenceID: o.ID, Number: o.Attempts, Outcome: OutcomeCompleted, Now: &r.now}); err != nil {
		return err
	}
	if r.outputs != nil {
		r.outputs[o.Node] = outputs
	}
	next, err := r.pv.Process.NextOnSuccess(o.Node, route)
	if err != nil {
		return err
	}
	return r.enter(next)
}

// fail records a terminal failure, ends the attempt and follows on_error.
func (r *run) fail(o queries.Occurrence, outcome, code, message string) error {
	if err := r.q.OccurrenceFail(r.ctx, queries.OccurrenceFailParams{ID: o.ID, ErrorCode: &code, ErrorMessage: &message, Now: &r.now}); err != nil {
		return err
	}
	if o.Status == StatusReserved {
		if err := r.q.AttemptEnd(r.ctx, queries.AttemptEndParams{OccurrenceID: o.ID, Number: o.Attempts, Outcome: outcome,
			ErrorCode: &code, ErrorMessage: &message, Now: &r.now}); err != nil {
			return err
		}
	}
	return r.followFailure(o.Node, code)
}

// Failure is a worker's report that it could not do the work.
type Failure struct {
	ErrorCode  string
	Message    string
	Retryable  bool
	RetryDelay *time.Duration // nil: the occurrence's frozen retry_delay
}

var errorCodePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// maxErrorMessage bounds stored worker messages: they are diagnostics, not
// payloads.
const maxErrorMessage = 2000

// Fail records a worker's failure. A retryable failure with attempts left
// makes the occurrence available again after the retry delay; otherwise it
// fails terminally and the process's error handling decides. The message is
// scrubbed of the occurrence's sensitive and secret values before storage.
func (e *Engine) Fail(ctx context.Context, ref WorkerRef, f Failure) (Settlement, error) {
	var errs []fault.FieldError
	if !errorCodePattern.MatchString(f.ErrorCode) {
		errs = append(errs, fault.FieldError{Path: "/error_code", Message: "must be 1 to 64 letters, digits or _ . : -"})
	}
	if len(errs) > 0 {
		return Settlement{}, fault.New(fault.BadRequest, "invalid_request", "the failure is invalid").WithErrors(errs)
	}
	if f.RetryDelay != nil && *f.RetryDelay > e.limits.MaxRetryDelay {
		return Settlement{}, BoundExceeded("retry_delay", e.limits.MaxRetryDelay)
	}
	var out Settlement
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		r, o, err := e.held(ctx, q, ref)
		if err != nil {
			return err
		}
		if err := lockRefusal(o, ref, r.now); err != nil {
			return err
		}
		protected, err := e.protectedOf(ctx, q, o)
		if err != nil {
			return err
		}
		code, message := redactCode(f.ErrorCode, protected), scrubMessage(f.Message, protected)
		left := int(o.MaxAttempts - o.Attempts)
		if f.Retryable && left > 0 {
			delay := o.RetryDelay
			if f.RetryDelay != nil {
				delay = *f.RetryDelay
			}
			at := r.now.Add(delay)
			if _, err := q.OccurrenceRetry(ctx, queries.OccurrenceRetryParams{ID: o.ID, AvailableAt: at, ErrorCode: &code, ErrorMessage: &message}); err != nil {
				return err
			}
			if err := q.AttemptEnd(ctx, queries.AttemptEndParams{OccurrenceID: o.ID, Number: o.Attempts, Outcome: OutcomeFailed,
				ErrorCode: &code, ErrorMessage: &message, Now: &r.now}); err != nil {
				return err
			}
			if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelOccurrence, Payload: AvailabilityPayload(o.Mode, o.DefinitionKey, int(o.Revision), at)}); err != nil {
				return err
			}
			out = Settlement{Status: StatusAvailable, AttemptsLeft: left, AvailableAt: &at}
			return nil
		}
		if err := r.fail(o, OutcomeFailed, code, message); err != nil {
			return err
		}
		out = Settlement{Status: StatusFailed, AttemptsLeft: left}
		return nil
	})
	return out, wrap("fail", err)
}

// redactedCode replaces a worker's error code that holds a protected value:
// codes are shown as they are, so they cannot be scrubbed in place.
const redactedCode = "redacted"

// minCodeMatch is the shortest protected value looked for anywhere inside
// a code; shorter ones (a CVV "737", a sensitive "5") are looked for as a
// whole piece of it between separators, or every code with a digit would
// be redacted.
const minCodeMatch = 4

// protectedOf returns the values a failure reported for o must not show:
// the occurrence's sensitive and secret inputs and, for a push occurrence,
// its destination's header values.
func (e *Engine) protectedOf(ctx context.Context, q *queries.Queries, o queries.Occurrence) ([]string, error) {
	rev, err := e.revision(ctx, q, o.DefinitionKey, int(o.Revision))
	if err != nil {
		return nil, err
	}
	inputs, err := e.unseal(o.Inputs, o.SealedInputs, aadOccurrenceInputs(o.ID))
	if err != nil {
		return nil, err
	}
	protected := rev.Working.Inputs.ProtectedStrings(inputs)
	if o.Destination != nil {
		// A destination may echo the credentials it was sent: its header
		// and URL query values are secret too. What cannot be read was
		// not sent either: the call is prepared from the same lookup.
		if dest, err := e.destinationCall(ctx, q, *o.Destination); err == nil {
			protected = append(protected, dest.Secrets...)
		}
	}
	return protected, nil
}

// scrubMessage removes protected values from a worker- or
// destination-supplied message and bounds its length.
func scrubMessage(message string, protected []string) string {
	// Text columns hold valid UTF-8 without NUL: a destination's body may
	// have neither.
	message = strings.ReplaceAll(strings.ToValidUTF8(message, "?"), "\x00", "?")
	// Scrub before truncating, so no protected value is cut in half and
	// left as a prefix.
	message = contracts.Scrub(message, protected)
	if len(message) > maxErrorMessage {
		// Cut on a character boundary: the column holds UTF-8 text.
		cut := maxErrorMessage
		for cut > 0 && !utf8.RuneStart(message[cut]) {
			cut--
		}
		message = message[:cut] + "…"
	}
	return message
}

// redactCode replaces a worker's error code that holds a protected value:
// inside it for values of minCodeMatch characters or more, as a piece
// between separators (CVV_737_REJECTED) for shorter ones. Codes Relais
// makes itself never hold one and are not passed here.
func redactCode(code string, protected []string) string {
	pieces := strings.FieldsFunc(code, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, p := range protected {
		if utf8.RuneCountInString(p) >= minCodeMatch && strings.Contains(code, p) || code == p || slices.Contains(pieces, p) {
			return redactedCode
		}
	}
	return code
}

// Extend prolongs the worker's lock. It is also how a worker learns that
// its occurrence was cancelled (occurrence_cancelled).
func (e *Engine) Extend(ctx context.Context, ref WorkerRef, d time.Duration) (time.Time, error) {
	var until time.Time
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		r, o, err := e.held(ctx, q, ref)
		if err != nil {
			return err
		}
		if err := lockRefusal(o, ref, r.now); err != nil {
			return err
		}
		until = r.now.Add(d)
		if _, err := q.OccurrenceExtend(ctx, queries.OccurrenceExtendParams{ID: o.ID, LockExpiresAt: until}); err != nil {
			return err
		}
		return q.AttemptExtend(ctx, queries.AttemptExtendParams{OccurrenceID: o.ID, Number: o.Attempts, LockExpiresAt: until})
	})
	return until, wrap("extend", err)
}

// BoundExceeded is the refusal of a request above an operator ceiling:
// bounds are rejections, never clamps.
func BoundExceeded(field string, ceiling any) *fault.Error {
	c := ceiling
	if d, ok := ceiling.(time.Duration); ok {
		c = formatDuration(d)
	}
	fe := fault.New(fault.BadRequest, "bound_exceeded", "%s is above the ceiling %v", field, c)
	fe.Errors = []fault.FieldError{{Path: "/" + field, Message: fmt.Sprintf("must be at most %v", c)}}
	fe.Extra = map[string]any{"field": field, "ceiling": c}
	return fe
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
