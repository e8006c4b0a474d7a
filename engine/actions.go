package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/suggest"
	"github.com/relais/relais/queries"
)

// Action is an operator action on an instance (DESIGN §12). None of them
// fabricates outputs: nothing completes an occurrence on a worker's behalf.
type Action string

// Operator actions.
const (
	// ActionRetry offers a held instance's failed occurrence again with a
	// fresh max_attempts, its attempt history kept; the instance runs again.
	// On a running instance whose occurrence waits out a retry delay, it
	// offers that occurrence now, its attempts left unchanged (a bulk
	// retry does so when its filter keeps running instances: see
	// BringsForward).
	ActionRetry Action = "retry"
	// ActionAbandon fails a held instance with the error code abandoned.
	ActionAbandon Action = "abandon"
	// ActionStop cancels a running or held instance and its open
	// occurrences.
	ActionStop Action = "stop"
)

// ParseAction returns the action named s.
func ParseAction(s string) (Action, bool) {
	switch a := Action(s); a {
	case ActionRetry, ActionAbandon, ActionStop:
		return a, true
	}
	return "", false
}

// appliesTo are the instance statuses an action changes.
func (a Action) appliesTo() []string {
	if a == ActionStop {
		return []string{InstanceRunning, InstanceHeld}
	}
	return []string{InstanceHeld}
}

// BringsForward reports whether action, applied to what f matches, brings
// running instances' waiting retries forward rather than retry held ones:
// a retry whose filter keeps running instances (by status, or by the
// definition a retry waits at). A retry's filter without either keeps
// held instances, as it always did.
func (a Action) BringsForward(f InstanceFilter) bool {
	return a == ActionRetry && (f.Status == InstanceRunning || f.RetryingAt != "")
}

// OverWaitingRetries reports whether action over f takes running
// instances whose retry waits: a retry bringing them forward, or any
// action narrowed to the definition a retry waits at. Such instances have
// no error code of their own (their occurrence's is what breaks them
// down), and their count shrinks as retries come due.
func (a Action) OverWaitingRetries(f InstanceFilter) bool {
	return a.BringsForward(f) || f.RetryingAt != ""
}

// bulkStatuses are the statuses action changes among what f matches.
func (a Action) bulkStatuses(f InstanceFilter) []string {
	if a.BringsForward(f) {
		return []string{InstanceRunning}
	}
	return a.appliesTo()
}

// Actor is who acts: recorded in the audit log with the action.
type Actor struct {
	TokenID int64
	Name    string
}

// tokenID is the id of the token that acted, as the audit tables keep it:
// nil for an action no stored token made.
func (a Actor) tokenID() *int64 {
	if a.TokenID == 0 {
		return nil
	}
	return &a.TokenID
}

// MaxReason bounds an action's reason, in characters (Unicode code
// points), not bytes: operators write in any language, and a console's
// textarea counts characters.
const MaxReason = 1000

// AbandonedCode is the error code of an abandoned instance.
const AbandonedCode = "abandoned"

func checkReason(reason string) error {
	switch r := strings.TrimSpace(reason); {
	case r == "":
		return fault.New(fault.BadRequest, "invalid_request", "a reason is required").
			WithErrors([]fault.FieldError{{Path: "/reason", Message: "is required: say why, it is recorded in the audit log"}})
	case utf8.RuneCountInString(reason) > MaxReason:
		return fault.New(fault.BadRequest, "invalid_request", "the reason is too long").
			WithErrors([]fault.FieldError{{Path: "/reason", Message: fmt.Sprintf("must be at most %d characters", MaxReason)}})
	}
	return nil
}

// Act applies action to one instance, with a required reason, in one
// transaction with its audit record. Retry and abandon need a held
// instance (409 not_held otherwise), stop a running or held one (409
// instance_ended once it completed or failed); stopping a cancelled
// instance again changes nothing and records nothing.
func (e *Engine) Act(ctx context.Context, actor Actor, action Action, id uuid.UUID, reason string) (Instance, error) {
	inst, _, err := e.ActApplied(ctx, actor, action, id, reason)
	return inst, err
}

// ActApplied is Act, also saying whether the action changed anything:
// applied is false when the instance already was as the action leaves it
// (a stop of a stopped instance), in which case nothing was recorded. A
// console tells the operator who lost a race that way.
func (e *Engine) ActApplied(ctx context.Context, actor Actor, action Action, id uuid.UUID, reason string) (inst Instance, applied bool, err error) {
	return e.ActSeen(ctx, actor, action, id, reason, nil)
}

// LastAction is the newest operator action recorded on an instance, or
// nil when there is none: what an operator sees before acting, and what
// ActSeen checks.
func (e *Engine) LastAction(ctx context.Context, id uuid.UUID) (*OperatorAction, error) {
	row, err := e.q.OperatorActionLatest(ctx, id)
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("last action", err)
	}
	return &OperatorAction{ID: row.ID, At: row.At, ActorName: row.ActorName, Action: row.Action, InstanceID: id}, nil
}

// ActSeen is ActApplied for an operator who looked at the instance first:
// lastSeen is the id of the newest operator action they saw on it (0:
// none; nil: no check). If another was recorded since, nothing is applied
// and the refusal is 409 acted_meanwhile, naming who did what: an instance
// retried by someone else and held again by the same error looks
// unchanged, but is not the incident the operator decided on.
func (e *Engine) ActSeen(ctx context.Context, actor Actor, action Action, id uuid.UUID, reason string, lastSeen *int64) (inst Instance, applied bool, err error) {
	return e.ActSeenWhile(ctx, actor, action, id, reason, lastSeen, "")
}

// ActSeenWhile is ActSeen for an action asked of an instance in status
// (empty: any): one in another status under its lock is refused, 409
// not_held for a retry, instance_ended otherwise, nothing applied. A
// retry asked to bring a running instance's waiting retry forward (its
// attempts left unchanged) must not become a held instance's retry with a
// fresh budget because a worker's failure held it meanwhile (security QA:
// a stale form reset a business rejection's budget).
func (e *Engine) ActSeenWhile(ctx context.Context, actor Actor, action Action, id uuid.UUID, reason string, lastSeen *int64, status string) (inst Instance, applied bool, err error) {
	if err := checkReason(reason); err != nil {
		return Instance{}, false, err
	}
	if lastSeen != nil && *lastSeen < 0 {
		return Instance{}, false, fault.New(fault.BadRequest, "invalid_request", "last_action_id must be 0 or more").
			WithErrors([]fault.FieldError{{Path: "/last_action_id", Message: "must be the id of the newest audit record seen on the instance, or 0 for none"}})
	}
	err = e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		var err error
		applied, err = e.actIn(ctx, q, actor, action, id, strings.TrimSpace(reason), nil, InstanceFilter{}, lastSeen, status)
		return err
	})
	if err != nil {
		return Instance{}, false, wrap(string(action)+" instance", err)
	}
	if applied {
		e.expireCounts()
	}
	inst, err = e.GetInstance(ctx, id)
	return inst, applied, err
}

// expireCounts makes this replica's cached counts and health stale after
// an operator's action changed them: the page the operator opens next
// shows them after it (on-call QA: 24 held still shown once all were
// abandoned). Other replicas' follow within their few seconds.
func (e *Engine) expireCounts() {
	e.counts.Expire()
	e.health.Expire()
}

// actIn applies action to id inside q's transaction; applied is false when
// the instance was already as the action would leave it (a repeated stop).
func (e *Engine) actIn(ctx context.Context, q *queries.Queries, actor Actor, action Action, id uuid.UUID, reason string, bulk *uuid.UUID, f InstanceFilter, lastSeen *int64, while string) (applied bool, err error) {
	row, err := q.InstanceLock(ctx, queries.InstanceLockParams{ID: id, Now: e.at()})
	if isNoRows(err) {
		return false, notKept("instance %s", id)
	}
	if err != nil {
		return false, err
	}
	if while != "" && row.Instance.Status != while {
		if action == ActionStop {
			return false, fault.New(fault.Conflict, "instance_ended", "instance %s is %s now, not %s as when this %s was asked: look at it again before acting", id, row.Instance.Status, while, action)
		}
		return false, fault.New(fault.Conflict, "not_held", "instance %s is %s now, not %s as when this %s was asked: look at it again before acting", id, row.Instance.Status, while, action)
	}
	retryNow := action == ActionRetry && row.Instance.Status == InstanceRunning && (bulk == nil || action.BringsForward(f))
	// checkSeen refuses the action when one was recorded on the instance
	// since the client looked at it (lastSeen).
	checkSeen := func() error {
		// Under the instance's lock, which every action takes first: no
		// other action can be recorded between this check and this one's.
		// An action that no longer applies (the instance was stopped,
		// say) is refused below in words of its own.
		last, err := q.OperatorActionLatest(ctx, id)
		switch {
		case isNoRows(err):
			last.ID = 0
		case err != nil:
			return err
		}
		if last.ID != *lastSeen {
			if *lastSeen != 0 {
				// An id of another instance's record, or of none: the
				// client's mistake, not a colleague's action.
				ours, err := q.OperatorActionRecordedOn(ctx, queries.OperatorActionRecordedOnParams{ID: *lastSeen, InstanceID: id})
				if err != nil {
					return err
				}
				if !ours {
					return fault.New(fault.BadRequest, "invalid_request", "last_action_id %d is no operator action recorded on instance %s", *lastSeen, id).
						WithErrors([]fault.FieldError{{Path: "/last_action_id", Message: fmt.Sprintf("must be the id of the newest audit record on the instance (%d now), or 0 for none: GET /api/v1/audit/actions?instance=%s&limit=1", last.ID, id)}})
				}
			}
			fe := fault.New(fault.Conflict, "acted_meanwhile", "instance %s was acted on since you looked at it (%s by %s at %s): look at it again before acting",
				id, last.Action, last.ActorName, last.At.UTC().Format(time.RFC3339))
			fe.Extra = map[string]any{"last_action_id": last.ID}
			return fe
		}
		return nil
	}
	if lastSeen != nil && slices.Contains(action.appliesTo(), row.Instance.Status) {
		if err := checkSeen(); err != nil {
			return false, err
		}
	}
	inst, now := row.Instance, row.Now
	if f.Status != "" && inst.Status != f.Status || f.ErrorCode != "" && deref(inst.ErrorCode) != f.ErrorCode ||
		f.HeldAt != "" && inst.Status != InstanceHeld {
		// A bulk action's filter named a status or an error code the
		// instance left meanwhile (retried, it failed again otherwise):
		// it is skipped, not acted on for another incident.
		return false, nil
	}
	if f.RetryingAt != "" && inst.Status != InstanceRunning {
		return false, nil
	}
	if f.RetryingAt != "" && action != ActionRetry {
		// A bulk stop's instance whose retry came due and moved on (its
		// service back, it went on to the next step) left the filter:
		// skipped, as one held again elsewhere is. A retry re-checks it
		// as it brings the retry forward.
		waits, err := q.OccurrenceWaitsRetryAt(ctx, queries.OccurrenceWaitsRetryAtParams{InstanceID: id, DefinitionKey: f.RetryingAt, Now: now})
		if err != nil {
			return false, err
		}
		if !waits {
			return false, nil
		}
	}
	if f.HeldAt != "" {
		// Held again since, at a node of another definition: skipped too.
		o, err := q.OccurrenceHeldAt(ctx, id)
		if err != nil && !isNoRows(err) {
			return false, err
		}
		if err != nil || o.DefinitionKey != f.HeldAt {
			return false, nil
		}
	}
	var occurrence *uuid.UUID
	switch action {
	case ActionStop:
		switch inst.Status {
		case InstanceCancelled:
			return false, nil
		case InstanceCompleted, InstanceFailed:
			return false, fault.New(fault.Conflict, "instance_ended", "instance %s has already ended (%s): there is nothing to stop", id, inst.Status)
		}
		if err := e.cancelInstance(ctx, q, inst, now); err != nil {
			return false, err
		}
	case ActionRetry, ActionAbandon:
		if retryNow {
			// Its occurrence waits out a retry delay (the service its
			// worker calls is back, say: push nodes are never retried):
			// offered now, its attempts left unchanged.
			// Operators had no way to bring a retry forward.
			waiting, err := q.OccurrenceRetryNow(ctx, queries.OccurrenceRetryNowParams{InstanceID: id, Now: now})
			if err != nil {
				return false, err
			}
			if len(waiting) == 0 {
				return false, fault.New(fault.Conflict, "not_held", "instance %s is running and none of its occurrences waits for a retry: only a held instance, or a running one whose occurrence waits out a retry delay, can be retried", id)
			}
			if f.RetryingAt != "" && !slices.ContainsFunc(waiting, func(o queries.Occurrence) bool { return o.DefinitionKey == f.RetryingAt }) {
				// A bulk action's: its retry waits at another definition
				// now. Skipped (the savepoint's rollback undoes the update).
				return false, fault.New(fault.Conflict, "not_held", "instance %s no longer waits for a retry at %s", id, f.RetryingAt)
			}
			// Checked once something waits (the refusal rolls the update
			// back): a form opened before a colleague's retry, posted once
			// the occurrence waits again, pulled the next attempt forward
			// a second time (verifier QA); with nothing waiting, not_held
			// says more than that someone acted.
			if lastSeen != nil {
				if err := checkSeen(); err != nil {
					return false, err
				}
			}
			for _, o := range waiting {
				if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelOccurrence, Payload: AvailabilityPayload(o.Mode, o.DefinitionKey, int(o.Revision), now)}); err != nil {
					return false, err
				}
			}
			occurrence = &waiting[0].ID
			break
		}
		switch {
		case inst.Status == InstanceFailed && deref(inst.ErrorCode) == AbandonedCode:
			return false, fault.New(fault.Conflict, "not_held", "instance %s was abandoned: it has ended, and only a held instance can be retried or abandoned; start a new instance (with a new Idempotency-Key, or none) to redo the work", id)
		case inst.Status == InstanceFailed:
			// Its failure ended it: only an instance whose process routes
			// the failure to hold waits for an operator.
			return false, fault.New(fault.Conflict, "not_held", "instance %s is failed, not held: only a held instance can be retried or abandoned; %s; start a new instance (with a new Idempotency-Key, or none) to redo the work", id, failureEnds)
		}
		if inst.Status != InstanceHeld {
			return false, fault.New(fault.Conflict, "not_held", "instance %s is %s, not held: only a held instance can be retried or abandoned (and a running one whose occurrence waits out a retry delay retried, to bring that retry forward)", id, inst.Status)
		}
		o, err := q.OccurrenceHeldAt(ctx, id)
		if err != nil {
			return false, err
		}
		occurrence = &o.ID
		if action == ActionRetry {
			if !retryable(o) {
				return false, fault.New(fault.Conflict, "not_retryable", "the occurrence at %s failed before any attempt: its inputs could not be built (%s); abandon or stop the instance", o.Node, deref(o.ErrorCode))
			}
			if _, err := q.OccurrenceRetryHeld(ctx, queries.OccurrenceRetryHeldParams{ID: o.ID, Now: now}); err != nil {
				return false, err
			}
			if _, err := q.InstanceResume(ctx, id); err != nil {
				return false, err
			}
			if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelOccurrence, Payload: AvailabilityPayload(o.Mode, o.DefinitionKey, int(o.Revision), now)}); err != nil {
				return false, err
			}
		} else {
			code := AbandonedCode
			if err := q.InstanceEnd(ctx, queries.InstanceEndParams{ID: id, Status: InstanceFailed, EndNode: &o.Node, ErrorCode: &code, Now: &now, FromHeld: true}); err != nil {
				return false, err
			}
			countInstance(q, inst.ProcessKey, InstanceFailed)
		}
	default:
		return false, fault.New(fault.BadRequest, "invalid_request", "unknown action %q", action)
	}
	// The reason is stored as typed. Scrubbing it of the instance's
	// protected values would make what operators read depend on values
	// they may not see (a reason listing guesses would show which one is
	// the secret): the console warns instead, by the reason's field.
	return true, q.OperatorActionInsert(ctx, queries.OperatorActionInsertParams{At: now, ActorID: actor.tokenID(), ActorName: actor.Name,
		Action: string(action), Reason: reason, InstanceID: id, OccurrenceID: occurrence, BulkID: bulk, BroughtForward: retryNow})
}

// Retryable reports whether an operator's retry can offer o, the failed
// occurrence of a held instance, again. One that failed from birth, its
// inputs not built, cannot: built again from the same instance, they would
// fail again (the retry answers not_retryable). Any other can, whatever
// its attempts: one whose deadline passed before any worker took it
// included.
func Retryable(o Occurrence) bool { return retryableAfter(o.Attempts, o.ErrorCode) }

func retryable(o queries.Occurrence) bool { return retryableAfter(int(o.Attempts), o.ErrorCode) }

func retryableAfter(attempts int, errorCode *string) bool {
	return attempts > 0 || deref(errorCode) != CodeInvalidInputs
}

// cancelInstance cancels inst (locked) and its open occurrences, waking the
// push runner holding an in-flight call so that it aborts.
func (e *Engine) cancelInstance(ctx context.Context, q *queries.Queries, inst queries.Instance, now time.Time) error {
	id := inst.ID
	cancelled, err := q.OccurrenceCancelOpen(ctx, queries.OccurrenceCancelOpenParams{InstanceID: id, Now: &now})
	if err != nil {
		return err
	}
	if err := q.AttemptCancelOpen(ctx, queries.AttemptCancelOpenParams{InstanceID: id, Now: &now}); err != nil {
		return err
	}
	if n, err := q.InstanceCancel(ctx, queries.InstanceCancelParams{ID: id, Now: &now}); err != nil {
		return err
	} else if n > 0 {
		countInstance(q, inst.ProcessKey, InstanceCancelled)
	}
	for _, c := range cancelled {
		// Wakes the push runner holding an in-flight call so it aborts,
		// and tells the worker stream holding it (any replica).
		if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelCancel, Payload: CancelPayload(c.ID, CancelInstanceStopped)}); err != nil {
			return err
		}
	}
	return nil
}

// BulkResult reports an action applied to every instance a filter
// matched.
type BulkResult struct {
	ID      uuid.UUID // the bulk id every audit record of it carries
	Matched int64     // what the filter matched when the count was confirmed
	Applied int64
	// Skipped instances changed since the count (a worker settled them,
	// another operator acted first): left as they are.
	Skipped int64
}

// bulkBatch bounds the instances one transaction of a bulk action changes.
const bulkBatch = 100

// maxBulk bounds the instances one bulk action applies to: their ids are
// read at once (16 bytes each), and at about half a millisecond each,
// a million already takes minutes.
const maxBulk = 1_000_000

// CountForAction is how many instances action would change among those f
// matches: the count an operator confirms before a bulk action. A retry
// counts only the held instances it can offer again: one whose failed
// occurrence failed from birth, its inputs not built (a single retry
// answers not_retryable), is neither counted nor touched, so the bulk
// retry's count and what it applies agree. A retry whose filter keeps
// running instances (status running, or RetryingAt) counts those whose
// occurrence waits out a retry delay: it brings their retries forward.
// UnknownKeys says what of f's keys names nothing: its process (or, with
// a version, that version of it) and the definitions of HeldAt and
// RetryingAt. A typo would count 0, which reads as an incident's end: the
// API and the console refuse such a bulk filter, each in its own words.
type UnknownKeys struct {
	Process, Version, HeldAt, RetryingAt bool
	// RetryingAtPushed: RetryingAt names a definition only push nodes use,
	// which are never retried: no retry of it ever waits.
	RetryingAtPushed bool
	// Definition, Revision, Consumer and Destination are an occurrence
	// filter's (see UnknownOccurrenceKeys).
	Definition, Revision, Consumer, Destination bool
	// Meant holds, by parameter (process, held_at, retrying_at,
	// definition, destination), the existing key an unknown one is a typo
	// of, when one is close (designer QA: a start suggested the process a
	// filter did not).
	Meant map[string]string
}

// guess notes in u the key of what that name is likely a typo of, among
// those keys lists.
func (u *UnknownKeys) guess(ctx context.Context, param, name string, keys func(context.Context) ([]string, error)) error {
	all, err := keys(ctx)
	if err != nil {
		return wrap("list keys for "+param, err)
	}
	if best, ok := suggest.Closest(name, all); ok {
		if u.Meant == nil {
			u.Meant = map[string]string{}
		}
		u.Meant[param] = best
	}
	return nil
}

// UnknownFilterKeys looks f's keys up (see UnknownKeys).
func (e *Engine) UnknownFilterKeys(ctx context.Context, f InstanceFilter) (UnknownKeys, error) {
	var u UnknownKeys
	if f.ProcessKey != "" {
		_, err := e.GetProcessVersion(ctx, f.ProcessKey, f.Version)
		switch {
		case fault.HasCode(err, "not_found") && f.Version > 0:
			u.Version = true
		case fault.HasCode(err, "not_found"):
			u.Process = true
			if err := u.guess(ctx, "process", f.ProcessKey, e.q.ProcessKeys); err != nil {
				return u, err
			}
		case err != nil:
			return u, err
		}
	}
	for _, d := range []struct {
		param, key string
		unknown    *bool
	}{{"held_at", f.HeldAt, &u.HeldAt}, {"retrying_at", f.RetryingAt, &u.RetryingAt}} {
		if d.key == "" {
			continue
		}
		_, err := e.GetDefinition(ctx, d.key)
		switch {
		case fault.HasCode(err, "not_found"):
			*d.unknown = true
			if err := u.guess(ctx, d.param, d.key, e.q.DefinitionKeys); err != nil {
				return u, err
			}
		case err != nil:
			return u, err
		}
	}
	if f.RetryingAt != "" && !u.RetryingAt {
		// Counting 0 for good would read as an outage's end.
		use, err := e.DefinitionUse(ctx, f.RetryingAt)
		if err != nil {
			return u, err
		}
		u.RetryingAtPushed = use.Pushed && !use.Pulled
	}
	return u, nil
}

// UnknownOccurrenceKeys looks f's keys up: its process, and its
// definition (with a revision, that revision of it). A list filtered by a
// key nothing has is empty, which reads as "none left" (see UnknownKeys).
func (e *Engine) UnknownOccurrenceKeys(ctx context.Context, f OccurrenceFilter) (UnknownKeys, error) {
	u, err := e.UnknownFilterKeys(ctx, InstanceFilter{ProcessKey: f.ProcessKey})
	if err != nil {
		return u, err
	}
	// Consumers are revoked, never deleted, and a destination a version
	// ever named cannot be deleted: one that is not there has no history.
	if f.ConsumerID != 0 {
		if _, err := e.GetConsumer(ctx, f.ConsumerID); fault.HasCode(err, "not_found") {
			u.Consumer = true
		} else if err != nil {
			return u, err
		}
	}
	if f.Destination != "" {
		if _, err := e.GetDestination(ctx, f.Destination); fault.HasCode(err, "not_found") {
			u.Destination = true
			if err := u.guess(ctx, "destination", f.Destination, e.q.DestinationNames); err != nil {
				return u, err
			}
		} else if err != nil {
			return u, err
		}
	}
	if f.Definition == "" {
		return u, nil
	}
	if f.Revision > 0 {
		_, err = e.GetRevision(ctx, f.Definition, f.Revision)
	} else {
		_, err = e.GetDefinition(ctx, f.Definition)
	}
	if fault.HasCode(err, "not_found") {
		// Which of the two is unknown: the definition, or its revision.
		if f.Revision > 0 {
			if _, derr := e.GetDefinition(ctx, f.Definition); derr == nil {
				u.Revision = true
				return u, nil
			}
		}
		u.Definition = true
		return u, u.guess(ctx, "definition", f.Definition, e.q.DefinitionKeys)
	}
	return u, err
}

func (e *Engine) CountForAction(ctx context.Context, action Action, f InstanceFilter) (int64, error) {
	if err := checkBulkFilter(action, f); err != nil {
		return 0, err
	}
	n, err := e.q.InstanceCount(ctx, queries.InstanceCountParams{ProcessKey: strPtr(f.ProcessKey), Version: versionPtr(f.Version), Status: strPtr(f.Status),
		StatusIn: action.bulkStatuses(f), WaitingOnly: action.BringsForward(f), BusinessKey: strPtr(f.BusinessKey), ErrorCode: strPtr(f.ErrorCode), HeldAt: strPtr(f.HeldAt), RetryingAt: strPtr(f.RetryingAt), Now: e.at(), CreatedFrom: idFrom(f.CreatedAfter), CreatedTo: idTo(f.CreatedBefore), CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, MatchedBefore: f.MatchedBefore,
		RetryableOnly: action == ActionRetry && !action.BringsForward(f)})
	return n, wrap("count instances", err)
}

// BulkGroup is one process and error code among the instances a bulk
// action's filter matches.
type BulkGroup struct {
	ProcessKey string
	ErrorCode  *string // nil: no error code (running instances, for a stop)
	Count      int64
}

// Breakdown is what a bulk action would change among the instances a
// filter matches: how many, and by process and error code, the largest
// groups first.
type Breakdown struct {
	Count  int64
	Groups []BulkGroup // at most the number asked for
	// Truncated says that more groups match than Groups lists.
	Truncated bool
	// MayHaveActed counts the instances held at a push call that ended
	// outcome_unknown or deadline_exceeded, over every group (of the
	// first allGroups): calls that may have been carried out, which a
	// retry makes again.
	MayHaveActed int64
	// Calling counts, for a stop, the running instances whose push call
	// is in flight, over every group: a stop aborts the call, but the
	// destination may already have acted on it.
	Calling int64
}

// allGroups bounds the groups BreakdownForAction reads to sum its count
// from; past it (error codes that hold ids, say) the count is read on its
// own.
const allGroups = 10_000

// BreakdownForAction counts the instances action would change among those
// f matches, as CountForAction does, and lists at most shown groups of
// them. The count is the groups' sum, read in the same statement: the two
// cannot disagree.
func (e *Engine) BreakdownForAction(ctx context.Context, action Action, f InstanceFilter, shown int) (Breakdown, error) {
	if err := checkBulkFilter(action, f); err != nil {
		return Breakdown{}, err
	}
	rows, err := e.q.InstanceBreakdownForAction(ctx, queries.InstanceBreakdownForActionParams{ProcessKey: strPtr(f.ProcessKey), Version: versionPtr(f.Version), Status: strPtr(f.Status),
		StatusIn: action.bulkStatuses(f), WaitingOnly: action.BringsForward(f), BusinessKey: strPtr(f.BusinessKey), ErrorCode: strPtr(f.ErrorCode), HeldAt: strPtr(f.HeldAt), RetryingAt: strPtr(f.RetryingAt), Now: e.at(), CreatedFrom: idFrom(f.CreatedAfter), CreatedTo: idTo(f.CreatedBefore), CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, MatchedBefore: f.MatchedBefore,
		RetryableOnly: action == ActionRetry && !action.BringsForward(f), WithCalls: action == ActionStop,
		WaitingCodes: action.OverWaitingRetries(f), Max: allGroups + 1})
	if err != nil {
		return Breakdown{}, wrap("break instances down", err)
	}
	var b Breakdown
	for i, r := range rows {
		b.Count += r.Count
		b.MayHaveActed += r.MayHaveActed
		b.Calling += r.Calling
		if i < shown {
			b.Groups = append(b.Groups, BulkGroup{ProcessKey: r.ProcessKey, ErrorCode: r.ErrorCode, Count: r.Count})
		}
	}
	b.Truncated = len(rows) > shown
	if len(rows) > allGroups {
		if b.Count, err = e.CountForAction(ctx, action, f); err != nil {
			return Breakdown{}, err
		}
	}
	return b, nil
}

// failureEnds says why a failed instance cannot be retried, to an operator
// who tries (one instance, or a filter's).
const failureEnds = "a failure ends its instance unless the node's on_error leads to hold (an incident waiting for an operator)"

func checkBulkFilter(action Action, f InstanceFilter) error {
	if f.RetryingAt != "" && (action == ActionAbandon || f.Status != "" && f.Status != InstanceRunning) {
		// Nothing would match, which would read as nothing waiting.
		other := "abandon applies to held ones"
		if action != ActionAbandon {
			other = "the filter's status is " + f.Status
		}
		return fault.New(fault.BadRequest, "invalid_request", "retrying_at keeps running instances whose retry waits, and %s: nothing would match", other).
			WithErrors([]fault.FieldError{{Path: "/filter/retrying_at", Message: "keeps running instances: leave it out, or give it with retry (their retries brought forward) or stop, and status running or none"}})
	}
	if action.OverWaitingRetries(f) {
		// Review: a script narrowed a bring-forward to the code its
		// breakdown showed.
		if errs := RunningFilterErrors(f, "/filter/"); len(errs) > 0 {
			return fault.New(fault.BadRequest, "invalid_request", "this filter keeps running instances, which have no error code and are held nowhere: nothing would match").WithErrors(errs)
		}
	}
	if f.Status == "" {
		return nil
	}
	statuses := action.appliesTo()
	if action == ActionRetry {
		statuses = []string{InstanceHeld, InstanceRunning}
	}
	for _, s := range statuses {
		if s == f.Status {
			return nil
		}
	}
	why := ""
	if f.Status == InstanceFailed && action != ActionStop {
		// As a single retry of one says.
		why = ": " + failureEnds + "; start failed instances again to redo their work"
	}
	return fault.New(fault.BadRequest, "invalid_request", "%s applies to %s instances, not %s%s", action, strings.Join(statuses, " or "), f.Status, why).
		WithErrors([]fault.FieldError{{Path: "/filter/status", Message: "must be " + strings.Join(statuses, " or ")}})
}

// RunningFilterErrors refuses, each at its parameter (prefix then its
// name), an error code or held_at in a filter that keeps running
// instances only: they have neither, so either would match nothing, which
// reads as none failing. The instances list and the bulk actions refuse
// them alike.
func RunningFilterErrors(f InstanceFilter, prefix string) []fault.FieldError {
	var errs []fault.FieldError
	if f.ErrorCode != "" {
		errs = append(errs, fault.FieldError{Path: prefix + "error_code", Message: "matches the code a held or failed instance stopped with, and running instances have none: leave it out (a retry brought forward is broken down by the code its occurrence failed with; GET /occurrences?waiting_retry=true&error_code= lists the failures that wait for their retry)"})
	}
	if f.HeldAt != "" {
		errs = append(errs, fault.FieldError{Path: prefix + "held_at", Message: "keeps held instances, and this filter keeps running ones: leave it out (retrying_at names the definition a retry waits at)"})
	}
	return errs
}

// ActOnFilter applies action to every instance f matches, once the
// operator confirmed the count: if the filter now matches another number
// (confirm differs from CountForAction), nothing is applied and the
// refusal (409 count_changed) carries the current count. The instances are
// those the filter matched when the count was checked, no others: an
// instance that comes to match while the action runs is left alone, and
// Applied plus Skipped is the count confirmed. It works in batches of
// bulkBatch, each one transaction; every instance is re-checked under its
// lock, and one that changed meanwhile is skipped. Once started it runs to
// its end, whether or not its caller waits (a client that gave up on a
// long action finds its records in the audit log under the bulk id; a
// process that exits ends it between two batches, each whole). Repeating
// it is harmless: what was applied no longer matches. id names the action
// in the audit log; uuid.Nil draws a new one. A caller that points at the
// records before the action ends (the console's confirmation links to
// them, for an operator whose page gave up waiting) chooses it; an id
// another bulk action has is refused (409 bulk_exists), before the count
// is checked, so that a client resending a request whose answer it lost
// is told the action ran rather than that the count changed.
func (e *Engine) ActOnFilter(ctx context.Context, actor Actor, action Action, f InstanceFilter, reason string, confirm int64, id uuid.UUID) (BulkResult, error) {
	if err := checkReason(reason); err != nil {
		return BulkResult{}, err
	}
	if confirm < 0 {
		// No filter matches a negative count: answering count_changed
		// would blame the data for a malformed request.
		return BulkResult{}, fault.New(fault.BadRequest, "invalid_request", "the confirmed count must be 0 or more").
			WithErrors([]fault.FieldError{{Path: "/confirm_count", Message: "must be the count confirmed: 0 or more"}})
	}
	if err := checkBulkFilter(action, f); err != nil {
		return BulkResult{}, err
	}
	if confirm > maxBulk {
		fe := fault.New(fault.BadRequest, "bound_exceeded", "a bulk action applies to at most %d instances: narrow the filter (created_before, say) and act in parts", maxBulk)
		fe.Extra = map[string]any{"field": "confirm_count", "ceiling": maxBulk}
		return BulkResult{}, fe
	}
	if id != uuid.Nil {
		if _, err := e.q.BulkActionGet(ctx, id); err == nil {
			return BulkResult{}, bulkExists(id)
		} else if !isNoRows(err) {
			return BulkResult{}, wrap("bulk "+string(action), err)
		}
	}
	// Every matching id at once (16 bytes each), one more than confirmed
	// to see a count that grew: the walk then works on this set alone.
	ids, err := e.q.InstanceIDsForAction(ctx, queries.InstanceIDsForActionParams{ProcessKey: strPtr(f.ProcessKey), Version: versionPtr(f.Version), Status: strPtr(f.Status),
		StatusIn: action.bulkStatuses(f), WaitingOnly: action.BringsForward(f), BusinessKey: strPtr(f.BusinessKey), ErrorCode: strPtr(f.ErrorCode), HeldAt: strPtr(f.HeldAt), RetryingAt: strPtr(f.RetryingAt), Now: e.at(), CreatedFrom: idFrom(f.CreatedAfter), CreatedTo: idTo(f.CreatedBefore), CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, MatchedBefore: f.MatchedBefore,
		RetryableOnly: action == ActionRetry && !action.BringsForward(f), Max: int32(min(confirm, maxBulk) + 1)})
	if err != nil {
		return BulkResult{}, wrap("bulk "+string(action), err)
	}
	if int64(len(ids)) != confirm {
		count := int64(len(ids))
		if count > confirm {
			if count, err = e.CountForAction(ctx, action, f); err != nil {
				return BulkResult{}, err
			}
		}
		then := "confirm the new count"
		if count < confirm && action.BringsForward(f) && f.MatchedBefore != nil {
			// With matched_before, a bring-forward's count only shrinks:
			// retries came due meanwhile, with nothing left to bring
			// forward (the console confirms the new count itself).
			then += " (retries that came due meanwhile need nothing: those left waited when you counted)"
		}
		if count > confirm && f.MatchedBefore == nil {
			// An incident under way: each new instance would change the
			// next count too.
			then += " (if instances keep coming to match, give the count and its confirmation the same filter.matched_before: those coming to match since are left for the next action)"
		}
		fe := fault.New(fault.Conflict, "count_changed", "the filter matches %d instances now, not the %d confirmed: %s", count, confirm, then)
		fe.Extra = map[string]any{"count": count}
		return BulkResult{}, fe
	}
	if id == uuid.Nil {
		id = uuid.Must(uuid.NewV7())
	}
	res := BulkResult{ID: id, Matched: confirm}
	reason = strings.TrimSpace(reason)
	// From its record on, the action runs to its end whatever the client
	// does: a record left without batches would read as a replica that
	// stopped.
	ctx = context.WithoutCancel(ctx)
	n, err := e.q.BulkActionInsert(ctx, queries.BulkActionInsertParams{ID: id, Action: string(action), Reason: reason,
		ActorID: actor.tokenID(), ActorName: actor.Name, Filter: bulkFilterRecord(f), Matched: confirm, Now: e.at()})
	if err != nil {
		return BulkResult{}, wrap("bulk "+string(action), err)
	}
	if n == 0 {
		// Another request with this id got there first.
		return BulkResult{}, bulkExists(id)
	}
	for batch := range slices.Chunk(ids, bulkBatch) {
		select {
		case <-e.bulkStop:
			// The replica stops: the record says how far it got while
			// the database still answers, rather than read "running"
			// for good, and the operator is told to act again.
			e.endBulk(id, true)
			err := fault.New(fault.Unavailable, "replica_stopping",
				"this replica is stopping: bulk action %s stopped after %d of %d instances (%d applied, %d skipped); act on the same filter again to finish it (what was applied is not applied again)",
				id, res.Applied+res.Skipped, res.Matched, res.Applied, res.Skipped)
			e.logBulk(actor, action, f, res, err)
			return res, err
		default:
		}
		// Instances locked in id order, as settlements lock them: in the
		// list's order (newest first) a batch and a settlement of two of
		// its instances each held one the other wanted.
		batch = slices.Clone(batch)
		slices.SortFunc(batch, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		var applied, skipped int64
		err = e.bulkTx(ctx, func(q *queries.Queries, tx pgx.Tx) error {
			applied, skipped = 0, 0
			for _, instance := range batch {
				var ok bool
				err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
					var err error
					ok, err = e.actIn(ctx, q.WithTx(sp), actor, action, instance, reason, &res.ID, f, nil, "")
					return err
				})
				switch _, refused := fault.As(err); {
				case err != nil && !refused:
					return err
				case ok:
					applied++
				default:
					skipped++
				}
			}
			// The record's counts commit with what they count.
			return q.BulkActionProgress(ctx, queries.BulkActionProgressParams{ID: id, Applied: applied, Skipped: skipped, Now: e.at()})
		})
		if err != nil {
			e.endBulk(id, true)
			e.logBulk(actor, action, f, res, err)
			return res, wrap("bulk "+string(action), err)
		}
		res.Applied += applied
		res.Skipped += skipped
	}
	e.endBulk(id, false)
	e.logBulk(actor, action, f, res, nil)
	return res, nil
}

// BulkCountedAt is the moment a bulk action's count is read, to pin it to
// (InstanceFilter.PinMatched): the database's clock, which wrote the times
// the pin is compared with, or the engine's injected one in tests.
func (e *Engine) BulkCountedAt(ctx context.Context) time.Time {
	if e.now != nil {
		return e.Now()
	}
	at, err := e.q.BulkCountedAt(ctx)
	if err != nil {
		// The count that follows fails the same way, in words of its own.
		return e.Now()
	}
	return at.UTC()
}

// bulkTx runs one batch of a bulk action, again when PostgreSQL ended it
// as a deadlock's victim: a group commit's transaction locks the
// instances of its writes in their order, not the batch's, and a batch
// rolled back whole is run again whole.
func (e *Engine) bulkTx(ctx context.Context, fn func(q *queries.Queries, tx pgx.Tx) error) error {
	for try := 1; ; try++ {
		err := e.tx(ctx, fn)
		var pgErr *pgconn.PgError
		if try == bulkTries || !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			return err
		}
		e.logger.Info("a bulk action's batch was a deadlock's victim; running it again", "try", try)
		time.Sleep(time.Duration(try) * 50 * time.Millisecond)
	}
}

// bulkTries bounds the runs of one batch of a bulk action.
const bulkTries = 5

// StopBulkActions makes the bulk actions under way stop before their next
// batch, their records ended (the replica stops: what they did is
// recorded while the database still answers).
func (e *Engine) StopBulkActions() { e.stopBulk.Do(func() { close(e.bulkStop) }) }

// bulkExists refuses a bulk_id another bulk action has.
func bulkExists(id uuid.UUID) error {
	return fault.New(fault.Conflict, "bulk_exists", "bulk action %s exists (it ran, or runs): GET /api/v1/audit/bulk/%s says how far it got; leave bulk_id out for a new one", id, id)
}

// endBulk records that a bulk action ended, stopped by an error or not.
// Its failure is logged, not returned: the batches are applied whatever
// the record says, and a record left without an end reads as a replica
// that stopped, which the reader is told to act on the filter again for.
func (e *Engine) endBulk(id uuid.UUID, stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.q.BulkActionEnd(ctx, queries.BulkActionEndParams{ID: id, Stopped: stopped, Now: e.at()}); err != nil {
		e.logger.Error("bulk operator action's end not recorded", "bulk", id, "err", err)
	}
}

// bulkFilterFields are the fields of a bulk filter that filter, in the
// API's names, as its record keeps them and its log line names them: the
// business key said to be given, never its value (a customer's
// identifier, which would outlive its instances' retention in the record).
func bulkFilterFields(f InstanceFilter) [][2]any {
	var out [][2]any
	for _, kv := range [][2]string{{"process", f.ProcessKey}, {"status", f.Status}, {"error_code", f.ErrorCode}, {"held_at", f.HeldAt}, {"retrying_at", f.RetryingAt}} {
		if kv[1] != "" {
			out = append(out, [2]any{kv[0], kv[1]})
		}
	}
	if f.Version > 0 {
		out = append(out, [2]any{"version", f.Version})
	}
	if f.BusinessKey != "" {
		out = append(out, [2]any{"business_key_given", true})
	}
	if f.CreatedAfter != nil {
		out = append(out, [2]any{"created_after", f.CreatedAfter.UTC().Format(time.RFC3339Nano)})
	}
	if f.CreatedBefore != nil {
		out = append(out, [2]any{"created_before", f.CreatedBefore.UTC().Format(time.RFC3339Nano)})
	}
	if f.MatchedBefore != nil {
		out = append(out, [2]any{"matched_before", f.MatchedBefore.UTC().Format(time.RFC3339Nano)})
	}
	return out
}

// bulkFilterRecord is the filter a bulk action's record keeps.
func bulkFilterRecord(f InstanceFilter) json.RawMessage {
	m := map[string]any{}
	for _, kv := range bulkFilterFields(f) {
		m[kv[0].(string)] = kv[1]
	}
	raw, _ := json.Marshal(m)
	return raw
}

// logBulk logs a bulk action once it ran, with the filter it applied: the
// audit log has a record per instance under the bulk id, but not the
// filter that chose them.
func (e *Engine) logBulk(actor Actor, action Action, f InstanceFilter, res BulkResult, err error) {
	if res.Applied > 0 {
		e.expireCounts()
	}
	attrs := []any{"action", action, "bulk", res.ID, "matched", res.Matched, "applied", res.Applied, "skipped", res.Skipped, "by", actor.Name}
	for _, kv := range bulkFilterFields(f) {
		attrs = append(attrs, "filter_"+kv[0].(string), kv[1])
	}
	if err != nil {
		// Each batch is whole: what ran before the failure stays applied.
		e.logger.Error("bulk operator action stopped by an error", append(attrs, "err", err)...)
		return
	}
	e.logger.Info("bulk operator action", attrs...)
}

// OperatorAction is one record of the operator audit log.
type OperatorAction struct {
	ID        int64
	At        time.Time
	ActorName string
	// ActorTokenID and ActorRole say which token acted: token names are
	// not unique. Both are unset for an action no token made.
	ActorTokenID *int64
	ActorRole    string
	Action       string
	Reason       string
	InstanceID   uuid.UUID
	OccurrenceID *uuid.UUID
	BulkID       *uuid.UUID
	// BroughtForward marks a retry of a running instance: it offered a
	// waiting retry now, its attempts left unchanged (a held instance's
	// retry gives a fresh budget).
	BroughtForward bool
	// InstanceDeleted is set once retention deleted the instance (and its
	// occurrences), or it was erased: the record stays, its target can no
	// longer be shown.
	InstanceDeleted bool
}

// AuditFilter selects audit records; zero fields do not filter.
type AuditFilter struct {
	Instance *uuid.UUID
	Action   string
	Bulk     *uuid.UUID // the records of one bulk action
	Actor    string     // the records of one actor, by the name of its token
	// BusinessKey: the records of the instances with that business key
	// (exact) that still exist.
	BusinessKey string
	// ActedAfter and ActedBefore bound when the actions were recorded:
	// [after, before).
	ActedAfter, ActedBefore *time.Time
	Before                  int64 // keyset cursor: ids below it (newest first)
	Limit                   int
}

// ListOperatorActions returns the operator audit log, newest first.
func (e *Engine) ListOperatorActions(ctx context.Context, f AuditFilter) ([]OperatorAction, error) {
	p := queries.OperatorActionListParams{InstanceID: f.Instance, Action: strPtr(f.Action), BulkID: f.Bulk, Actor: strPtr(f.Actor), BusinessKey: strPtr(f.BusinessKey),
		ActedAfter: f.ActedAfter, ActedBefore: f.ActedBefore, Max: int32(f.Limit)}
	if f.Before > 0 {
		p.Before = &f.Before
	}
	rows, err := e.q.OperatorActionList(ctx, p)
	if err != nil {
		return nil, wrap("list operator actions", err)
	}
	out := make([]OperatorAction, len(rows))
	for i, r := range rows {
		out[i] = OperatorAction{ID: r.ID, At: r.At, ActorName: r.ActorName, ActorTokenID: r.ActorID, ActorRole: deref(r.ActorRole),
			Action: r.Action, Reason: r.Reason, InstanceID: r.InstanceID, OccurrenceID: r.OccurrenceID, BulkID: r.BulkID,
			InstanceDeleted: !r.InstanceExists, BroughtForward: r.BroughtForward}
	}
	return out, nil
}

// CountBulkRecords is how many instances the bulk action id changed so
// far (its audit records): an operator follows a long one by it.
func (e *Engine) CountBulkRecords(ctx context.Context, id uuid.UUID) (int64, error) {
	n, err := e.q.OperatorActionCountBulk(ctx, &id)
	return n, wrap("count bulk records", err)
}

// BulkRecord is a bulk operator action as recorded: what was asked, and
// how far it got.
type BulkRecord struct {
	ID                    uuid.UUID
	Action, Reason        string
	ActorName, ActorRole  string
	ActorTokenID          *int64
	Filter                json.RawMessage // as bulkFilterRecord writes it
	Matched               int64
	Applied, Skipped      int64
	StartedAt, Progressed time.Time
	EndedAt               *time.Time // nil while it runs, or if its replica stopped
	Stopped               bool       // an error stopped it between two batches
}

// BulkAction returns the record of bulk action id (404 without one:
// actions from before the record existed have their per-instance records
// alone).
func (e *Engine) BulkAction(ctx context.Context, id uuid.UUID) (BulkRecord, error) {
	r, err := e.q.BulkActionGet(ctx, id)
	if isNoRows(err) {
		return BulkRecord{}, notFound("bulk action %s", id)
	}
	if err != nil {
		return BulkRecord{}, wrap("bulk action", err)
	}
	b := r.BulkAction
	return BulkRecord{ID: b.ID, Action: b.Action, Reason: b.Reason, ActorName: b.ActorName, ActorRole: deref(r.ActorRole), ActorTokenID: b.ActorID,
		Filter: b.Filter, Matched: b.Matched, Applied: b.Applied, Skipped: b.Skipped, StartedAt: b.StartedAt, Progressed: b.ProgressedAt,
		EndedAt: b.EndedAt, Stopped: b.Stopped}, nil
}

// Status is running, completed or stopped (by an error between two
// batches). A record running whose Progressed is long past was left by a
// replica that stopped: what it applied stays, the rest was not done.
func (b BulkRecord) Status() string {
	switch {
	case b.EndedAt == nil:
		return "running"
	case b.Stopped:
		return "stopped"
	}
	return "completed"
}
