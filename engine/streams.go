package engine

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/queries"
)

// Reasons a held occurrence is taken from its worker, as pushed to worker
// streams (DESIGN §10) and carried by ChannelCancel.
const (
	CancelInstanceStopped  = "instance_stopped"
	CancelDeadlineExceeded = "deadline_exceeded"
	CancelLockLost         = "lock_lost"
)

// CancelPayload formats a ChannelCancel payload: "id|reason".
func CancelPayload(id uuid.UUID, reason string) string { return id.String() + "|" + reason }

// ParseCancelPayload reads a ChannelCancel payload. A bare id (the form
// before reasons were added) is a stop.
func ParseCancelPayload(p string) (uuid.UUID, string, bool) {
	idText, reason, found := strings.Cut(p, "|")
	id, err := uuid.Parse(idText)
	if err != nil {
		return uuid.UUID{}, "", false
	}
	if !found {
		reason = CancelInstanceStopped
	}
	return id, reason, true
}

// Held is an occurrence a worker stream holds, at the attempt it was
// assigned: every statement on held work names the attempt, so a stream
// never acts on a later reservation of the same occurrence.
type Held struct {
	Occurrence uuid.UUID
	Attempt    int
}

func heldColumns(held []Held) ([]uuid.UUID, []int32) {
	ids, attempts := make([]uuid.UUID, len(held)), make([]int32, len(held))
	for i, h := range held {
		ids[i], attempts[i] = h.Occurrence, int32(h.Attempt)
	}
	return ids, attempts
}

// HeldState is what KeepAlive found of one held occurrence.
type HeldState struct {
	Held
	// Kept: the lock was extended; the stream still holds it.
	Kept bool
	// Gone says why an occurrence no longer held left: "" when the worker
	// settled it itself (completed, failed, deferred, released), else one
	// of the Cancel* reasons.
	Gone string
	// Definition and Revision are the occurrence's.
	Definition string
	Revision   int
	// Current is the attempt the occurrence is at when the worker holds
	// it (0 otherwise): a resume naming a later attempt is a client's bug,
	// refused rather than left to lapse (stream-client QA).
	Current int
}

// KeepAlive extends, in one statement, the locks a worker stream holds by
// d from now, and says of each occurrence whether it is still held and, if
// not, why it left. A lapsed lock is not revived: another worker may
// already be claiming it.
func (e *Engine) KeepAlive(ctx context.Context, consumerID int64, workerID string, held []Held, d time.Duration) ([]HeldState, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids, attempts := heldColumns(held)
	rows, err := e.q.OccurrenceKeepAlive(ctx, queries.OccurrenceKeepAliveParams{Ids: ids, Attempts: attempts,
		ConsumerID: &consumerID, WorkerID: &workerID, Now: e.at(), LockDuration: d})
	if err != nil {
		return nil, wrap("keep alive", err)
	}
	out := make([]HeldState, len(rows))
	var unsure []Held
	for i, r := range rows {
		s := HeldState{Held: Held{Occurrence: r.ID, Attempt: int(r.Attempt)}, Kept: r.Kept, Definition: r.DefinitionKey, Revision: int(r.Revision),
			Current: int(r.CurrentAttempt)}
		if !r.Kept {
			s.Gone = goneReason(r.Status, deref(r.ErrorCode), deref(r.Outcome))
			if r.Status == StatusReserved && r.Outcome == nil {
				unsure = append(unsure, s.Held)
			}
		}
		out[i] = s
	}
	if len(unsure) == 0 {
		return out, nil
	}
	// Not kept, yet reserved and open as the statement first saw it: the
	// lock lapsed or passed to another worker, or the worker settled it
	// while the statement waited for its lock (on another replica, say),
	// which the statement's snapshot predates. Read afresh, a settlement
	// is not reported as a lost lock.
	ids, attempts = heldColumns(unsure)
	fresh, err := e.q.OccurrenceHeldStates(ctx, queries.OccurrenceHeldStatesParams{Ids: ids, Attempts: attempts})
	if err != nil {
		return nil, wrap("keep alive", err)
	}
	for _, f := range fresh {
		for i := range out {
			if out[i].Occurrence == f.ID && out[i].Attempt == int(f.Attempt) {
				out[i].Gone = goneReason(f.Status, deref(f.ErrorCode), deref(f.Outcome))
			}
		}
	}
	return out, nil
}

// goneReason tells why a held occurrence is no longer held, from its status
// and the outcome of the attempt the stream held.
func goneReason(status, errorCode, outcome string) string {
	switch {
	case status == StatusDeferred:
		return ""
	case outcome == OutcomeCompleted || outcome == OutcomeFailed || outcome == OutcomeReleased:
		return ""
	case outcome == OutcomeCancelled || status == StatusCancelled:
		return CancelInstanceStopped
	case status == StatusFailed && errorCode == "deadline_exceeded" && outcome == OutcomeExpired:
		return CancelDeadlineExceeded
	default:
		return CancelLockLost
	}
}

// HandBack ends a worker stream's unsettled assignments and makes them
// claimable at once, waking whoever waits for them (any replica). A stream
// that ended (its client left) hands them back disconnected: the attempt
// counts. A replica shutting down releases them: the attempt is given back,
// since the worker did nothing wrong. It returns what it handed back: work
// the worker settled meanwhile, or that is no longer its own, is left alone.
func (e *Engine) HandBack(ctx context.Context, consumerID int64, workerID string, held []Held, release bool) ([]Held, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids, attempts := heldColumns(held)
	var out []Held
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		type handed struct {
			id        uuid.UUID
			attempt   int32
			mode, key string
			revision  int32
			at        time.Time // the database's now: claimable from then
		}
		var rows []handed
		if release {
			rs, err := q.OccurrenceReleaseHeld(ctx, queries.OccurrenceReleaseHeldParams{Ids: ids, Attempts: attempts,
				ConsumerID: &consumerID, WorkerID: &workerID, Now: e.at()})
			if err != nil {
				return err
			}
			for _, r := range rs {
				rows = append(rows, handed{id: r.ID, attempt: r.Attempts, mode: r.Mode, key: r.DefinitionKey, revision: r.Revision, at: r.At})
			}
		} else {
			rs, err := q.OccurrenceDisconnect(ctx, queries.OccurrenceDisconnectParams{Ids: ids, Attempts: attempts,
				ConsumerID: &consumerID, WorkerID: &workerID, Now: e.at()})
			if err != nil {
				return err
			}
			for _, r := range rs {
				rows = append(rows, handed{id: r.ID, attempt: r.Attempts, mode: r.Mode, key: r.DefinitionKey, revision: r.Revision, at: r.At})
			}
		}
		var announced []string
		for _, r := range rows {
			out = append(out, Held{Occurrence: r.id, Attempt: int(r.attempt)})
			payload := AvailabilityPayload(r.mode, r.key, int(r.revision), r.at)
			pair := r.key + "@" + strconv.Itoa(int(r.revision))
			if slices.Contains(announced, pair) {
				continue
			}
			announced = append(announced, pair)
			if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelOccurrence, Payload: payload}); err != nil {
				return err
			}
		}
		return nil
	})
	return out, wrap("hand back", err)
}

// ReleaseUnseen hands back reservations no worker received (what a fetch
// claimed for a client that left, assignments a stream could not deliver):
// released, the attempt given back; it returns how many it handed back
// (one settled or lapsed meanwhile is not). It runs to its end, within
// releaseUnseenTimeout, even when ctx is cancelled: left alone they would
// stay locked to nobody until their locks lapse.
func (e *Engine) ReleaseUnseen(ctx context.Context, consumerID int64, workerID string, unseen []Reservation) (int, error) {
	if len(unseen) == 0 {
		return 0, nil
	}
	held := make([]Held, len(unseen))
	for i, g := range unseen {
		held[i] = Held{Occurrence: g.ID, Attempt: g.Attempt}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseUnseenTimeout)
	defer cancel()
	handed, err := e.HandBack(ctx, consumerID, workerID, held, true)
	return len(handed), err
}

// releaseUnseenTimeout bounds ReleaseUnseen.
const releaseUnseenTimeout = 10 * time.Second

// ChannelWorker carries signals to the replica holding a worker stream
// (WorkerSignal): a unary call may reach another replica than its stream.
const ChannelWorker = "relais_worker"

// Kinds of WorkerSignal.
const (
	// SignalTakeover: a stream of (ConsumerID, WorkerID) connected as
	// Stream; any other stream of that worker ends.
	SignalTakeover = "takeover"
	// SignalSettled: the worker settled Attempt of Occurrence; the stream
	// holding it frees its credit.
	SignalSettled = "settled"
	// SignalAck: the client of Stream read its heartbeat Sequence.
	SignalAck = "ack"
	// SignalDrain: Stream sends no more assignments.
	SignalDrain = "drain"
)

// WorkerSignal is a message to whichever replica holds a worker stream.
// Signals are hints for liveness and credit; the database decides who
// holds what.
type WorkerSignal struct {
	Kind       string
	Stream     uuid.UUID
	ConsumerID int64
	WorkerID   string
	Occurrence uuid.UUID
	Attempt    int
	Sequence   int64
}

// payload is "kind|stream|consumer|occurrence|attempt|sequence|worker_id":
// the worker id, free text, comes last.
func (s WorkerSignal) payload() string {
	return strings.Join([]string{s.Kind, s.Stream.String(), strconv.FormatInt(s.ConsumerID, 10), s.Occurrence.String(),
		strconv.Itoa(s.Attempt), strconv.FormatInt(s.Sequence, 10), s.WorkerID}, "|")
}

// ParseWorkerSignal reads a ChannelWorker payload.
func ParseWorkerSignal(p string) (WorkerSignal, bool) {
	parts := strings.SplitN(p, "|", 7)
	if len(parts) != 7 {
		return WorkerSignal{}, false
	}
	stream, err1 := uuid.Parse(parts[1])
	consumer, err2 := strconv.ParseInt(parts[2], 10, 64)
	occurrence, err3 := uuid.Parse(parts[3])
	attempt, err4 := strconv.Atoi(parts[4])
	seq, err5 := strconv.ParseInt(parts[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
		return WorkerSignal{}, false
	}
	return WorkerSignal{Kind: parts[0], Stream: stream, ConsumerID: consumer, Occurrence: occurrence, Attempt: attempt,
		Sequence: seq, WorkerID: parts[6]}, true
}

// SignalWorkers sends s to every replica (NOTIFY on ChannelWorker).
func (e *Engine) SignalWorkers(ctx context.Context, s WorkerSignal) error {
	return wrap("signal workers", e.q.Notify(ctx, queries.NotifyParams{Channel: ChannelWorker, Payload: s.payload()}))
}
