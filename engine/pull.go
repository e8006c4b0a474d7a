package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/queries"
)

// ClaimRequest claims available occurrences for one worker.
type ClaimRequest struct {
	ConsumerID   int64
	WorkerID     string
	Pairs        Pairs
	MaxTasks     int
	LockDuration time.Duration
	RequestID    string
	// TagOnly makes RequestID a tag of the rows the claim reserves, no
	// earlier claim looked for (one round trip fewer): a worker stream's
	// claims are tagged so that one whose COMMIT answer was lost can be
	// asked again with the same RequestID, TagOnly unset, which replays
	// what it reserved if it committed.
	TagOnly bool
	// Recover marks such a stream's asking again: what the replay cannot
	// deliver here (a data key this replica lacks) is handed back, no
	// attempt spent, since a stream cannot move to a replica that has the
	// key as a fetch replayed elsewhere can.
	Recover bool
	// RequestDigest identifies the request RequestID names as its client
	// sent it (subscriptions, fields, max_tasks, lock): a replay must carry
	// the same, else it is refused (request_id_reused). Nil: not checked.
	RequestDigest []byte
}

// Reservation is an occurrence delivered to a worker, with its inputs in
// clear (secrets included: the consumer is authorized) and compact, the
// same bytes whichever protocol carries them.
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
	CreatedAt     time.Time
	// ProcessKey and BusinessKey are those of the occurrence's instance
	// (nil for an occurrence made before they were recorded, or without a
	// business key).
	ProcessKey  *string
	BusinessKey *string
	// ErrorMessage is the message of the latest failure reported for the
	// occurrence (scrubbed), nil before any.
	ErrorMessage *string
	// Replayed marks a reservation an earlier claim with the same
	// request_id made, answered again: not a claim of its own (metrics
	// count it once).
	Replayed bool
}

// Claim reserves up to MaxTasks claimable occurrences in one statement. A
// RequestID already used by this worker returns the reservations it made
// that it still holds (lock not expired) instead of claiming more.
func (e *Engine) Claim(ctx context.Context, req ClaimRequest) ([]Reservation, error) {
	if len(req.Pairs.Keys) == 0 {
		return nil, nil
	}
	// Before the replay too: what a withdrawn grant stops is delivered
	// again by no path.
	pairs, err := e.stillGranted(ctx, req.ConsumerID, req.Pairs)
	if err != nil {
		return nil, err
	}
	req.Pairs = pairs
	if req.RequestID != "" && !req.TagOnly {
		return e.claimRequest(ctx, req)
	}
	if req.MaxTasks <= 0 {
		return nil, nil
	}
	// Under load, the claim shares the commit of the writes arriving with
	// it (see groupCommit); alone it is its statement.
	var rows []queries.OccurrenceClaimPullRow
	err = e.group.statement(ctx, func(ctx context.Context, q *queries.Queries) error {
		var err error
		rows, err = q.OccurrenceClaimPull(ctx, e.claimParams(req))
		return err
	})
	if err != nil {
		return nil, wrap("claim", err)
	}
	return e.deliver(ctx, req, claimedOccurrences(rows), false)
}

// claimRequest is Claim for a request_id a worker chose: the reservations
// it made that the worker still holds (lock not expired) are answered
// again, else it claims. The lookup and the claim are one transaction
// that holds the request_id's lock (API QA: fetches sent together with one
// request_id each found nothing to replay and claimed, and the replay
// then answered all they claimed, past max_tasks).
func (e *Engine) claimRequest(ctx context.Context, req ClaimRequest) ([]Reservation, error) {
	var replay, withdrawn []queries.Occurrence
	var rows []queries.OccurrenceClaimPullRow
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		if err := q.ClaimRequestLock(ctx, queries.ClaimRequestLockParams{ConsumerID: req.ConsumerID, WorkerID: req.WorkerID, RequestID: req.RequestID}); err != nil {
			return err
		}
		// Only reservations still held are replayed: a lapsed lock is no
		// longer the worker's, and with none left the request claims anew.
		prior, err := q.OccurrenceReplayRequest(ctx, queries.OccurrenceReplayRequestParams{ConsumerID: &req.ConsumerID, WorkerID: &req.WorkerID, RequestID: &req.RequestID, Now: e.at()})
		if err != nil {
			return err
		}
		for _, p := range prior {
			if p.RequestDigest != nil && req.RequestDigest != nil && !bytes.Equal(p.RequestDigest, req.RequestDigest) {
				return fault.New(fault.Unprocessable, "request_id_reused",
					"request_id %q was used by a fetch with another body (subscriptions, fields, max_tasks or lock_duration): repeat that fetch's body to replay it, or use a new request_id", req.RequestID)
			}
			if !req.Pairs.Matches(p.Occurrence.DefinitionKey, int(p.Occurrence.Revision)) {
				// Its grant was withdrawn since the claim: never
				// delivered, handed back.
				withdrawn = append(withdrawn, p.Occurrence)
				continue
			}
			replay = append(replay, p.Occurrence)
		}
		if len(replay) > 0 || req.MaxTasks <= 0 {
			// A replay; or only the replay was asked for (a stream
			// recovering a lost refill, whose slots are taken).
			return nil
		}
		rows, err = q.OccurrenceClaimPull(ctx, e.claimParams(req))
		return err
	})
	if err != nil {
		return nil, wrap("claim", err)
	}
	if len(withdrawn) > 0 {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
		e.handBackClaim(hctx, req.ConsumerID, req.WorkerID, withdrawn)
		cancel()
	}
	if len(replay) > 0 {
		got, err := e.deliver(ctx, req, replay, !req.Recover)
		for i := range got {
			got[i].Replayed = true
		}
		return got, err
	}
	return e.deliver(ctx, req, claimedOccurrences(rows), false)
}

// claimParams are the claim statement's parameters for req.
func (e *Engine) claimParams(req ClaimRequest) queries.OccurrenceClaimPullParams {
	var rid *string
	if req.RequestID != "" {
		rid = &req.RequestID
	}
	return queries.OccurrenceClaimPullParams{
		DefinitionKeys: req.Pairs.Keys, Revisions: req.Pairs.Revisions, Turn: e.turn(), Now: e.at(), MaxTasks: int32(req.MaxTasks),
		ConsumerID: &req.ConsumerID, WorkerID: &req.WorkerID, LockDuration: req.LockDuration, RequestID: rid, RequestDigest: digestOf(rid, req.RequestDigest)}
}

func claimedOccurrences(rows []queries.OccurrenceClaimPullRow) []queries.Occurrence {
	occs := make([]queries.Occurrence, len(rows))
	for i, row := range rows {
		occs[i] = queries.Occurrence(row)
	}
	return occs
}

// HandBackTagged hands back what a worker stream's claim tagged tag
// reserved and the stream never delivered (its COMMIT answer was lost, and
// the stream ended before asking again), no attempt spent, but for except
// (what the stream did deliver, left to its worker); it returns how many
// it handed back.
func (e *Engine) HandBackTagged(ctx context.Context, consumerID int64, workerID, tag string, except ...Held) (int, error) {
	prior, err := e.q.OccurrenceReplayRequest(ctx, queries.OccurrenceReplayRequestParams{ConsumerID: &consumerID, WorkerID: &workerID, RequestID: &tag, Now: e.at()})
	if err != nil {
		return 0, wrap("hand back tagged claim", err)
	}
	held := make([]Held, 0, len(prior))
	for _, p := range prior {
		h := Held{Occurrence: p.Occurrence.ID, Attempt: int(p.Occurrence.Attempts)}
		if !slices.Contains(except, h) {
			held = append(held, h)
		}
	}
	if len(held) == 0 {
		return 0, nil
	}
	handed, err := e.HandBack(ctx, consumerID, workerID, held, true)
	return len(handed), err
}

// handBackTimeout bounds a hand-back of an undeliverable claim, which a
// fetch waits for.
const handBackTimeout = 10 * time.Second

// deliver makes the reservations of what a claim took. When one cannot be
// delivered for want of a data key (its values sealed with a key this
// replica lacks, as when a key rotation ran before every replica had the
// new key, or this replica has none), what it can open is delivered and
// the rest handed back, no attempt spent; when it can open none, the whole
// claim is handed back and the fetch is refused with 503 data_key_missing: a
// worker that retries may reach a replica that has the key, and none burns
// its budget on tasks it never received. A replay (the same request_id
// again) hands nothing back: the worker may hold those tasks from the
// first answer, and a replica with the key replays them. Any other failure
// to open a value (damaged, not the key's) is returned as it is.
func (e *Engine) deliver(ctx context.Context, req ClaimRequest, occs []queries.Occurrence, replay bool) ([]Reservation, error) {
	got, err := e.reservations(occs, req.Pairs)
	if err == nil {
		return got, nil
	}
	if !keyMissing(err) {
		return nil, err
	}
	if !replay && len(occs) > 1 {
		// What this replica can open is delivered, the rest handed back
		// (security QA: a worker on a replica without one key got none of
		// the tasks it could open while one it could not came with them).
		// A replay of a request_id then answers what was delivered: it
		// finds the reservations still held, and those handed back are not.
		var open []Reservation
		var closed []queries.Occurrence
		for _, o := range occs {
			r, err := e.reservations([]queries.Occurrence{o}, req.Pairs)
			switch {
			case err == nil:
				open = append(open, r...)
			case keyMissing(err):
				closed = append(closed, o)
			default:
				return nil, err
			}
		}
		if len(open) > 0 {
			e.logger.Error("a claim cannot be delivered whole; handing back the tasks sealed with a data key this replica lacks", "err", err,
				"delivered", len(open), "handed_back", len(closed), "worker_id", req.WorkerID)
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
			defer cancel()
			e.handBackClaim(hctx, req.ConsumerID, req.WorkerID, closed)
			return open, nil
		}
	}
	if !replay {
		e.logger.Error("a claim cannot be delivered; handing it back", "err", err, "occurrences", len(occs), "worker_id", req.WorkerID)
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
		defer cancel()
		e.handBackClaim(hctx, req.ConsumerID, req.WorkerID, occs)
	}
	then := "they were handed back, no attempt spent: fetch again"
	if replay {
		then = "they stay this worker's: the same request_id replays them from a replica that has the key"
	}
	fe := fault.New(fault.Unavailable, "data_key_missing",
		"this replica cannot open the values of the tasks it claimed (sealed with a data key it lacks: %s); %s", sameKeys, then)
	fe.RetryAfter = time.Second
	return nil, fe
}

// sameKeys is what to do when a replica lacks a data key, said wherever
// it is found lacking (a claim, a push call, a reveal).
const sameKeys = "start every replica with the data keys the others use, RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE"

// keyMissing reports whether err is a value this replica cannot open for
// want of a data key: sealed with one it lacks, or it has none.
func keyMissing(err error) bool {
	return errors.Is(err, keyring.ErrNoKey) || fault.HasCode(err, "encryption_unavailable")
}

// handBackClaim releases what a claim reserved and could not deliver, no
// attempt spent; a failure is logged, the locks then lapsing instead.
func (e *Engine) handBackClaim(ctx context.Context, consumerID int64, workerID string, occs []queries.Occurrence) {
	held := make([]Held, len(occs))
	for i, o := range occs {
		held[i] = Held{Occurrence: o.ID, Attempt: int(o.Attempts)}
	}
	if _, err := e.HandBack(ctx, consumerID, workerID, held, true); err != nil {
		e.logger.Error("handing back an undeliverable claim failed; its locks lapse instead", "err", err)
	}
}

// digestOf is the digest to store with a claim's attempts: only a claim
// with a request_id can be replayed.
func digestOf(rid *string, digest []byte) []byte {
	if rid == nil {
		return nil
	}
	return digest
}

// reservations makes the deliveries of claimed rows: inputs unsealed, and
// only the declared fields of a subscription that declared some (a value
// never delivered is never exposed).
func (e *Engine) reservations(rows []queries.Occurrence, pairs Pairs) ([]Reservation, error) {
	out := make([]Reservation, 0, len(rows))
	for _, o := range rows {
		inputs, err := e.unseal(compact(o.Inputs), o.SealedInputs, aadOccurrenceInputs(o.ID))
		if err != nil {
			return nil, err
		}
		if fields := pairs.Fields(o.DefinitionKey, int(o.Revision)); fields != nil {
			inputs = contracts.Project(inputs, fields)
		}
		out = append(out, Reservation{ID: o.ID, Definition: o.DefinitionKey, Revision: int(o.Revision), Inputs: inputs,
			Attempt: int(o.Attempts), AttemptsLeft: attemptsLeft(o), LockExpiresAt: *o.LockExpiresAt,
			DeadlineAt: o.DeadlineAt, InstanceID: o.InstanceID, Node: o.Node, Priority: int(o.Priority),
			CreatedAt: o.CreatedAt, ProcessKey: o.ProcessKey, BusinessKey: o.BusinessKey, ErrorMessage: o.ErrorMessage})
	}
	return out, nil
}

// compact removes the white space PostgreSQL writes in jsonb's text
// ({"a": 1, "b": [1, 2]}): a worker stream carries the inputs' bytes as
// they are, and they must be the bytes REST delivers (encoding/json
// compacts a json.RawMessage), whether or not some were sealed.
func compact(doc json.RawMessage) json.RawMessage {
	if bytes.IndexByte(doc, ' ') < 0 && bytes.IndexByte(doc, '\n') < 0 {
		return doc
	}
	var b bytes.Buffer
	b.Grow(len(doc))
	if err := json.Compact(&b, doc); err != nil {
		return doc // not JSON: left for the caller to report as it is
	}
	return b.Bytes()
}

// ClaimMark is a moment no later than the database's clock now, for a
// caller to take before a claim and give NextClaimable after it; zero when
// this replica has no fresh reading of that clock.
func (e *Engine) ClaimMark() time.Time {
	if at := e.at(); at != nil {
		return *at
	}
	if t, ok := e.clock.now(time.Now()); ok {
		return t
	}
	return time.Time{}
}

// NextClaimable returns when the earliest occurrence of the pairs that was
// not yet claimable at since (a ClaimMark taken before the caller's claim;
// zero: now) becomes claimable (a retry delay or a lock ending), if any.
// One that came due between the claim and this read is returned too, due
// already, so that the caller claims again at once: measured from this
// statement's own clock, it would be left for the caller's next periodic
// check (a stream's keep-alive, seconds away).
func (e *Engine) NextClaimable(ctx context.Context, p Pairs, since time.Time) (time.Time, bool, error) {
	after := e.at()
	if !since.IsZero() {
		after = &since
	}
	t, err := e.q.OccurrenceNextClaimable(ctx, queries.OccurrenceNextClaimableParams{DefinitionKeys: p.Keys, Revisions: p.Revisions, Now: after})
	if isNoRows(err) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, wrap("next claimable", err)
	}
	return t, true, nil
}

// Settlement is the answer to complete, fail and release.
type Settlement struct {
	Status       string     `json:"status"`
	Route        string     `json:"route,omitempty"`
	AttemptsLeft int        `json:"attempts_left"`
	AvailableAt  *time.Time `json:"available_at,omitempty"`
	// DeadlineAt is the occurrence's deadline, if it has one, on an answer
	// that leaves it available: a retry due past it is never tried (the
	// timers fail the occurrence then), which available_at alone hid.
	DeadlineAt *time.Time `json:"deadline_at,omitempty"`
	// Attempt is the attempt the settlement ended: a worker stream frees
	// exactly that one.
	Attempt int `json:"-"`
	// Replayed says the answer is an earlier report's, replayed (its
	// answer was lost): nothing was settled now, but a stream still
	// holding Attempt, which never heard, frees it.
	Replayed bool `json:"-"`
	// RefillTag is the tag of the refill claimed with the settlement, if
	// one was (see RefillUnanswered).
	RefillTag string `json:"-"`
}

// policyDelay is the wait the occurrence's policy sets after the nth
// attempt spent of its budget failed: retry_delay, multiplied by
// retry_backoff for each earlier one; a delay that grows is at most
// max_retry_delay and never above ceiling (RELAIS_PULL_MAX_RETRY_DELAY as
// it stands now: an operator who lowers it lowers the grown delays of
// occurrences created before), nor below retry_delay. A fixed delay is
// retry_delay as published. The budget restarts with an operator's retry,
// and so does the growth.
func policyDelay(o queries.Occurrence, n int, ceiling time.Duration) time.Duration {
	d := o.RetryDelay
	if o.RetryBackoff > 1 && n > 1 {
		limit := ceiling
		if o.MaxRetryDelay != nil && *o.MaxRetryDelay < limit {
			limit = *o.MaxRetryDelay
		}
		// In floating point: the product overflows a Duration long before
		// 100 attempts of a factor of 10 are spent.
		grown := float64(d) * math.Pow(o.RetryBackoff, float64(n-1))
		if grown >= float64(limit) {
			return max(limit, d)
		}
		d = time.Duration(grown)
	}
	return d
}

// attemptsLeft is how many more reservations o's budget allows: its frozen
// max_attempts plus the credit releases gave and workers took.
func attemptsLeft(o queries.Occurrence) int {
	return max(int(o.MaxAttempts+o.AttemptCredit-o.Attempts), 0)
}

// WorkerRef identifies the worker acting on an occurrence.
type WorkerRef struct {
	ConsumerID int64
	WorkerID   string
	Occurrence uuid.UUID
	// SettleToken is set when the call came with the occurrence's settle
	// token rather than the consumer's own; TokenAttempt is then the
	// attempt it was issued for (SettleScope.Attempt), the only one it
	// settles or is answered for.
	SettleToken  bool
	TokenAttempt int32
	// Attempt is the attempt the call names (0: it names none, and acts
	// on the occurrence's current one): a report sent again after a lost
	// answer then never settles a later attempt the same worker holds.
	Attempt int32
	// handingBack is set by Release: its holder may hand back a
	// reservation its consumer is no longer granted (see held).
	handingBack bool
	// NotesRefusals says the caller notes a refused report itself, in
	// the words its client was answered in (see NoteRefusedReport): a
	// facade renames the engine's pointers.
	NotesRefusals bool
}

// named is the attempt ref is for, nil when it names none: a settle
// token's own, else the one the call names.
func (ref WorkerRef) named() *int32 {
	switch {
	case ref.TokenAttempt != 0:
		return &ref.TokenAttempt
	case ref.Attempt != 0:
		return &ref.Attempt
	}
	return nil
}

// withHeld runs fn in one transaction holding the instance and occurrence
// locks of ref's occurrence, once held has checked that the consumer may
// see it. Every settlement starts here; fn decides which refusals apply.
func (e *Engine) withHeld(ctx context.Context, ref WorkerRef, fn func(q *queries.Queries, r *run, o queries.Occurrence) error) error {
	return e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		return e.inHeld(ctx, q, ref, func(r *run, o queries.Occurrence) error { return fn(q, r, o) })
	})
}

// inHeld is withHeld inside a transaction the caller holds (a batch).
func (e *Engine) inHeld(ctx context.Context, q *queries.Queries, ref WorkerRef, fn func(r *run, o queries.Occurrence) error) error {
	r, o, err := e.held(ctx, q, ref)
	if err != nil {
		return err
	}
	err = fn(r, o)
	if fault.HasCode(err, "lock_expired") && (ref.Attempt == 0 || ref.Attempt == o.Attempts) {
		// The current attempt's lapse (an earlier one's is said so).
		return explainLapse(ctx, q, o, err)
	}
	return err
}

// explainLapse turns a lock_expired refusal whose attempt ended with its
// worker stream (disconnected) into one that says so: the lock was cut
// short when the stream went silent or dropped, and a worker whose task
// outlived three unacknowledged heartbeats learns what to change, not to
// ask for a longer lock. Any other refusal is returned as it is.
func explainLapse(ctx context.Context, q *queries.Queries, o queries.Occurrence, refusal error) error {
	a, err := q.AttemptEnding(ctx, queries.AttemptEndingParams{OccurrenceID: o.ID, Number: o.Attempts})
	if err != nil || a.Outcome == nil || *a.Outcome != OutcomeDisconnected || a.EndedAt == nil {
		return refusal
	}
	// The stream's end cut the lock short only if it was still running
	// then: the hand-back sets the expiry to the earlier of the two.
	if o.LockExpiresAt == nil || o.LockExpiresAt.Before(*a.EndedAt) {
		return refusal
	}
	return fault.New(fault.Conflict, "lock_expired",
		"the lock on occurrence %s ended at %s, when the worker stream holding it ended (closed, its connection lost, or dropped after three heartbeats went unacknowledged), and the occurrence was handed back, as a stream's end does: on a network that drops connections, long polling keeps tasks through a drop; a client of its own must keep reading the stream and acknowledging its heartbeats while a task runs",
		o.ID, o.LockExpiresAt.UTC().Format(time.RFC3339Nano))
}

// held locks the instance then the occurrence of ref, and checks that the
// worker holds a live lock on it. A stale worker never gets through: each
// refusal names its situation. For an occurrence the consumer may not see,
// it answers 404 exactly as for an unknown id.
func (e *Engine) held(ctx context.Context, q *queries.Queries, ref WorkerRef) (*run, queries.Occurrence, error) {
	var r *run
	var o queries.Occurrence
	var lockedAt time.Time
	var err error
	if locked, ok := txStateOf(ctx).take(ref.Occurrence); ok {
		// Locked up front with the transaction's other settlements.
		if r, err = e.lockedRun(ctx, q, locked.Instance, locked.Now); err != nil {
			return nil, queries.Occurrence{}, err
		}
		o, lockedAt = locked.Occurrence, locked.LockedAt
	} else {
		if r, err = e.runForOccurrence(ctx, q, ref.Occurrence); err != nil {
			return nil, queries.Occurrence{}, err
		}
		row, err := q.OccurrenceLock(ctx, queries.OccurrenceLockParams{ID: ref.Occurrence, Now: e.at()})
		if err != nil {
			return nil, queries.Occurrence{}, err
		}
		o, lockedAt = row.Occurrence, row.LockedAt
	}
	r.lockedAt = r.now
	if lockedAt.After(r.now) {
		r.lockedAt = lockedAt.UTC()
	}
	// Refused word for word as an unknown id (see runForOccurrence).
	if o.Mode != ModePull {
		return nil, o, notKeptForConsumer(ref.Occurrence)
	}
	ok, err := granted(ctx, e.memo, q, ref.ConsumerID, o.DefinitionKey, int(o.Revision))
	if err != nil {
		return nil, o, err
	}
	// A grant narrowed under a worker's reservation leaves it nothing to
	// settle, but it may still hand the reservation back, at no attempt's
	// cost, rather than hold it until its lock lapses (an attempt spent):
	// it knows the occurrence already.
	holder := ref.handingBack && o.Status == StatusReserved && o.ConsumerID != nil && *o.ConsumerID == ref.ConsumerID &&
		o.WorkerID != nil && *o.WorkerID == ref.WorkerID
	if !ok && !holder {
		return nil, o, notKeptForConsumer(ref.Occurrence)
	}
	return r, o, nil
}

// Standing is what any report of ref would be refused for now, whatever
// it carries (a settled occurrence, a lapsed lock or another worker's, an
// earlier attempt), or nil while ref may settle it. The Camunda facade
// judges a report's variables before the engine sees them: a completion
// of a task already done is told so, not that its variables do not
// convert. Advisory: the settlement's own transaction decides.
func (e *Engine) Standing(ctx context.Context, ref WorkerRef) error {
	o, err := e.q.OccurrenceGet(ctx, ref.Occurrence)
	if isNoRows(err) {
		return notKeptForConsumer(ref.Occurrence)
	}
	if err != nil {
		return wrap("standing of "+ref.Occurrence.String(), err)
	}
	return lockRefusal(o, ref, e.Now())
}

// lockRefusal explains why ref may not settle o, or returns nil when it
// holds a live lock on it (or o is deferred by ref's consumer). Past the
// occurrence's deadline its holder is refused with deadline_exceeded,
// whether or not the timer failed it yet: which of the two it ends as must
// not depend on when the timer runs.
func lockRefusal(o queries.Occurrence, ref WorkerRef, now time.Time) error {
	if ref.TokenAttempt != 0 && (ref.TokenAttempt != o.Attempts || o.Status == StatusAvailable) {
		// Its attempt was failed for a retry (or handed back): the token
		// is told so, and settles no later attempt, deferred or not.
		return fault.New(fault.Conflict, "already_settled", "attempt %d of occurrence %s, the one this settle token was issued for, is already settled; the occurrence was offered again", ref.TokenAttempt, o.ID)
	}
	if err := attemptRefusal(o, ref); err != nil {
		return err
	}
	switch o.Status {
	case StatusFailed:
		// The timer's failure, not a worker's report of that code, told
		// to its holder alone (another learns only that it is settled);
		// a deferred occurrence is held by every worker of its consumer,
		// as any of them may settle it (a failure keeps deferred_at).
		sameConsumer := o.ConsumerID != nil && *o.ConsumerID == ref.ConsumerID
		holder := sameConsumer && (o.DeferredAt != nil || o.WorkerID != nil && *o.WorkerID == ref.WorkerID)
		if deref(o.ErrorCode) == CodeDeadlineExceeded && pastDeadline(o, now) && holder {
			return deadlineRefusal(o)
		}
		return fault.New(fault.Conflict, "already_settled", "occurrence %s is already %s", o.ID, o.Status)
	case StatusCompleted:
		return fault.New(fault.Conflict, "already_settled", "occurrence %s is already %s", o.ID, o.Status)
	case StatusCancelled:
		return fault.New(fault.Conflict, "occurrence_cancelled", "occurrence %s was cancelled (its instance was stopped)", o.ID)
	case StatusAvailable:
		if o.AvailableAt.After(now) {
			// Failed for a retry with a delay: no fetch takes it before.
			return fault.New(fault.Conflict, "not_reserved", "occurrence %s is not reserved: it waits for its retry, offered again from %s", o.ID, o.AvailableAt.UTC().Format(time.RFC3339Nano))
		}
		return fault.New(fault.Conflict, "not_reserved", "occurrence %s is not reserved; claim it first (a fetch, or a stream's assignment)", o.ID)
	case StatusDeferred:
		// No lock to hold: any worker of the consumer that deferred it may
		// settle it.
		if o.ConsumerID == nil || *o.ConsumerID != ref.ConsumerID {
			return fault.New(fault.Conflict, "locked_by_other_worker", "occurrence %s is deferred by another consumer", o.ID)
		}
		if pastDeadline(o, now) {
			return deadlineRefusal(o)
		}
		return nil
	}
	holder := o.ConsumerID != nil && *o.ConsumerID == ref.ConsumerID && o.WorkerID != nil && *o.WorkerID == ref.WorkerID
	if !holder && o.Status == StatusReserved && (o.LockExpiresAt == nil || !o.LockExpiresAt.After(now)) {
		// Its holder's lock lapsed: nobody holds it, whatever the row
		// says until the next claim takes it (observed as available).
		return fault.New(fault.Conflict, "not_reserved", "occurrence %s is not reserved (the lock of the worker that held it lapsed); claim it first (a fetch, or a stream's assignment)", o.ID)
	}
	if o.ConsumerID != nil && *o.ConsumerID == ref.ConsumerID && o.WorkerID != nil && *o.WorkerID != ref.WorkerID {
		// The consumer's own worker: named, since a worker_id that differs
		// from the fetch's is the usual slip (another consumer learns
		// nothing of who holds it).
		if o.Attempts > 1 {
			// An earlier attempt may have been this worker's, its lock
			// lapsed: the usual cause then, and no slip of the id to fix.
			return fault.New(fault.Conflict, "locked_by_other_worker", "occurrence %s is reserved by worker %q of this consumer (attempt %d), not %q: if %q held an earlier attempt, its lock lapsed and the occurrence was offered again (stop this work); otherwise use the worker_id that fetched it", o.ID, *o.WorkerID, o.Attempts, ref.WorkerID, ref.WorkerID)
		}
		return fault.New(fault.Conflict, "locked_by_other_worker", "occurrence %s is reserved by worker %q of this consumer, not %q: use the worker_id that fetched it", o.ID, *o.WorkerID, ref.WorkerID)
	}
	if o.ConsumerID == nil || *o.ConsumerID != ref.ConsumerID || o.WorkerID == nil {
		return fault.New(fault.Conflict, "locked_by_other_worker", "occurrence %s is reserved by another worker", o.ID)
	}
	if pastDeadline(o, now) {
		return deadlineRefusal(o)
	}
	if o.LockExpiresAt == nil {
		return fault.New(fault.Conflict, "lock_expired", "the lock on occurrence %s is gone", o.ID)
	}
	if !o.LockExpiresAt.After(now) {
		return fault.New(fault.Conflict, "lock_expired", "the lock on occurrence %s expired at %s", o.ID, o.LockExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// attemptRefusal refuses a call naming an attempt that is not o's
// current one: an earlier attempt is over, its lock gone with it, whatever
// became of the occurrence since (an identical failure report replays
// before this is asked); a later one was never made.
func attemptRefusal(o queries.Occurrence, ref WorkerRef) error {
	switch {
	case ref.Attempt == 0 || ref.Attempt == o.Attempts:
		return nil
	case ref.Attempt > o.Attempts:
		return fault.New(fault.BadRequest, "invalid_request", "occurrence %s has had no attempt %d (it is at attempt %d)", o.ID, ref.Attempt, o.Attempts).
			WithErrors([]fault.FieldError{{Path: "/attempt", Message: fmt.Sprintf("is above the occurrence's attempts (%d)", o.Attempts)}})
	}
	return fault.New(fault.Conflict, "lock_expired", "attempt %d of occurrence %s is over, its lock gone (the occurrence is at attempt %d): this report is not taken", ref.Attempt, o.ID, o.Attempts)
}

func pastDeadline(o queries.Occurrence, now time.Time) bool {
	return o.DeadlineAt != nil && !o.DeadlineAt.After(now)
}

func deadlineRefusal(o queries.Occurrence) error {
	at := "its deadline"
	if o.DeadlineAt != nil {
		at += " at " + o.DeadlineAt.UTC().Format(time.RFC3339Nano)
	}
	return fault.New(fault.Conflict, CodeDeadlineExceeded, "occurrence %s passed %s: it fails as deadline_exceeded and its on_error decides: stop working on it, no result of it is taken", o.ID, at)
}

// settledBy records who settles o when it is deferred: its attempt's
// worker is the one that deferred it, and any worker of the consumer, or a
// settle token, may settle it.
func settledBy(ctx context.Context, q *queries.Queries, o queries.Occurrence, ref WorkerRef) error {
	if o.Status != StatusDeferred {
		return nil
	}
	return q.AttemptSettledBy(ctx, queries.AttemptSettledByParams{OccurrenceID: o.ID, Number: o.Attempts, SettledBy: ref.WorkerID, SettledWithToken: ref.SettleToken})
}

// canonicalOutputs is an outputs document in one form for replay
// detection: equal JSON is equal whatever its formatting, its numbers
// compared by value (1, 1.0 and 1e0 alike, as a start's replay compares
// its inputs: Relais stores an integer field's 1.0 as 1, and a worker
// resending what it read back must be recognized).
func canonicalOutputs(outputs json.RawMessage) []byte {
	if n, err := jsontree.Read(outputs, maxInputsDepth); err == nil {
		// Escaped as encoding/json escapes for HTML (these characters
		// stand only inside strings), so that outputs whose numbers are
		// written plainly digest as the legacy form did: a replica of the
		// previous release recognizes their replays during an upgrade.
		return []byte(htmlEscaper.Replace(string(jsontree.AppendCanonical(nil, n))))
	}
	return legacyCanonicalOutputs(outputs)
}

var htmlEscaper = strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`)

// legacyCanonicalOutputs is canonicalOutputs as it was until numbers were
// compared by value (their literals as written), which digests of
// completions made before stored. Both agree on numbers written plainly.
func legacyCanonicalOutputs(outputs json.RawMessage) []byte {
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
	out, _, err := e.CompleteAndClaim(ctx, ref, outputs, nil)
	return out, err
}

// CompleteAndClaim is Complete, then, with next set and if the completion
// settled an attempt now (not a replay), a claim of next sent with its transaction's
// COMMIT: a worker stream fills the slot an outcome frees without a
// transaction and a commit of its own. It claims one task (next.MaxTasks
// is not read); the settlements of a group that ask with one ClaimRequest
// share one claim. A refused completion claims nothing. Reservations that
// cannot be delivered (their inputs fail to unseal) are handed back,
// released.
func (e *Engine) CompleteAndClaim(ctx context.Context, ref WorkerRef, outputs json.RawMessage, next *ClaimRequest) (Settlement, []Reservation, error) {
	out, got, err := e.settleAndClaim(ctx, ref, next, func(ctx context.Context, q *queries.Queries) (Settlement, error) {
		return e.completeIn(ctx, q, ref, outputs)
	})
	e.noteRefused(ctx, ref, err)
	return out, got, wrap("complete", err)
}

// FailAndClaim is Fail, then the claim of next (if set), as
// CompleteAndClaim.
func (e *Engine) FailAndClaim(ctx context.Context, ref WorkerRef, f Failure, next *ClaimRequest) (Settlement, []Reservation, error) {
	if err := e.checkFailure(f); err != nil {
		e.noteRefused(ctx, ref, err)
		return Settlement{}, nil, err
	}
	out, got, err := e.settleAndClaim(ctx, ref, next, func(ctx context.Context, q *queries.Queries) (Settlement, error) {
		return e.failIn(ctx, q, ref, f)
	})
	e.noteRefused(ctx, ref, err)
	return out, got, wrap("fail", err)
}

// noteRefused is NoteRefusedReport unless ref's caller notes refusals
// itself.
func (e *Engine) noteRefused(ctx context.Context, ref WorkerRef, err error) {
	if !ref.NotesRefusals {
		e.NoteRefusedReport(ctx, ref, err)
	}
}

// Bounds of what NoteRefusedReport keeps of a refusal.
const (
	maxNotedPointers = 10
	maxNotedPointer  = 200
)

// NoteRefusedReport notes on the attempt ref holds that a report of it was
// refused with err, when err refuses the report itself (400 or 422: its
// outputs, its failure, a value a facade could not convert) rather than
// the reporter's standing (a lapsed lock, a settled occurrence: 409). A
// refused report changes nothing else, and an attempt whose lock lapsed
// after its worker's reports were refused read as a worker that never
// answered (Camunda QA). The code and pointers are kept, not the words,
// which may quote the refused value; a pointer's members are scrubbed of
// the occurrence's protected values, since one to a member the contract
// lacks is that member's name, which a worker may have made of its inputs
// (security QA: a card number stored as /outputs/<card>). Best effort:
// the refusal is the caller's answer whatever becomes of the note.
func (e *Engine) NoteRefusedReport(ctx context.Context, ref WorkerRef, err error) {
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.BadRequest && fe.Kind != fault.Unprocessable || ref.Occurrence == uuid.Nil || ctx.Err() != nil {
		return
	}
	var protected []string
	if len(fe.Errors) > 0 {
		o, err := e.q.OccurrenceGet(ctx, ref.Occurrence)
		if err == nil {
			protected, err = e.protectedOf(ctx, e.q, o)
		}
		if err != nil {
			// Unscrubbed, a pointer may hold a secret: no note rather
			// than that one.
			if !errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil {
				e.logger.Warn("noting a refused report on its attempt failed", "occurrence", ref.Occurrence, "code", fe.Code, "err", err)
			}
			return
		}
	}
	pointers := []string{}
	for _, f := range fe.Errors[:min(len(fe.Errors), maxNotedPointers)] {
		p := scrubPointer(f.Path, protected)
		if len(p) > maxNotedPointer {
			p = strings.ToValidUTF8(p[:maxNotedPointer], "") + "…"
		}
		pointers = append(pointers, p)
	}
	if _, err := e.q.AttemptNoteRefusal(ctx, queries.AttemptNoteRefusalParams{Now: e.at(), Code: fe.Code, Pointers: pointers,
		OccurrenceID: ref.Occurrence, ConsumerID: &ref.ConsumerID, AnyWorker: ref.SettleToken, WorkerID: ref.WorkerID, Number: ref.named()}); err != nil && ctx.Err() == nil {
		e.logger.Warn("noting a refused report on its attempt failed", "occurrence", ref.Occurrence, "code", fe.Code, "err", err)
	}
}

// scrubPointer scrubs each member of pointer of the protected values, as
// a message is scrubbed; one that is no pointer is scrubbed whole.
func scrubPointer(pointer string, protected []string) string {
	if len(protected) == 0 {
		return pointer
	}
	tokens, err := jsontree.SplitPointer(pointer)
	if err != nil {
		return contracts.Scrub(pointer, protected)
	}
	for i, t := range tokens {
		tokens[i] = contracts.Scrub(t, protected)
	}
	return jsontree.Pointer("", tokens...)
}

// settleAndClaim runs settle as a group write that, if it settled an
// attempt now and next is set, claims next with its COMMIT (see
// Engine.refill).
func (e *Engine) settleAndClaim(ctx context.Context, ref WorkerRef, next *ClaimRequest, settle func(ctx context.Context, q *queries.Queries) (Settlement, error)) (Settlement, []Reservation, error) {
	var out Settlement
	if next != nil {
		// The claim checks the grants as Claim does. A request whose pairs
		// all stand is kept as it is: writes sharing it share one claim.
		switch pairs, err := e.stillGranted(ctx, next.ConsumerID, next.Pairs); {
		case err != nil:
			// Not granted any more, or the grants could not be read: the
			// settlement stands alone, and the stream's own claim decides.
			if !fault.HasCode(err, "not_granted") {
				e.logger.Warn("reading the grants for a settlement's claim failed; settling without it", "err", err)
			}
			next = nil
		case len(pairs.Keys) != len(next.Pairs.Keys):
			narrowed := *next
			narrowed.Pairs = pairs
			next = &narrowed
		}
	}
	w := &groupWrite{ctx: ctx, occurrence: ref.Occurrence, refill: next, done: make(chan struct{})}
	w.apply = func(ctx context.Context, q *queries.Queries) error {
		var err error
		w.settled, w.refilled = false, nil
		out, err = settle(ctx, q)
		w.settled = err == nil && out.Attempt != 0 && !out.Replayed
		return err
	}
	if err := e.group.submit(ctx, w); err != nil {
		if w.refillTag != "" && (pgfault.Lost(err) || errors.Is(err, errCommitUnknown)) {
			// The COMMIT may have claimed the refill unanswered.
			return out, nil, &RefillUnanswered{Tag: w.refillTag, Err: pgfault.Unavailable(err)}
		}
		return out, nil, err
	}
	out.RefillTag = w.refillTag
	if len(w.refilled) == 0 {
		return out, nil, nil
	}
	got, err := e.reservations(w.refilled, next.Pairs)
	if err != nil {
		e.logger.Error("delivering the claim made with a settlement failed; handing it back", "err", err)
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
		e.handBackClaim(hctx, next.ConsumerID, next.WorkerID, w.refilled)
		cancel()
		return out, nil, nil
	}
	return out, got, nil
}

// RefillUnanswered is the error of a settlement whose transaction also
// claimed a refill (see CompleteAndClaim) and whose COMMIT's answer was
// lost: it may have committed, the refill reserved to the worker under
// Tag and delivered to nobody. Claim with that RequestID and Recover asks
// for it again; HandBackTagged gives it back.
type RefillUnanswered struct {
	Tag string
	Err error
}

func (e *RefillUnanswered) Error() string { return e.Err.Error() }
func (e *RefillUnanswered) Unwrap() error { return e.Err }

// completeIn is Complete inside q's transaction.
func (e *Engine) completeIn(ctx context.Context, q *queries.Queries, ref WorkerRef, outputs json.RawMessage) (out Settlement, err error) {
	err = e.inHeld(ctx, q, ref, func(r *run, o queries.Occurrence) error {
		canonical := canonicalOutputs(outputs)
		// A deferred occurrence may be completed by any worker of its
		// consumer: its replay is recognized by the consumer alone.
		sameWorker := o.DeferredAt != nil || o.WorkerID != nil && *o.WorkerID == ref.WorkerID
		if o.Status == StatusCompleted && o.OutputsDigest != nil && (ref.TokenAttempt == 0 || ref.TokenAttempt == o.Attempts) && (ref.Attempt == 0 || ref.Attempt == o.Attempts) &&
			(e.sameDigest(canonical, *o.OutputsDigest) || e.sameDigest(legacyCanonicalOutputs(outputs), *o.OutputsDigest)) &&
			o.ConsumerID != nil && *o.ConsumerID == ref.ConsumerID && sameWorker {
			// A replay: nothing is settled now (Replayed), but a stream that
			// never heard of the first answer frees the attempt.
			out = Settlement{Status: StatusCompleted, Route: deref(o.Route), AttemptsLeft: attemptsLeft(o), Attempt: int(o.Attempts), Replayed: true}
			return nil
		}
		if err := lockRefusal(o, ref, r.lockedAt); err != nil {
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
			// A protected field's constraint is not said, as in every
			// message Relais stores: a worker's report of this refusal
			// (the Go SDK's failure, a refused report's record) reaches
			// operators, and "at most 4 characters" tells a length
			// (privacy QA). The pointer still names the field.
			vs = protectedUndescribed(rev.Working.Outputs, vs)
			for i := range vs {
				vs[i].Path = "/outputs" + vs[i].Path
			}
			return violations(CodeInvalidOutputs, "the outputs violate revision "+fmt.Sprint(o.Revision)+" of "+o.DefinitionKey, vs)
		}
		// Stored as typed workers read them; the digest stays the report's.
		outputs := ov.Integers(outputs)
		route, err := rev.Working.Route(outputs)
		if err != nil {
			return err
		}
		if err := settledBy(ctx, q, o, ref); err != nil {
			return err
		}
		if err := r.complete(o, rev, outputs, canonical, route); err != nil {
			return err
		}
		out = Settlement{Status: StatusCompleted, Route: route, AttemptsLeft: attemptsLeft(o), Attempt: int(o.Attempts)}
		return nil
	})
	return out, err
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
		OutputsDigest: r.e.digest(canonical), Route: routePtr, Now: r.now}); err != nil {
		return err
	}
	// A deferred occurrence's settle tokens are kept until they expire:
	// a second click answers as the first (a replay), or 409.
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
// A failure reported without a message stores none (null), not "": the
// API and the Camunda facade read back what was sent.
func (r *run) fail(o queries.Occurrence, outcome, code, message string) error {
	if err := r.q.OccurrenceFail(r.ctx, queries.OccurrenceFailParams{ID: o.ID, ErrorCode: &code, ErrorMessage: strPtr(message), Now: &r.now}); err != nil {
		return err
	}
	if o.Status == StatusReserved || o.Status == StatusDeferred {
		if err := r.q.AttemptEnd(r.ctx, queries.AttemptEndParams{OccurrenceID: o.ID, Number: o.Attempts, Outcome: outcome,
			ErrorCode: &code, ErrorMessage: strPtr(message), Now: &r.now, ReportDigest: r.reportDigest, ReportAnswer: r.reportAnswer}); err != nil {
			return err
		}
	}
	return r.followFailure(o.Node, code, message)
}

// OfferRetryNow offers now a pull occurrence whose retry waits out its
// delay (a worker's failure asked for one), its attempts left and deadline
// unchanged, and reports whether one waited: the Camunda facade's unlock
// of a task a failure's retryTimeout holds back, which Camunda's unlock
// makes fetchable at once.
func (e *Engine) OfferRetryNow(ctx context.Context, id uuid.UUID) (bool, error) {
	offered := false
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		row, err := q.OccurrenceOfferRetryNow(ctx, queries.OccurrenceOfferRetryNowParams{ID: id, Now: e.at()})
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		offered = true
		return q.Notify(ctx, queries.NotifyParams{Channel: ChannelOccurrence, Payload: AvailabilityPayload(row.Mode, row.DefinitionKey, int(row.Revision), row.AvailableAt)})
	})
	return offered, wrap("offer retry now", err)
}

// Failure is a worker's report that it could not do the work.
type Failure struct {
	ErrorCode  string
	Message    string
	Retryable  bool
	RetryDelay *time.Duration // nil: the occurrence's frozen retry_delay
	// AttemptsLeft, when set, lowers the attempts left after this one
	// (0 makes the failure terminal); it never raises them.
	AttemptsLeft *int
	// ClampAttemptsLeft makes an AttemptsLeft above what the budget allows
	// leave the budget as it is, where it is otherwise refused
	// (bound_exceeded). The Camunda facade sets it: a Camunda worker's
	// retries is a wish the occurrence's frozen budget caps.
	ClampAttemptsLeft bool
	// FinalDelayIgnored lets a terminal failure carry a RetryDelay, which
	// is otherwise refused (a worker that sent a delay meant a retry, and
	// would fail the instance for good). The Camunda facade sets it: its
	// clients send retryTimeout with every failure, retries 0 included.
	FinalDelayIgnored bool
}

// canonical is the failure as a replay is recognized: the same worker
// sending the same report.
func (f Failure) canonical(workerID string) []byte {
	b, _ := json.Marshal(struct {
		Worker, Code, Message string
		Retryable             bool
		Delay                 *time.Duration
		Left                  *int
		// omitempty: the digests of reports without it stay as they were.
		Clamp bool `json:",omitempty"`
	}{workerID, f.ErrorCode, f.Message, f.Retryable, f.RetryDelay, f.AttemptsLeft, f.ClampAttemptsLeft})
	return b
}

// maxErrorMessage bounds stored worker messages: they are diagnostics, not
// payloads.
const maxErrorMessage = 2000

// Fail records a worker's failure. A retryable failure with attempts left
// makes the occurrence available again after the retry delay; otherwise it
// fails terminally and the process's error handling decides. The message is
// scrubbed of the occurrence's sensitive and secret values before storage.
func (e *Engine) Fail(ctx context.Context, ref WorkerRef, f Failure) (Settlement, error) {
	out, _, err := e.FailAndClaim(ctx, ref, f, nil)
	return out, err
}

// reservedCodes are the error codes that mean one thing Relais does, which
// filters (error_code=abandoned), the console and on_error maps read so: a
// worker reporting one would pass for it (designer QA: a worker's
// "abandoned" read "An operator abandoned the instance"). Codes Relais
// shares with workers (invalid_outputs, deadline_exceeded, ...) are not
// reserved: a worker's own is told apart by its attempt.
var reservedCodes = map[string]string{
	AbandonedCode:         "an operator's abandon of a held instance",
	CodeAttemptsExhausted: "a last attempt that ended without a result",
	CodeOutcomeUnknown:    "a push call whose answer was lost",
}

// ReservedCode reports whether code is Relais's alone: no worker may
// report it.
func ReservedCode(code string) bool {
	// In any case: "Abandoned" would pass for it as well, beside it.
	_, ok := reservedCodes[strings.ToLower(code)]
	return ok
}

// checkFailure refuses a malformed failure report before any lock is taken.
func (e *Engine) checkFailure(f Failure) error {
	var errs []fault.FieldError
	// The codes on_error maps are keyed by: one pattern for both.
	switch {
	case f.ErrorCode == "":
		errs = append(errs, fault.FieldError{Path: "/error_code", Message: "is required: the code on_error routes by, 1 to 64 letters, digits or _ . : -"})
	case !process.ErrorCodePattern.MatchString(f.ErrorCode):
		errs = append(errs, fault.FieldError{Path: "/error_code", Message: "must be 1 to 64 letters, digits or _ . : -"})
	case ReservedCode(f.ErrorCode):
		errs = append(errs, fault.FieldError{Path: "/error_code", Message: fmt.Sprintf("%s is Relais's code for %s, as filters and the console read it: report a code of your own", f.ErrorCode, reservedCodes[strings.ToLower(f.ErrorCode)])})
	}
	if f.RetryDelay != nil && !f.Retryable && !f.FinalDelayIgnored {
		errs = append(errs, fault.FieldError{Path: "/retry_delay", Message: "is only taken with retryable true: without it the failure is terminal and the delay would be ignored"})
	}
	if strings.ContainsRune(f.Message, 0) {
		// The REST routes refuse it reading the body; the worker protocol
		// carries it (protobuf strings may hold it), and PostgreSQL
		// stores no NUL in text.
		errs = append(errs, fault.FieldError{Path: "/message", Message: "must not hold the NUL character"})
	}
	switch {
	case f.AttemptsLeft != nil && *f.AttemptsLeft < 0:
		errs = append(errs, fault.FieldError{Path: "/attempts_left", Message: "must be 0 or more"})
	case f.AttemptsLeft != nil && *f.AttemptsLeft > 0 && !f.Retryable:
		// As a delay: a terminal failure would answer "failed" with the
		// attempts the worker meant to leave, none of them ever run.
		errs = append(errs, fault.FieldError{Path: "/attempts_left", Message: "above 0 is only taken with retryable true: without it the failure is terminal and no attempt is left (give 0, or leave it out)"})
	}
	over := f.RetryDelay != nil && *f.RetryDelay > e.limits.MaxRetryDelay
	if len(errs) > 0 {
		if over {
			// Every problem at once: the ceiling's too.
			errs = append(errs, fault.FieldError{Path: "/retry_delay", Message: "is above Relais's ceiling of " + isoduration.Format(e.limits.MaxRetryDelay)})
		}
		return fault.New(fault.BadRequest, "invalid_request", "the failure is invalid").WithErrors(errs)
	}
	if over {
		return BoundExceeded("retry_delay", e.limits.MaxRetryDelay)
	}
	return nil
}

// failIn is Fail inside q's transaction, f checked.
func (e *Engine) failIn(ctx context.Context, q *queries.Queries, ref WorkerRef, f Failure) (out Settlement, err error) {
	digest := e.digest(f.canonical(ref.WorkerID))
	err = e.inHeld(ctx, q, ref, func(r *run, o queries.Occurrence) error {
		// An identical replay of a report that was recorded answers what the
		// report got, whatever happened since (a lost response), except
		// when this very worker holds a later attempt: then the same report
		// is that attempt's failure (a retry loop meeting the same outage),
		// and answering the earlier one would leave the attempt held, its
		// budget unspent, and the worker believing it failed. A lost answer
		// retried only once the same worker holds the next attempt is
		// recorded against it; that worker then holds nothing to run. A
		// deferred attempt is settled by any worker of the consumer, but
		// only its own worker's report is taken for a new one: another's is
		// a replay, or it would fail work a colleague set aside.
		held := lockRefusal(o, ref, r.lockedAt)
		// A report naming its attempt (or a settle token's) replays only
		// that attempt's; one naming none, the latest identical one.
		if prior, err := q.AttemptReportAnswer(ctx, queries.AttemptReportAnswerParams{OccurrenceID: o.ID, ConsumerID: &ref.ConsumerID, ReportDigest: &digest, Number: ref.named()}); err == nil {
			holder := o.WorkerID != nil && *o.WorkerID == ref.WorkerID
			// A holder's report on a later attempt past the deadline is
			// that attempt's, refused: not the earlier one's answer.
			lateHolder := holder && prior.Number != o.Attempts && fault.HasCode(held, CodeDeadlineExceeded)
			if (held != nil || prior.Number == o.Attempts || !holder) && !lateHolder {
				if err := json.Unmarshal(prior.Answer, &out); err != nil {
					return err
				}
				out.Attempt, out.Replayed = int(prior.Number), true
				return nil
			}
		} else if !isNoRows(err) {
			return err
		}
		if held != nil {
			return held
		}
		left := attemptsLeft(o)
		// The attempts spent in the budget, this one included, for the
		// policy's backoff: those a worker waived are not (nor those
		// handed back, which gave their credit back).
		spent := int(o.Attempts - o.AttemptCredit - o.AttemptsWaived)
		if f.AttemptsLeft != nil {
			if *f.AttemptsLeft > left && !f.ClampAttemptsLeft {
				return BoundExceeded("attempts_left", left)
			}
			if *f.AttemptsLeft < left {
				waived := int32(left - *f.AttemptsLeft)
				credit := o.AttemptCredit - waived
				if err := q.OccurrenceSetCredit(ctx, queries.OccurrenceSetCreditParams{ID: o.ID, AttemptCredit: credit, Waived: waived}); err != nil {
					return err
				}
				o.AttemptCredit, left = credit, *f.AttemptsLeft
			}
		}
		if err := settledBy(ctx, q, o, ref); err != nil {
			return err
		}
		protected, err := e.protectedOf(ctx, q, o)
		if err != nil {
			return err
		}
		code, message := redactCode(f.ErrorCode, protected), scrubMessage(f.Message, protected)
		if f.Retryable && left > 0 {
			delay := policyDelay(o, spent, e.limits.MaxRetryDelay)
			if f.RetryDelay != nil {
				delay = *f.RetryDelay
			}
			at := r.now.Add(delay)
			out = Settlement{Status: StatusAvailable, AttemptsLeft: left, AvailableAt: &at, DeadlineAt: o.DeadlineAt}
			answer, _ := json.Marshal(out)
			out.Attempt = int(o.Attempts)
			if _, err := q.OccurrenceRetry(ctx, queries.OccurrenceRetryParams{ID: o.ID, AvailableAt: at, ErrorCode: &code, ErrorMessage: strPtr(message)}); err != nil {
				return err
			}
			if err := q.AttemptEnd(ctx, queries.AttemptEndParams{OccurrenceID: o.ID, Number: o.Attempts, Outcome: OutcomeFailed,
				ErrorCode: &code, ErrorMessage: strPtr(message), Now: &r.now, ReportDigest: &digest, ReportAnswer: answer}); err != nil {
				return err
			}
			if o.DeferredAt != nil {
				if err := q.SettleTokenDeleteUnnumbered(ctx, o.ID); err != nil {
					return err
				}
			}
			return q.Notify(ctx, queries.NotifyParams{Channel: ChannelOccurrence, Payload: AvailabilityPayload(o.Mode, o.DefinitionKey, int(o.Revision), at)})
		}
		out = Settlement{Status: StatusFailed, AttemptsLeft: left}
		r.reportDigest = &digest
		r.reportAnswer, _ = json.Marshal(out)
		out.Attempt = int(o.Attempts)
		return r.fail(o, OutcomeFailed, code, message)
	})
	return out, err
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
	// left as a prefix; but not a whole destination body: a value that
	// starts within the bound ends within six bytes per byte of it (\u0041
	// spells A), and the rest is cut anyway.
	longest := 0
	for _, p := range protected {
		longest = max(longest, len(p))
	}
	if bound := maxErrorMessage + 1 + 6*longest; len(message) > bound {
		message = message[:bound]
	}
	message = contracts.Scrub(message, protected)
	if len(message) > maxErrorMessage {
		// Cut on a character boundary (the column holds UTF-8 text), the
		// ellipsis saying so included in the bound.
		cut := maxErrorMessage - len("…")
		for cut > 0 && !utf8.RuneStart(message[cut]) {
			cut--
		}
		message = message[:cut] + "…"
	}
	return message
}

// redactCode replaces a worker's error code that holds a protected value,
// in any letter case (codes are often upper-cased from what they quote):
// inside it for values of minCodeMatch characters or more, as a piece
// for shorter ones: between separators (CVV_737_REJECTED), or a run of
// digits among letters (CVV737, ERR737X). Codes Relais makes itself never
// hold one and are not passed here.
func redactCode(original string, protected []string) string {
	code := strings.ToLower(original)
	pieces := codePieces(code)
	for _, p := range protected {
		p = strings.ToLower(p)
		if utf8.RuneCountInString(p) >= minCodeMatch && strings.Contains(code, p) || code == p || slices.Contains(pieces, p) {
			return redactedCode
		}
	}
	return original
}

// codePieces splits code at separators and where letters and digits meet.
func codePieces(code string) []string {
	var pieces []string
	start, digits := -1, false
	for i, r := range code {
		letter, digit := unicode.IsLetter(r), unicode.IsDigit(r)
		switch {
		case !letter && !digit:
			if start >= 0 {
				pieces = append(pieces, code[start:i])
			}
			start = -1
		case start < 0:
			start, digits = i, digit
		case digit != digits:
			pieces = append(pieces, code[start:i])
			start, digits = i, digit
		}
	}
	if start >= 0 {
		pieces = append(pieces, code[start:])
	}
	return pieces
}

// Extend prolongs the worker's lock to d from now, never moving it
// earlier: a stream keeps its tasks' locks further out than a worker's
// habit of extending by a few seconds would, and a lock pulled in under a
// live stream lapsed there, an attempt spent. It is also how a worker
// learns that its occurrence was cancelled (occurrence_cancelled).
func (e *Engine) Extend(ctx context.Context, ref WorkerRef, d time.Duration) (time.Time, error) {
	return e.lockFor(ctx, ref, d, false)
}

// SetLock sets the worker's lock to end d from now, earlier than it did
// if need be: Camunda's extendLock, and the facade's per-topic locks after
// a claim made with the longest.
func (e *Engine) SetLock(ctx context.Context, ref WorkerRef, d time.Duration) (time.Time, error) {
	return e.lockFor(ctx, ref, d, true)
}

func (e *Engine) lockFor(ctx context.Context, ref WorkerRef, d time.Duration, mayShorten bool) (time.Time, error) {
	var until time.Time
	err := e.withHeld(ctx, ref, func(q *queries.Queries, r *run, o queries.Occurrence) error {
		if o.Status == StatusDeferred {
			return fault.New(fault.Conflict, "not_reserved", "occurrence %s is deferred: it has no lock to extend; complete or fail it", o.ID)
		}
		if err := lockRefusal(o, ref, r.lockedAt); err != nil {
			return err
		}
		until = r.now.Add(d)
		if !mayShorten && o.LockExpiresAt != nil && o.LockExpiresAt.After(until) {
			until = *o.LockExpiresAt
		}
		// The attempt first: an extension must never revive a lock whose
		// attempt ended (see AttemptExtend), which would leave the
		// occurrence reserved to an attempt nobody can settle.
		n, err := q.AttemptExtend(ctx, queries.AttemptExtendParams{OccurrenceID: o.ID, Number: o.Attempts, LockExpiresAt: until})
		if err != nil {
			return err
		}
		if n == 0 {
			return explainLapse(ctx, q, o, fault.New(fault.Conflict, "lock_expired", "the lock on occurrence %s is gone: its attempt %d ended", o.ID, o.Attempts))
		}
		_, err = q.OccurrenceExtend(ctx, queries.OccurrenceExtendParams{ID: o.ID, LockExpiresAt: until})
		return err
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
	return fault.BoundExceeded("/"+field, field, c)
}

// Refusal is a request's refusal of its problems (nil when it has none):
// the ceilings passed alone are bound_exceeded naming the first's field
// and ceiling, every one at its pointer; with other problems it is
// invalid_request listing them all, the ceilings' among them, in pointer
// order, so that one round of corrections fixes the request. what names
// the request ("the fetch").
func Refusal(what string, errs []fault.FieldError, over []*fault.Error) error {
	if len(errs) == 0 && len(over) == 0 {
		return nil
	}
	if len(errs) == 0 {
		first := *over[0]
		first.Errors = slices.Clone(first.Errors)
		for _, o := range over[1:] {
			first.Errors = append(first.Errors, o.Errors...)
		}
		return &first
	}
	all := slices.Clone(errs)
	for _, o := range over {
		all = append(all, o.Errors...)
	}
	slices.SortStableFunc(all, func(a, b fault.FieldError) int { return jsontree.ComparePointers(a.Path, b.Path) })
	return fault.New(fault.BadRequest, "invalid_request", "%s is invalid", what).WithErrors(all)
}

// CeilingWith is over, a bound_exceeded refusal of a request's own
// members, joined by the problems a later check of the request found
// (err, when it is an invalid_request: what the database tells of its
// subscriptions), in one invalid_request; over alone otherwise.
func CeilingWith(what string, over *fault.Error, err error) error {
	if fe, ok := fault.As(err); ok && fe.Kind == fault.BadRequest {
		return Refusal(what, fe.Errors, []*fault.Error{over})
	}
	return over
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
