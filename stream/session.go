package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/internal/wake"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
)

// dueSlack is added to a due time before re-checking: due times come from
// the database clock and are announced to the millisecond (as in pull).
const dueSlack = 5 * time.Millisecond

// missedHeartbeats is how many heartbeats in a row a client may leave
// unacknowledged before its stream is ended.
const missedHeartbeats = 3

// resolveEvery is how many heartbeats pass between two resolutions of a
// stream's subscriptions against its grants (a pattern's new keys are
// picked up at once, from their first notification).
const resolveEvery = 6

// handBackTimeout bounds handing a stream's assignments back when it ends.
const handBackTimeout = 10 * time.Second

// Event kinds a session receives from other goroutines.
const (
	eventCancel     = iota // occurrence taken away (reason)
	eventSettled           // the worker settled attempt of occurrence
	eventReplaced          // a newer stream of the same worker connected
	eventDrain             // the client asked for no more assignments
	eventResolve           // resolve the subscriptions again
	eventRecheck           // notifications may have been missed
	eventReauth            // tokens were revoked: check the stream's
	eventRefillLost        // a settlement's refill (tag) may have committed unanswered
)

type event struct {
	kind       int
	occurrence uuid.UUID
	attempt    int
	reason     string
	// refilled says a settlement claimed for the stream in its own
	// transaction (see Service.complete); refill is what it claimed.
	refilled bool
	refill   []engine.Reservation
	// tag is the refill's tag (eventRefillLost).
	tag string
}

// Reasons a stream ends, as logged with worker.disconnected.
const (
	endClientLeft      = "client_left"
	endHeartbeatMissed = "heartbeat_missed"
	endSendFailed      = "send_failed"
	endReplaced        = "replaced"
	endReplicaStopping = "replica_stopping"
	endTokenRevoked    = "token_revoked"
	endNotGranted      = "not_granted"
	// endDatabaseUnavailable: this replica lost PostgreSQL (its probe
	// gets no answer) for longer than databaseLostAfter.
	endDatabaseUnavailable = "database_unavailable"
)

// loopStatementTimeout bounds a statement of a stream's loop (a keep-alive,
// a heartbeat's checks, asking when more is due, a resolution): a
// PostgreSQL that hangs before the probe finds it gone holds the loop, and
// its heartbeats, no longer.
const loopStatementTimeout = 5 * time.Second

// databaseLostAfter bounds how long a stream stays on a replica that
// cannot reach PostgreSQL, as a share of its lock duration: it can
// neither assign work nor keep the locks it holds alive, which lapse at
// their end; ended, its worker subscribes again, through another replica
// when one reaches the database (a partition that cut this one off), and
// resumes what it holds there before the locks lapse (chaos QA: a stream
// stayed pinned to such a replica and its work was redone). maxDatabaseLost
// bounds it for long locks.
const (
	databaseLostShare = 3
	maxDatabaseLost   = 15 * time.Second
)

// databaseLostAfter is how long a stream whose locks last lock waits for
// its replica's PostgreSQL before it ends.
func databaseLostAfter(lock time.Duration) time.Duration {
	return min(lock/databaseLostShare, maxDatabaseLost)
}

// session is one Subscribe stream. Its loop runs on the handler's
// goroutine and owns everything but the inbox and the acknowledged
// heartbeat, which other goroutines (notifications, unary calls) write.
type session struct {
	id         uuid.UUID
	consumerID int64
	// token authenticates the stream while it lives (see reauth); a
	// heartbeat acknowledged with another valid token of the consumer (a
	// rotation's new one) replaces it (see adopt).
	token       atomic.Pointer[string]
	workerID    string
	transport   string // its wire protocol, as connect-go names it
	subs        []engine.Subscription
	credit      int
	lock        time.Duration
	connectedAt time.Time
	// resumable: the worker resumes the stream's assignments on another
	// stream, so a stopping replica, or a newer stream of the worker, ends
	// this one leaving them locked (see end); resume is what it takes over
	// from a stream that ended, checked as it starts.
	resumable bool
	resume    []engine.Held

	pairs engine.Pairs
	held  map[uuid.UUID]int // occurrence → the attempt assigned
	// heldOf is each held occurrence's definition and revision: what a
	// narrowed grant may take away from the stream.
	heldOf map[uuid.UUID]heldPair
	seq    int64 // last heartbeat sent (-1 before the first)
	// Set by the registry under its lock.
	waiter    *wake.Waiter
	pairsSeen engine.Pairs
	keys      []string

	acked atomic.Int64
	// sent is seq for the other goroutines (Heartbeat calls): an
	// acknowledgement of a heartbeat not sent yet acknowledges nothing.
	sent   atomic.Int64
	mu     sync.Mutex
	inbox  []event
	closed bool // no event is taken any more
	signal chan struct{}
	// refill is what a settlement may claim for the stream (nil: nothing,
	// the stream drains or its last claim found the queue empty). The
	// runner publishes it; unary calls read it.
	refill atomic.Pointer[engine.ClaimRequest]
}

// post queues e for the runner; false once the stream has ended.
func (s *session) post(e event) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.inbox = append(s.inbox, e)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	return true
}

// requeue puts events back at the head of the inbox, for end to find.
func (s *session) requeue(events []event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inbox = append(slices.Clone(events), s.inbox...)
}

// close ends the inbox and returns what was left in it.
func (s *session) close() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	in := s.inbox
	s.inbox = nil
	return in
}

// refillFor is the claim a settlement of ref may make for s, in the slot
// the settlement frees, when work is known to wait; nil otherwise. The
// settlements of one group sharing it share one claim.
func (s *session) refillFor(ref engine.WorkerRef) *engine.ClaimRequest {
	if s == nil || s.consumerID != ref.ConsumerID || s.workerID != ref.WorkerID {
		return nil
	}
	return s.refill.Load()
}

func (s *session) take() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.inbox
	s.inbox = nil
	return in
}

// ack records that the client read heartbeat seq, and reports false for
// a heartbeat the stream never sent: taken, a client that sent a sequence
// far ahead once would never be found to have stopped reading, and would
// keep its assignments while it is stuck.
// currentToken is the token the stream lives by.
func (s *session) currentToken() string { return *s.token.Load() }

// adopt moves the stream to token, another token of its consumer that
// just authenticated one of its heartbeats: after a rotation with an
// overlap, a client that reads the new token acknowledges with it, and its
// stream then outlives the old one instead of ending, its assignments
// handed back (an attempt each), when the overlap ends.
func (s *session) adopt(token string) {
	if cur := s.token.Load(); cur == nil || *cur != token {
		s.token.Store(&token)
	}
}

func (s *session) ack(seq int64) bool {
	if seq < 0 || seq > s.sent.Load() {
		return false
	}
	for {
		cur := s.acked.Load()
		if seq <= cur || s.acked.CompareAndSwap(cur, seq) {
			return true
		}
	}
}

func (s *session) heldList() []engine.Held {
	out := make([]engine.Held, 0, len(s.held))
	for id, a := range s.held {
		out = append(out, engine.Held{Occurrence: id, Attempt: a})
	}
	return out
}

// subscribeParams are a validated SubscribeRequest.
type subscribeParams struct {
	workerID  string
	subs      []engine.Subscription
	credit    int
	lock      time.Duration
	resumable bool
	resume    []engine.Held
}

func (svc *Service) subscribeParams(m *workerv1.SubscribeRequest) (subscribeParams, error) {
	var errs []fault.FieldError
	if fe := checkWorkerID(m.GetWorkerId()); fe != nil {
		errs = append(errs, *fe)
	}
	if len(m.GetSubscriptions()) == 0 {
		errs = append(errs, fault.FieldError{Path: "/subscriptions", Message: "must list at least one definition"})
	}
	p := subscribeParams{workerID: m.GetWorkerId(), credit: int(m.GetMaxInFlight()), lock: svc.cfg.Pull.DefaultLockDuration,
		resumable: m.GetResumable()}
	for i, sub := range m.GetSubscriptions() {
		if sub.GetDefinition() == "" {
			errs = append(errs, fault.FieldError{Path: pointer("subscriptions", i, "definition"), Message: "is required"})
		}
		s := engine.Subscription{Definition: sub.GetDefinition()}
		for j, r := range sub.GetRevisions() {
			if r < 1 {
				errs = append(errs, fault.FieldError{Path: pointer("subscriptions", i, "revisions", j), Message: "must be a revision number (1 or more)"})
			}
			s.Revisions = append(s.Revisions, int(r))
		}
		if len(sub.GetFields()) > 0 {
			s.Fields = sub.GetFields()
		}
		p.subs = append(p.subs, s)
	}
	switch {
	case m.GetMaxInFlight() == 0:
		// Unset reads as 0 in protobuf: there is no default to fall back
		// on (stream client QA read "at least 1" as a value refused).
		errs = append(errs, fault.FieldError{Path: "/max_in_flight", Message: fmt.Sprintf("is required: how many unsettled assignments the stream may hold, 1 to %d", svc.cfg.Stream.MaxInFlight)})
	case m.GetMaxInFlight() < 1:
		errs = append(errs, fault.FieldError{Path: "/max_in_flight", Message: "must be at least 1: it is how many unsettled assignments the stream may hold"})
	}
	if d := m.GetLockDuration(); d != nil {
		if bad := invalidDuration("/lock_duration", d); bad != nil {
			errs = append(errs, bad.Errors...)
		} else if d.AsDuration() < engine.MinLockDuration {
			// A stream keeps its locks alive three times per duration, a
			// statement each time: the fetch's floor bounds that too.
			errs = append(errs, fault.FieldError{Path: "/lock_duration", Message: "must be at least " + isoduration.Format(engine.MinLockDuration) + ": the stream extends it three times per duration"})
		} else {
			p.lock = d.AsDuration()
		}
	}
	p.resume, errs = resumeList(m, errs)
	var over []*fault.Error
	if p.credit > svc.cfg.Stream.MaxInFlight {
		over = append(over, engine.BoundExceeded("max_in_flight", svc.cfg.Stream.MaxInFlight))
	}
	if p.lock > svc.cfg.Pull.MaxLockDuration {
		over = append(over, engine.BoundExceeded("lock_duration", svc.cfg.Pull.MaxLockDuration))
	}
	return p, engine.Refusal("the subscription", errs, over)
}

// resumeList reads the assignments a subscription resumes, adding what is
// wrong with them to errs.
func resumeList(m *workerv1.SubscribeRequest, errs []fault.FieldError) ([]engine.Held, []fault.FieldError) {
	if n := len(m.GetResume()); n > int(m.GetMaxInFlight()) && m.GetMaxInFlight() >= 1 {
		errs = append(errs, fault.FieldError{Path: "/resume", Message: fmt.Sprintf(
			"lists %d assignments, more than max_in_flight (%d): a stream holds no more than its credit", n, m.GetMaxInFlight())})
	}
	var out []engine.Held
	seen := map[uuid.UUID]bool{}
	for i, r := range m.GetResume() {
		id, err := uuid.Parse(r.GetOccurrenceId())
		switch {
		case r.GetOccurrenceId() == "":
			errs = append(errs, fault.FieldError{Path: pointer("resume", i, "occurrence_id"), Message: "is required"})
		case err != nil:
			errs = append(errs, fault.FieldError{Path: pointer("resume", i, "occurrence_id"), Message: "must be an occurrence id (a UUID), the Assignment's"})
		case seen[id]:
			errs = append(errs, fault.FieldError{Path: pointer("resume", i, "occurrence_id"), Message: "is listed twice"})
		}
		seen[id] = true
		if r.GetAttempt() < 1 {
			errs = append(errs, fault.FieldError{Path: pointer("resume", i, "attempt"), Message: "must be an attempt number (1 or more), the Assignment's attempt"})
		}
		out = append(out, engine.Held{Occurrence: id, Attempt: int(r.GetAttempt())})
	}
	return out, errs
}

// Subscribe serves one worker stream (DESIGN §10).
func (svc *Service) Subscribe(ctx context.Context, req *connect.Request[workerv1.SubscribeRequest], out *connect.ServerStream[workerv1.WorkerEvent]) error {
	const procedure = "Subscribe"
	// Refused at once while the replica's probe gets no answer, and cut
	// short if it stops getting one before the stream is accepted.
	setup, endSetup := svc.health.whileAnswered(ctx)
	defer endSetup()
	if svc.health.down.Load() {
		return svc.refuseSetup(setup, pgfault.Unavailable(pgfault.ErrUnresponsive))
	}
	principal, token, err := svc.consumer(setup, req.Header())
	if err != nil {
		return svc.refuseSetup(setup, err)
	}
	p, err := svc.subscribeParams(req.Msg)
	over, _ := fault.As(err)
	if err != nil && (over == nil || over.Code != "bound_exceeded") {
		return svc.refuseSetup(setup, err)
	}
	pairs, err := svc.eng.ResolveSubscriptions(setup, principal.ConsumerID, p.subs)
	if over != nil {
		// With the subscriptions' problems the database tells, in one
		// answer, as a fetch's.
		return svc.refuseSetup(setup, engine.CeilingWith("the subscription", over, err))
	}
	if err != nil {
		return svc.refuseSetup(setup, err)
	}
	s := &session{id: uuid.Must(uuid.NewV7()), consumerID: principal.ConsumerID, workerID: p.workerID, transport: req.Peer().Protocol, subs: p.subs,
		credit: p.credit, lock: p.lock, connectedAt: time.Now(), pairs: pairs, pairsSeen: pairs, held: map[uuid.UUID]int{},
		heldOf: map[uuid.UUID]heldPair{}, resumable: p.resumable, resume: p.resume,
		signal: make(chan struct{}, 1)}
	s.token.Store(&token)
	s.acked.Store(-1)
	s.seq = -1 // the first heartbeat, sent at once, is 0
	s.sent.Store(-1)
	replaced, err := svc.reg.admit(s)
	if err != nil {
		return toConnect(ctx, svc.logger, procedure, err)
	}
	defer svc.reg.remove(s)
	if replaced != nil {
		replaced.post(event{kind: eventReplaced})
	}
	// A stream of this worker on another replica ends too.
	if err := svc.eng.SignalWorkers(setup, engine.WorkerSignal{Kind: engine.SignalTakeover, Stream: s.id,
		ConsumerID: s.consumerID, WorkerID: s.workerID}); err != nil {
		return svc.refuseSetup(setup, err)
	}
	r := &runner{svc: svc, s: s, out: out, rc: responseController(ctx), tokenExpiry: time.NewTimer(time.Hour)}
	r.tokenExpiry.Stop()
	defer r.tokenExpiry.Stop()
	r.expireAt(principal.ExpiresAt)
	return r.run(ctx, setup, endSetup)
}

// refuseSetup answers a Subscribe refused before its first heartbeat as
// toConnect does, a database out of reach said in a stream's words: the
// REST routes' advice on repeating a write as sent is no Subscribe's
// (verifier QA).
func (svc *Service) refuseSetup(setup context.Context, err error) error {
	if cut := pgfault.CutShort(setup); cut != nil {
		err = cut
	}
	if fe, ok := fault.As(err); ok && fe.Code == pgfault.UnavailableCode {
		out := *fe
		out.Detail = "this replica cannot reach PostgreSQL right now, and the stream was not opened (nothing was assigned to it): subscribe again shortly, through another replica if you have several"
		err = &out
	}
	return connectError(setup, svc.logger, "Subscribe", err)
}

// runner drives one session's loop.
type runner struct {
	svc *Service
	s   *session
	out *connect.ServerStream[workerv1.WorkerEvent]
	rc  *http.ResponseController

	draining bool
	dirty    bool
	// due fires at dueAt, the earliest time something is known to become
	// claimable (a retry delay, a lock ending).
	due   *time.Timer
	dueAt time.Time
	// recheckDue is set when the due timer fired: the timer kept only the
	// earliest due time, so the claim it leads to asks the database for
	// the next one (other retries may have been announced meanwhile).
	recheckDue bool
	beats      int
	// holdOff, when set, is when the stream may claim again: a claim this
	// replica could not deliver was handed back, and the hand-back's
	// notification would otherwise make it claim the same tasks in a loop.
	holdOff time.Time
	// retry is how long the stream waited before asking again after its
	// last claim failed for the database's absence: doubled at each such
	// failure up to the heartbeat, zero after a claim that worked.
	retry time.Duration
	// claims numbers the stream's claims, each tagged with its number
	// (claimTag); lostClaim is the tag of one that failed for the
	// database's absence: its COMMIT may have reserved tasks whose answer
	// never came back, so the next claim asks again under that tag,
	// replaying them, rather than leave them reserved to this worker,
	// undelivered, until their locks lapse and an attempt is spent.
	claims    uint64
	lostClaim string
	// lostRefills are the tags of refills (see Service.complete) whose
	// settlement's COMMIT answer was lost (engine.RefillUnanswered): the
	// next claim asks for what they reserved, as for lostClaim. Each tag
	// names one refill statement's rows (the engine makes the published
	// request's tag unique to it), none of which the stream received.
	lostRefills []string
	// tokenExpiry fires when the stream's token expires (its own end, or
	// a rotation's overlap), to check it then: the heartbeat's check came
	// up to an interval late, the stream handed new work, secrets in
	// clear, to a token past its end (security QA).
	tokenExpiry *time.Timer
}

// expireAt arms tokenExpiry for at, a token's end (nil: none).
func (r *runner) expireAt(at *time.Time) {
	r.tokenExpiry.Stop()
	if at != nil {
		// A token read as valid at or past its end (clocks a hair apart)
		// is checked again a second later rather than at once, in a loop.
		r.tokenExpiry.Reset(max(at.Sub(r.svc.eng.Now()), time.Second))
	}
}

// claimTag is the request_id a stream's claim tags its rows with.
func (r *runner) claimTag() string {
	r.claims++
	return r.s.id.String() + "/" + strconv.FormatUint(r.claims, 10)
}

// wakeAt arms the due timer for at, unless it is armed for sooner.
func (r *runner) wakeAt(at time.Time) {
	if !r.dueAt.IsZero() && !at.Before(r.dueAt) {
		return
	}
	r.dueAt = at
	r.due.Reset(max(time.Until(at), time.Millisecond))
}

// run serves the stream; setup is ctx for the statements that come before
// its first heartbeat (see health.whileAnswered).
func (r *runner) run(ctx, setup context.Context, endSetup func()) error {
	svc, s := r.svc, r.s
	if _, err := svc.eng.SeeStream(setup, r.presence()); err != nil {
		return svc.refuseSetup(setup, err)
	}
	svc.eng.LogWorker(engine.EventWorkerConnected, engine.ProtocolStream, s.consumerID, s.workerID, svc.eng.Replica(),
		"stream", s.id, "transport", s.transport, "max_in_flight", s.credit, "definitions", len(s.keys))
	reason := endClientLeft
	defer func() { r.end(ctx, reason) }()

	resumed, err := r.takeOver(setup)
	if err != nil {
		return svc.refuseSetup(setup, err)
	}
	// Accepted: from its first heartbeat on, the loop's rules hold.
	endSetup()
	if err := r.heartbeat(resumed...); err != nil {
		reason = endSendFailed
		return nil
	}
	if len(resumed) > 0 {
		// Resumed under the grants of the stream that ended: what this
		// one's no longer grants goes back, the worker told.
		if err := r.handBackUngranted(ctx); err != nil {
			reason = endSendFailed
			return nil
		}
	}
	heartbeat := svc.cfg.Stream.Heartbeat
	keepAlive := time.NewTicker(min(heartbeat, s.lock/3))
	defer keepAlive.Stop()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	r.due = time.NewTimer(time.Hour)
	r.due.Stop()
	defer r.due.Stop()
	// The first claim asks when more is due unless it fills the credit:
	// a retry announced before the stream opened was otherwise pushed at
	// its first keep-alive.
	r.dirty, r.recheckDue = true, true
	// closing is the replica's stop, heard once; stopping says it was,
	// grace when the assignments still held are handed back.
	closing := svc.reg.closing
	stopping := false
	var grace <-chan time.Time
	// lost is armed while the replica's probe gets no answer from
	// PostgreSQL, to end the stream at databaseLostAfter.
	var lost *time.Timer
	for {
		// A stop heard before this iteration's claim: select picks at
		// random among ready cases, and the claim below runs before it.
		if closing != nil && svc.reg.isClosed() {
			r.dirty = false
		}
		if stopping && len(s.held) == 0 {
			reason = endReplicaStopping
			return r.stopped()
		}
		if r.dirty && !r.draining && len(s.held) < s.credit {
			// Events posted before this claim (a Drain, say) come first:
			// select picks at random among ready cases, so the wake-up
			// that led here may have been taken before them.
			select {
			case <-s.signal:
				if why, err := r.handle(ctx, s.take()); why != "" {
					reason = why
					return err
				}
			default:
			}
		}
		// A claim waits for no database the probe finds gone: the loop
		// must go on beating (and the claim is made once it answers).
		if r.dirty && !r.draining && len(s.held) < s.credit && !time.Now().Before(r.holdOff) && !svc.health.down.Load() {
			if err := r.claim(ctx); err != nil {
				if ctx.Err() == nil {
					reason = endSendFailed
				}
				return nil
			}
		}
		if r.dirty && time.Now().Before(r.holdOff) {
			r.wakeAt(r.holdOff) // the claim held off comes then
		}
		r.publishRefill()
		if hook := beforeWait.Load(); hook != nil {
			(*hook)(s.workerID)
		}
		var wentDown <-chan struct{}
		var lostC <-chan time.Time
		if lost == nil {
			wentDown = svc.health.downSignal()
		} else {
			lostC = lost.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.tokenExpiry.C:
			if why, err := r.reauth(ctx); why != "" {
				reason = why
				return err
			}
		case <-wentDown:
			lost = time.NewTimer(max(0, databaseLostAfter(s.lock)-svc.health.databaseDownFor()))
		case <-lostC:
			lost = nil
			if down := svc.health.databaseDownFor(); down >= databaseLostAfter(s.lock) {
				reason = endDatabaseUnavailable
				return r.databaseLost(down)
			}
			// Back meanwhile, or lost again since: wentDown says which.
		case <-closing:
			// The replica stops: no more assignments, and the worker may
			// settle those it holds (their locks kept alive) until the
			// grace ends, rather than have work in progress thrown away.
			// What it still holds then is handed back, released. A
			// resumable stream ends at once instead, its assignments left
			// locked: its worker resumes them on another stream, where new
			// work comes too, rather than wait for this one's grace.
			closing, stopping = nil, true
			if len(s.held) == 0 || s.resumable {
				reason = endReplicaStopping
				return r.stopped()
			}
			if !r.draining {
				r.draining = true
				s.refill.Store(nil)
				// Marks the end of the assignments, as a worker's Drain.
				if err := r.heartbeat(); err != nil {
					reason = endReplicaStopping
					return r.stopped()
				}
			}
			t := time.NewTimer(svc.reg.graceTime())
			defer t.Stop()
			grace = t.C
		case <-grace:
			reason = endReplicaStopping
			return r.stopped()
		case at := <-s.waiter.C():
			// Only a time still ahead is waited for (with the slack): an
			// occurrence announced as available now is claimed at once.
			if !at.IsZero() && time.Until(at) > 0 {
				// Announced for later (a retry delay).
				r.wakeAt(at.Add(dueSlack))
			} else {
				r.dirty = true
			}
			if later := s.waiter.Later(); !later.IsZero() {
				r.wakeAt(later.Add(dueSlack))
			}
		case <-r.due.C:
			r.dueAt = time.Time{}
			r.dirty, r.recheckDue = true, true
		case <-s.signal:
			// Only an ending replaces the reason: a client that leaves
			// later has still left.
			if why, err := r.handle(ctx, s.take()); why != "" {
				reason = why
				return err
			}
		case <-keepAlive.C:
			if err := r.keepAlive(ctx); err != nil {
				if ctx.Err() == nil {
					reason = endSendFailed
				}
				return nil
			}
			// Notifications are hints: this is also the fallback poll.
			r.dirty = true
		case <-beat.C:
			if why, err := r.beat(ctx); why != "" {
				reason = why
				return err
			}
		}
	}
}

// publishRefill lets settlements claim for the stream while work is known
// to wait (as dirty says) and the stream takes more.
func (r *runner) publishRefill() {
	s := r.s
	if !r.dirty || r.draining || len(s.pairs.Keys) == 0 {
		s.refill.Store(nil)
		return
	}
	if s.refill.Load() != nil {
		return // resolve clears it when the pairs change
	}
	s.refill.Store(&engine.ClaimRequest{ConsumerID: s.consumerID, WorkerID: s.workerID, Pairs: s.pairs, MaxTasks: 1, LockDuration: s.lock,
		RequestID: r.claimTag(), TagOnly: true})
}

// presence is s as the catalog records it.
func (r *runner) presence() engine.StreamPresence {
	s := r.s
	return engine.StreamPresence{ID: s.id, ConsumerID: s.consumerID, WorkerID: s.workerID, Transport: s.transport, Subscriptions: s.subs, Pairs: s.pairs,
		ConnectedAt: s.connectedAt, LiveFor: engine.LiveHeartbeats * r.svc.cfg.Stream.Heartbeat}
}

// claim fills the stream's free credit with claimable occurrences and
// pushes them. Only a failed send is returned: a database error is logged
// and retried at the next keep-alive, or after a backoff when the database
// did not answer.
func (r *runner) claim(ctx context.Context) error {
	svc, s := r.svc, r.s
	r.dirty = false
	if err := r.recoverRefills(ctx); err != nil {
		return err
	}
	want := s.credit - len(s.held)
	if want <= 0 {
		return nil // filled by what was recovered
	}
	// A claim that began finishes even if the client leaves meanwhile, so
	// that what it reserved is known and handed back.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	mark := svc.eng.ClaimMark()
	req := engine.ClaimRequest{ConsumerID: s.consumerID, WorkerID: s.workerID, Pairs: s.pairs, MaxTasks: want, LockDuration: s.lock,
		RequestID: r.lostClaim, TagOnly: r.lostClaim == "", Recover: r.lostClaim != ""}
	if req.TagOnly {
		req.RequestID = r.claimTag()
	}
	got, err := svc.eng.Claim(cctx, req)
	if lose := loseClaimAnswer.Load(); lose != nil && err == nil && len(got) > 0 && (*lose)(s.workerID) {
		got, err = nil, pgfault.Unavailable(errors.New("test: the claim's COMMIT answer was lost"))
	}
	switch {
	case err == nil:
		if r.lostClaim != "" && len(got) > 0 {
			svc.logger.Info("stream claim recovered: what a claim reserved as the database went away is delivered", "stream", s.id, "tasks", len(got))
		}
		r.lostClaim = ""
	case pgfault.Unreachable(err):
		r.lostClaim = req.RequestID
	case fault.HasCode(err, "data_key_missing"):
		// What the tag named was handed back (Recover).
		r.lostClaim = ""
	}
	if fault.HasCode(err, "not_granted") {
		// Its grants changed since it resolved them: resolving again ends
		// the stream, or narrows it to what is still granted.
		s.post(event{kind: eventResolve})
		return nil
	}
	if fault.HasCode(err, "data_key_missing") {
		// Handed back, no attempt spent: try again in a second, not at the
		// hand-back's own notification.
		r.dirty = true
		r.holdOff = time.Now().Add(time.Second)
		r.wakeAt(r.holdOff)
		svc.logger.Warn("stream claim undeliverable; retrying in 1s", "stream", s.id, "err", err)
		return nil
	}
	if err != nil {
		if ctx.Err() == nil {
			svc.logger.Warn("stream claim failed; retrying", "stream", s.id, "err", err)
		}
		if pgfault.Unreachable(err) {
			// A database back before the probe saw it go (a restart
			// between two pings) wakes nobody: the stream asks again
			// after a backoff, not at its next keep-alive tick.
			r.retry = min(max(2*r.retry, time.Second), svc.cfg.Stream.Heartbeat)
			r.dirty = true
			r.holdOff = time.Now().Add(r.retry)
			r.wakeAt(r.holdOff)
		}
		return nil
	}
	r.retry = 0
	for _, g := range got {
		s.held[g.ID] = g.Attempt
		s.heldOf[g.ID] = heldPair{g.Definition, g.Revision}
		svc.reg.hold(s, g.ID)
	}
	svc.claimed.Add(float64(len(got)))
	if len(got) == want {
		// There may be more: ask again once a slot frees, and let the
		// completions of these assignments ask (published before they are
		// sent, so that the first completion finds it).
		r.dirty = true
		r.publishRefill()
	}
	for _, g := range got {
		if err := r.send(&workerv1.WorkerEvent{Event: &workerv1.WorkerEvent_Assignment{Assignment: assignment(g)}}); err != nil {
			return err
		}
	}
	if len(got) == 0 || (r.recheckDue && len(got) < want) {
		r.recheckDue = false
		if hook := emptyClaimed.Load(); hook != nil && len(got) == 0 {
			(*hook)(s.workerID)
		}
		// Bounded as the loop's other statements: a PostgreSQL that hangs
		// right after the claim answered would hold the loop for good.
		nctx, cancel := context.WithTimeout(ctx, loopStatementTimeout)
		due, ok, err := svc.eng.NextClaimable(nctx, s.pairs, mark)
		cancel()
		if err == nil && ok {
			r.wakeAt(due.Add(dueSlack))
		}
	}
	return nil
}

// handle processes events posted to the session. It returns a reason when
// the stream must end, and the error to end it with.
func (r *runner) handle(ctx context.Context, events []event) (reason string, err error) {
	s := r.s
	i := 0
	defer func() {
		if reason != "" && i+1 < len(events) {
			// The stream ends: the refills of the events left are handed
			// back with the inbox (see end).
			s.requeue(events[i+1:])
		}
	}()
	for ; i < len(events); i++ {
		e := events[i]
		switch e.kind {
		case eventCancel:
			if _, ok := s.held[e.occurrence]; ok {
				r.forget(e.occurrence)
				if err := r.cancellation(e.occurrence, e.reason); err != nil {
					return endSendFailed, nil
				}
			}
		case eventSettled:
			if a, ok := s.held[e.occurrence]; ok && a == e.attempt {
				r.forget(e.occurrence)
			}
			if e.refilled {
				if err := r.refilled(ctx, e.refill); err != nil {
					return endSendFailed, nil
				}
			}
		case eventReplaced:
			if s.resumable {
				return endReplaced, problemError(fault.New(fault.Conflict, "stream_replaced",
					"another stream of worker %q connected; this one ended, its assignments left to it to resume (two processes must not share a worker_id)", s.workerID))
			}
			return endReplaced, problemError(fault.New(fault.Conflict, "stream_replaced",
				"another stream of worker %q connected; this one ended and its assignments were handed back (two processes must not share a worker_id)", s.workerID))
		case eventDrain:
			if !r.draining {
				r.draining = true
				// Marks the end of the assignments: the client that reads
				// it has every one, and may release and close.
				if err := r.heartbeat(); err != nil {
					return endSendFailed, nil
				}
			}
		case eventResolve:
			if reason, err := r.resolve(ctx); reason != "" {
				return reason, err
			}
		case eventRecheck:
			r.dirty = true
		case eventReauth:
			if reason, err := r.reauth(ctx); reason != "" {
				return reason, err
			}
		case eventRefillLost:
			if !slices.Contains(r.lostRefills, e.tag) {
				r.lostRefills = append(r.lostRefills, e.tag)
			}
			r.dirty = true
			if r.draining {
				// No claim comes while the stream drains: asked again
				// now, what the refill reserved is handed back (refilled).
				if err := r.recoverRefills(ctx); err != nil {
					return endSendFailed, nil
				}
			}
		}
	}
	return "", nil
}

// recoverRefills asks again for what the refills of lostRefills reserved
// (each tag names one claim's rows, delivered to nobody): it is delivered
// as a refill is (up to the credit, the rest handed back, all of it while
// the stream drains). A tag whose asking fails for the database's absence
// is kept for the next claim; one refused otherwise is handed back.
func (r *runner) recoverRefills(ctx context.Context) error {
	svc, s := r.svc, r.s
	for len(r.lostRefills) > 0 {
		tag := r.lostRefills[0]
		got, err := r.askAgain(ctx, tag)
		if pgfault.Unreachable(err) {
			return nil
		}
		r.lostRefills = r.lostRefills[1:]
		if err != nil {
			continue
		}
		if len(got) > 0 {
			svc.logger.Info("stream refill recovered: what a settlement claimed as the database went away is delivered", "stream", s.id, "tasks", len(got))
		}
		if err := r.refilled(ctx, got); err != nil {
			return err
		}
	}
	return nil
}

// askAgain replays what the refill claim tagged tag reserved; a refusal
// other than the database's absence hands it back (given back rather than
// left to its locks, an attempt each).
func (r *runner) askAgain(ctx context.Context, tag string) ([]engine.Reservation, error) {
	svc, s := r.svc, r.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	// MaxTasks 0: only the replay, never a new claim under the tag.
	got, err := svc.eng.Claim(ctx, engine.ClaimRequest{ConsumerID: s.consumerID, WorkerID: s.workerID, Pairs: s.pairs,
		LockDuration: s.lock, RequestID: tag, Recover: true})
	if err != nil && !pgfault.Unreachable(err) {
		svc.logger.Warn("asking again for a lost refill failed; handing it back", "stream", s.id, "err", err)
		if _, err := svc.eng.HandBackTagged(ctx, s.consumerID, s.workerID, tag); err != nil {
			svc.logger.Warn("handing back what a lost refill reserved failed; its locks lapse instead", "stream", s.id, "err", err)
		}
	}
	return got, err
}

// refilled takes what a settlement claimed for the stream: it holds and
// pushes what its credit allows, and hands the rest back (the slot was
// filled meanwhile, or the stream drains). An empty claim changes nothing:
// with a slot free and work thought to wait, the runner claims itself, and
// its empty claim is what stops the refills (a wake-up that came since the
// settlement's claim must not be forgotten).
func (r *runner) refilled(ctx context.Context, got []engine.Reservation) error {
	svc, s := r.svc, r.s
	var extra, take []engine.Reservation
	for _, g := range got {
		if r.draining || len(s.held) >= s.credit {
			extra = append(extra, g)
			continue
		}
		// Held before it is sent: if a send fails, the stream's end hands
		// back all it holds.
		s.held[g.ID] = g.Attempt
		s.heldOf[g.ID] = heldPair{g.Definition, g.Revision}
		svc.reg.hold(s, g.ID)
		take = append(take, g)
	}
	svc.handBack(ctx, s.consumerID, s.workerID, extra)
	svc.claimed.Add(float64(len(take)))
	for _, g := range take {
		if err := r.send(&workerv1.WorkerEvent{Event: &workerv1.WorkerEvent_Assignment{Assignment: assignment(g)}}); err != nil {
			return err
		}
	}
	return nil
}

// forget drops an occurrence the stream no longer holds, freeing its
// credit. The freed slot is filled at once if work is known to wait (a
// wake-up came while the stream was full, or its last claim was full):
// dirty says so. Claiming on every settlement regardless would cost an
// empty claim per settlement whenever the queue is empty.
func (r *runner) forget(id uuid.UUID) {
	delete(r.s.held, id)
	delete(r.s.heldOf, id)
	r.svc.reg.drop(r.s, id)
}

// heldPair is the definition and revision of a held occurrence.
type heldPair struct {
	key      string
	revision int
}

// keepAlive extends every held lock in one statement and pushes a
// cancellation for what was taken away meanwhile.
func (r *runner) keepAlive(ctx context.Context) error {
	s := r.s
	if len(s.held) == 0 || r.svc.health.down.Load() {
		return nil // nothing to keep, or no database to keep it in
	}
	ctx, cancel := context.WithTimeout(ctx, min(loopStatementTimeout, databaseLostAfter(s.lock)))
	defer cancel()
	states, err := r.svc.eng.KeepAlive(ctx, s.consumerID, s.workerID, s.heldList(), s.lock)
	if err != nil {
		if ctx.Err() == nil {
			r.svc.logger.Warn("stream keep-alive failed; retrying", "stream", s.id, "err", err)
		}
		return nil
	}
	for _, st := range states {
		if st.Kept || s.held[st.Occurrence] != st.Attempt {
			continue
		}
		r.forget(st.Occurrence)
		if st.Gone != "" {
			if err := r.cancellation(st.Occurrence, st.Gone); err != nil {
				return err
			}
		}
	}
	return nil
}

// beat sends a heartbeat, ends a stream whose client stopped reading,
// refreshes the catalog, and checks the token and the subscriptions.
func (r *runner) beat(ctx context.Context) (string, error) {
	svc, s := r.svc, r.s
	// The client acknowledged none of the last missedHeartbeats sent.
	if s.seq-s.acked.Load() >= missedHeartbeats {
		return endHeartbeatMissed, problemError(fault.New(fault.Unavailable, "heartbeat_missed",
			"the client acknowledged none of the last %d heartbeats (WorkerService.Heartbeat with the sequence read); the stream ended and its assignments were handed back", missedHeartbeats))
	}
	if err := r.heartbeat(); err != nil {
		return endSendFailed, nil
	}
	if svc.health.down.Load() {
		// The token, the grants and the catalog row are checked at the
		// next heartbeat with a database: waiting here for one that
		// does not answer would stop the heartbeats (verifier QA: a hung
		// PostgreSQL left streams silent until their clients gave up).
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, loopStatementTimeout)
	defer cancel()
	if reason, err := r.reauth(ctx); reason != "" {
		return reason, err
	}
	r.beats++
	if r.beats%resolveEvery == 0 {
		if reason, err := r.resolve(ctx); reason != "" {
			return reason, err
		}
	}
	switch back, err := svc.eng.SeeStream(ctx, r.presence()); {
	case err != nil && ctx.Err() == nil:
		svc.logger.Warn("refreshing the stream's catalog row failed", "stream", s.id, "err", err)
	case back:
		// A replica pruned the row while this one could not refresh it,
		// and logged the worker disconnected: it never was.
		svc.eng.LogWorker(engine.EventWorkerConnected, engine.ProtocolStream, s.consumerID, s.workerID, svc.eng.Replica(),
			"stream", s.id, "reason", "back in the catalog after its row lapsed")
	}
	return "", nil
}

// reauth ends the stream when its token no longer authenticates (revoked,
// rotated, expired). A lookup that fails otherwise (the database) leaves it
// to the next heartbeat.
func (r *runner) reauth(ctx context.Context) (string, error) {
	p, err := auth.Authenticate(ctx, r.svc.lookup, r.s.currentToken())
	if err == nil {
		// A rotation with an overlap gave it an end: checked then.
		r.expireAt(p.ExpiresAt)
		return "", nil
	}
	if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized {
		// Said as a stream's end, not as a refused call: the same words
		// read as a subscription refused (stream client QA).
		ended := *fe
		ended.Detail = "the stream's token no longer authenticates (revoked, rotated past its overlap, or expired): the stream ended and what it held was handed back; subscribe again with a valid token"
		return endTokenRevoked, problemError(&ended)
	}
	return "", nil
}

// resolve resolves the subscriptions again: a pattern's new keys, a new
// revision, changed grants. A subscription no longer granted ends the
// stream, as a fetch would be refused.
func (r *runner) resolve(ctx context.Context) (string, error) {
	svc, s := r.svc, r.s
	rctx, cancel := context.WithTimeout(ctx, loopStatementTimeout)
	pairs, err := svc.eng.ResolveSubscriptionsLoosely(rctx, s.consumerID, s.subs)
	cancel()
	if err != nil {
		// Only the grants' answer ends the stream: a database out of
		// reach (Unavailable) says nothing of them, and the next
		// resolution tries again.
		if fe, ok := fault.As(err); ok && fe.Kind != fault.Internal && fe.Kind != fault.Unavailable {
			ended := *fe
			ended.Detail += ": the stream ended and what it held was handed back; subscribe again to what is granted"
			return endNotGranted, problemError(&ended)
		}
		if ctx.Err() == nil {
			svc.logger.Warn("resolving the stream's subscriptions failed", "stream", s.id, "err", err)
		}
		return "", nil
	}
	s.pairs = pairs
	s.refill.Store(nil)
	svc.reg.resolved(s, pairs)
	r.dirty = true
	if err := r.handBackUngranted(ctx); err != nil {
		return endSendFailed, nil
	}
	return "", nil
}

// handBackUngranted hands back, without spending an attempt, what the
// stream holds of a definition or revision its consumer is no longer
// granted (a pattern's grant narrowed): its worker could settle none of
// it (404, as for an unknown id), and the stream's keep-alives would hold
// it from the workers now granted it for as long as the stream lives.
// The worker is told each is taken away.
func (r *runner) handBackUngranted(ctx context.Context) error {
	s := r.s
	var gone []engine.Held
	for id, a := range s.held {
		if p, ok := s.heldOf[id]; ok && !s.pairs.Matches(p.key, p.revision) {
			gone = append(gone, engine.Held{Occurrence: id, Attempt: a})
		}
	}
	if len(gone) == 0 {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, loopStatementTimeout)
	defer cancel()
	handed, err := r.svc.eng.HandBack(hctx, s.consumerID, s.workerID, gone, true)
	if err != nil {
		if ctx.Err() == nil {
			r.svc.logger.Warn("handing back what the stream's consumer is no longer granted failed; the next resolution tries again", "stream", s.id, "err", err)
		}
		return nil
	}
	for _, h := range handed {
		r.forget(h.Occurrence)
		if err := r.cancellation(h.Occurrence, engine.CancelLockLost); err != nil {
			return err
		}
	}
	r.svc.logger.Info("stream handed back what its consumer is no longer granted", "stream", s.id, "handed_back", len(handed))
	return nil
}

// heartbeat sends the next heartbeat; the first names what the stream
// resumed.
func (r *runner) heartbeat(resumed ...string) error {
	s := r.s
	s.seq++
	s.sent.Store(s.seq)
	return r.send(&workerv1.WorkerEvent{Event: &workerv1.WorkerEvent_Heartbeat{Heartbeat: &workerv1.Heartbeat{
		ServerTime: timestamppb.Now(), Sequence: s.seq, StreamId: s.id.String(), InFlight: int32(len(s.held)),
		Interval: durationpb.New(r.svc.cfg.Stream.Heartbeat), Draining: r.draining, Resumed: resumed}}})
}

// takeOver holds, as the stream's own, the assignments the subscription
// resumes that are still the worker's at their attempt, their locks not
// lapsed (extended in the same statement), and returns their ids. A
// failure to check them fails the subscription: the worker, told nothing
// was resumed, would give up work it still holds.
func (r *runner) takeOver(ctx context.Context) ([]string, error) {
	svc, s := r.svc, r.s
	if len(s.resume) == 0 {
		return nil, nil
	}
	states, err := svc.eng.KeepAlive(ctx, s.consumerID, s.workerID, s.resume, s.lock)
	if err != nil {
		return nil, err
	}
	var later []fault.FieldError
	for _, st := range states {
		if !st.Kept && st.Current > 0 && st.Attempt > st.Current {
			i := slices.IndexFunc(s.resume, func(h engine.Held) bool { return h.Occurrence == st.Occurrence })
			// An attempt it never had: left unresumed, the task would stay
			// locked to the worker, kept by no stream, until its lock
			// lapsed and spent the attempt (stream-client QA). Complete
			// refuses the same mistake at /attempt.
			later = append(later, fault.FieldError{Path: pointer("resume", i, "attempt"),
				Message: fmt.Sprintf("occurrence %s has had no attempt %d (it is at attempt %d, the Assignment's)", st.Occurrence, st.Attempt, st.Current)})
		}
	}
	if len(later) > 0 {
		return nil, fault.New(fault.BadRequest, "invalid_request", "resume names attempts its occurrences never had").WithErrors(later)
	}
	var resumed []string
	for _, st := range states {
		if !st.Kept {
			continue
		}
		s.held[st.Occurrence] = st.Attempt
		s.heldOf[st.Occurrence] = heldPair{st.Definition, st.Revision}
		svc.reg.hold(s, st.Occurrence)
		resumed = append(resumed, st.Occurrence.String())
	}
	svc.logger.Info("stream resumed assignments of an earlier stream", "stream", s.id, "worker_id", s.workerID,
		"asked", len(s.resume), "resumed", len(resumed))
	return resumed, nil
}

func (r *runner) cancellation(id uuid.UUID, reason string) error {
	return r.send(&workerv1.WorkerEvent{Event: &workerv1.WorkerEvent_Cancellation{Cancellation: &workerv1.Cancellation{
		OccurrenceId: id.String(), Reason: cancellationReason(reason)}}})
}

// send pushes one event. A client that does not read lets the transport's
// flow control fill up: the write then blocks, and the deadline ends it.
func (r *runner) send(e *workerv1.WorkerEvent) error {
	if r.rc != nil {
		_ = r.rc.SetWriteDeadline(time.Now().Add(r.svc.sendTimeout()))
		defer func() { _ = r.rc.SetWriteDeadline(time.Time{}) }()
	}
	return r.out.Send(e)
}

// end hands back what the stream still holds and forgets it: released
// (attempt given back) when this replica stops or the stream's token or
// grant ends, disconnected (the attempt counts) otherwise. A resumable stream that this replica's stop or a
// newer stream of its worker ends leaves it locked instead, for the worker
// to resume: the locks run a lock duration from their last extension.
func (r *runner) end(ctx context.Context, reason string) {
	svc, s := r.svc, r.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	// failed logs what could not be done; without a database, that is
	// all of it, and expected: one line says so (verifier QA: a warning
	// each), at the end below.
	cut := svc.health.down.Load()
	failed := func(level slog.Level, msg string, args ...any) {
		if cut {
			level = slog.LevelDebug
		}
		svc.logger.Log(ctx, level, msg, args...)
	}
	if cut {
		// No database answers the probe: the statements below would
		// hold the stream's end, and its worker, until their timeout
		// (verifier QA). Cut at once, they fail: what the stream held
		// lapses at its lock's end (or is left to resume), its catalog
		// row is pruned once no longer live.
		cancel()
	}
	// Refills posted after the runner stopped reading were never seen by
	// the worker: released, as a replica stopping releases.
	var unseen []engine.Reservation
	for _, e := range s.close() {
		unseen = append(unseen, e.refill...)
		if e.kind == eventRefillLost && !slices.Contains(r.lostRefills, e.tag) {
			// Posted, never handled: handed back below.
			r.lostRefills = append(r.lostRefills, e.tag)
		}
	}
	unseenBack := svc.handBack(ctx, s.consumerID, s.workerID, unseen)
	if r.lostClaim != "" {
		// A claim whose COMMIT answer was lost, not asked again before
		// the end: what it reserved was never delivered.
		n, err := svc.eng.HandBackTagged(ctx, s.consumerID, s.workerID, r.lostClaim)
		if err != nil {
			failed(slog.LevelWarn, "handing back what a lost claim reserved failed; its locks lapse instead", "stream", s.id, "err", err)
		}
		unseenBack += n
	}
	// Ended by Relais or an administrator rather than by the worker or its
	// task (a replica stopping, a token revoked or rotated past its
	// overlap, a grant withdrawn): the attempt is given back, as a grant
	// narrowed under a live stream gives it back (handBackUngranted);
	// counted, an occurrence on its last attempt failed for an admin's
	// action.
	release := reason == endReplicaStopping || reason == endTokenRevoked || reason == endNotGranted
	var handed, left []engine.Held
	switch {
	case s.resumable && (reason == endReplicaStopping || reason == endReplaced || reason == endDatabaseUnavailable):
		left = s.heldList()
	default:
		if release {
			// Tell the worker before the stream ends (best effort).
			for id := range s.held {
				if r.cancellation(id, engine.CancelLockLost) != nil {
					break
				}
			}
		}
		var err error
		handed, err = svc.eng.HandBack(ctx, s.consumerID, s.workerID, s.heldList(), release)
		if err != nil {
			failed(slog.LevelError, "handing a stream's assignments back failed; their locks lapse instead", "stream", s.id, "err", err)
		}
	}
	for _, tag := range r.lostRefills {
		// After the held ones: what a lost refill's tag still names now
		// is what the worker never received (but what is left to it).
		n, err := svc.eng.HandBackTagged(ctx, s.consumerID, s.workerID, tag, left...)
		if err != nil {
			failed(slog.LevelWarn, "handing back what a lost refill reserved failed; its locks lapse instead", "stream", s.id, "err", err)
		}
		unseenBack += n
	}
	if err := svc.eng.ForgetStream(ctx, s.id); err != nil {
		failed(slog.LevelWarn, "removing the stream's catalog row failed; it is pruned once no longer live", "stream", s.id, "err", err)
	}
	if cut {
		svc.logger.Info("stream ended without a database: what it held lapses at its locks' end, or is left to resume; its catalog row is pruned once not refreshed",
			"stream", s.id, "held", len(s.held))
	}
	svc.eng.LogWorker(engine.EventWorkerDisconnected, engine.ProtocolStream, s.consumerID, s.workerID, svc.eng.Replica(),
		"stream", s.id, "reason", reason, "handed_back", len(handed)+unseenBack, "unseen", unseenBack, "left_to_resume", len(left))
}

// databaseLost is the error ending a stream whose replica has not reached
// PostgreSQL for down.
func (r *runner) databaseLost(down time.Duration) error {
	detail := "this replica's probe has had no answer from PostgreSQL for %s: it can neither assign work nor keep locks alive; subscribe again (through another replica if you have several). What the stream held lapses at its lock's end unless settled elsewhere"
	if r.s.resumable {
		detail = "this replica's probe has had no answer from PostgreSQL for %s: it can neither assign work nor keep locks alive; subscribe again (through another replica if you have several), resuming what the stream held before its locks lapse"
	}
	r.svc.logger.Warn("stream ended: this replica cannot reach PostgreSQL", "stream", r.s.id, "worker_id", r.s.workerID, "down", down.Round(time.Millisecond))
	return problemError(fault.New(fault.Unavailable, endDatabaseUnavailable, detail, down.Round(time.Second)))
}

// stopped is the error ending a stream as its replica stops.
func (r *runner) stopped() error {
	detail := "this replica is shutting down (what the stream still held, if anything, was handed back): subscribe again"
	if r.s.resumable {
		detail = "this replica is shutting down; what the stream held is left locked to this worker: subscribe again, resuming it"
	}
	return problemError(fault.New(fault.Unavailable, endReplicaStopping, "%s", detail))
}

func assignment(g engine.Reservation) *workerv1.Assignment {
	return &workerv1.Assignment{OccurrenceId: g.ID.String(), Definition: g.Definition, Revision: int32(g.Revision), Inputs: g.Inputs,
		Attempt: int32(g.Attempt), AttemptsLeft: int32(g.AttemptsLeft), LockExpiresAt: timestamppb.New(g.LockExpiresAt),
		InstanceId: g.InstanceID.String(), Node: g.Node, Priority: int32(g.Priority), DeadlineAt: optionalTime(g.DeadlineAt)}
}

// optionalTime is t as a protobuf timestamp, nil (the field unset) when t is.
func optionalTime(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func cancellationReason(reason string) workerv1.CancellationReason {
	switch reason {
	case engine.CancelInstanceStopped:
		return workerv1.CancellationReason_CANCELLATION_REASON_INSTANCE_STOPPED
	case engine.CancelDeadlineExceeded:
		return workerv1.CancellationReason_CANCELLATION_REASON_DEADLINE_EXCEEDED
	default:
		return workerv1.CancellationReason_CANCELLATION_REASON_LOCK_LOST
	}
}
