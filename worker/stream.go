package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/relais/relais/internal/isoduration"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
)

// The worker stream (DESIGN §10): one Subscribe stream pushes the tasks,
// up to Concurrency unsettled at once, and keeps their locks alive while
// it lives; outcomes go through the protocol's unary calls. Streams speak
// the Connect protocol over the configured HTTP client, so they pass
// proxies that only know HTTP/1.1.

// silentHeartbeats is how many heartbeat intervals without any event the
// worker waits before it presumes the connection dead and reconnects.
const silentHeartbeats = 3

// streamClient is the worker protocol's client with the consumer token.
type streamClient struct {
	api workerv1connect.WorkerServiceClient
}

func newStreamClient(w *Worker) streamClient {
	// The stream lives as long as Run: a client timeout would cut it.
	hc := &http.Client{Transport: wholeBodies{next: w.cfg.HTTPClient.Transport}, CheckRedirect: w.cfg.HTTPClient.CheckRedirect, Jar: w.cfg.HTTPClient.Jar}
	return streamClient{api: workerv1connect.NewWorkerServiceClient(hc, w.base, connect.WithReadMaxBytes(maxResponse),
		connect.WithInterceptors(bearer{w}))}
}

// wholeBodies hands net/http each unary call's body as a bytes.Reader.
// Connect gives its own reader, which net/http cannot tell is in memory:
// it then flushes the headers and copies the body in writes of their own,
// two system calls (and as many reads at the server) per settlement where
// one does.
type wholeBodies struct{ next http.RoundTripper }

func (t wholeBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength <= 0 {
		return next.RoundTrip(req)
	}
	body := make([]byte, req.ContentLength)
	_, err := io.ReadFull(req.Body, body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the request's body: %w", err)
	}
	// A shallow copy: a RoundTripper may not change the request it is given.
	r := *req
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return next.RoundTrip(&r)
}

func request[T any](_ streamClient, m *T) *connect.Request[T] {
	r := connect.NewRequest(m)
	r.Header().Set("User-Agent", "relais-worker-go")
	return r
}

// bearer gives each call of the worker protocol the token of the moment
// (see Worker.token).
type bearer struct{ w *Worker }

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		token, err := b.w.token(ctx)
		if err != nil {
			// Not a wire error: read as a network error, retried.
			return nil, err
		}
		req.Header().Set("Authorization", "Bearer "+token)
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		// A token that cannot be read is sent as none: the refusal (401)
		// is retried, the token read again, when TokenFunc gives it.
		if token, err := b.w.token(ctx); err == nil {
			conn.RequestHeader().Set("Authorization", "Bearer "+token)
		} else {
			b.w.log.Warn("reading the token failed; subscribing without it", "err", err)
		}
		return conn
	}
}

func (bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// streamWire settles streamed tasks with the protocol's unary calls. Any
// replica takes them: the one holding the stream learns at once.
type streamWire struct{ c streamClient }

// attemptOf is a settlement's attempt as the protocol takes it: unset
// when the worker does not know it (a deferred task settled by id).
func attemptOf(a int32) *int32 {
	if a == 0 {
		return nil
	}
	return &a
}

func (sw streamWire) complete(ctx context.Context, id string, req completeRequest) (completeResult, error) {
	res, err := sw.c.api.Complete(ctx, request(sw.c, &workerv1.CompleteRequest{OccurrenceId: id, WorkerId: req.WorkerID, Outputs: req.Outputs, Attempt: attemptOf(req.Attempt)}))
	if err != nil {
		return completeResult{}, wireError(err)
	}
	out := completeResult{Status: res.Msg.GetStatus()}
	if route := res.Msg.GetRoute(); route != "" {
		out.Route = &route
	}
	return out, nil
}

func (sw streamWire) fail(ctx context.Context, id string, req failRequest) (failResult, error) {
	m := &workerv1.FailRequest{OccurrenceId: id, WorkerId: req.WorkerID, ErrorCode: req.ErrorCode, Message: req.Message, Retryable: req.Retryable, Attempt: attemptOf(req.Attempt)}
	if req.AttemptsLeft > 0 {
		m.AttemptsLeft = &req.AttemptsLeft
	}
	if req.RetryDelay != "" {
		d, err := isoduration.Parse(req.RetryDelay)
		if err != nil {
			return failResult{}, fmt.Errorf("relais: retry delay %q: %w", req.RetryDelay, err)
		}
		m.RetryDelay = durationpb.New(d)
	}
	res, err := sw.c.api.Fail(ctx, request(sw.c, m))
	if err != nil {
		return failResult{}, wireError(err)
	}
	out := failResult{Status: res.Msg.GetStatus(), AttemptsLeft: int(res.Msg.GetAttemptsLeft())}
	if at := res.Msg.GetAvailableAt(); at != nil {
		t := at.AsTime()
		out.AvailableAt = &t
	}
	return out, nil
}

func (sw streamWire) release(ctx context.Context, id string, req workerRequest) error {
	_, err := sw.c.api.Release(ctx, request(sw.c, &workerv1.ReleaseRequest{OccurrenceId: id, WorkerId: req.WorkerID, Attempt: attemptOf(req.Attempt)}))
	return wireError(err)
}

func (sw streamWire) deferTask(ctx context.Context, id string, req deferRequest) (Deferral, error) {
	res, err := sw.c.api.Defer(ctx, request(sw.c, &workerv1.DeferRequest{OccurrenceId: id, WorkerId: req.WorkerID, Reason: req.Reason, Attempt: attemptOf(req.Attempt)}))
	if err != nil {
		return Deferral{}, wireError(err)
	}
	out := Deferral{}
	if at := res.Msg.GetDeferredAt(); at != nil {
		out.DeferredAt = at.AsTime()
	}
	if at := res.Msg.GetDeadlineAt(); at != nil {
		t := at.AsTime()
		out.DeadlineAt = &t
	}
	return out, nil
}

// notRelais reports an HTTP answer that no retry changes and that says
// no worker service is at this URL, as its HTTP status: a 404 (an older
// Relais, a URL that is not Relais's root), a 501 or a 505 (a server that
// is not Relais). connect tells these apart only in the message it makes
// of a status that is no protocol's answer: 404 becomes Unimplemented,
// 501 and 505 Unknown, which reads as a call that may have acted.
func notRelais(ce *connect.Error) (int, bool) {
	if connect.IsWireError(ce) {
		return 0, false
	}
	var st int
	if _, err := fmt.Sscanf(ce.Message(), "HTTP status %d", &st); err != nil {
		return 0, false
	}
	switch st {
	case http.StatusNotFound, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return st, true
	}
	return 0, false
}

// wireError makes a protocol error what the REST wire returns: an
// *APIError with the HTTP status of the gRPC code and the Relais problem,
// or a *networkError when no answer came, so that retries and refusals are
// told apart the same way.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	if te, ok := errors.AsType[*tokenError](err); ok {
		// The interceptor could not read the token: Relais was never
		// asked, as on the REST routes (verifier QA: said "relais:").
		return te
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return &networkError{err}
	}
	// connect reports a connection it could not make, or one that broke
	// under the call (the replica was killed), as Unavailable, which would
	// read as a 503 the server never sent. A proxy's own 502, 503 or 504
	// is an answer, told as REST tells it.
	var oe *net.OpError
	var ne net.Error
	if !connect.IsWireError(ce) && (errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
		return &networkError{err}
	}
	if st, ok := notRelais(ce); ok {
		return &APIError{Status: st, Detail: ce.Message()}
	}
	var p *workerv1.Problem
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if pv, ok := v.(*workerv1.Problem); ok {
				p = pv
			}
		}
	}
	status := 0
	switch ce.Code() {
	case connect.CodeInvalidArgument:
		status = http.StatusBadRequest
		if p != nil && (p.GetCode() == codeInvalidOutputs || p.GetCode() == "invalid_inputs") {
			status = http.StatusUnprocessableEntity
		}
	case connect.CodeUnauthenticated:
		status = http.StatusUnauthorized
	case connect.CodePermissionDenied:
		status = http.StatusForbidden
	case connect.CodeNotFound:
		status = http.StatusNotFound
	case connect.CodeUnimplemented:
		status = http.StatusNotImplemented
	case connect.CodeFailedPrecondition, connect.CodeAlreadyExists:
		status = http.StatusConflict
	case connect.CodeResourceExhausted:
		status = http.StatusTooManyRequests
		switch {
		case p != nil && p.GetCode() == "body_too_large":
			status = http.StatusRequestEntityTooLarge
		case p == nil && connect.IsWireError(ce):
			// Relais's own 429s carry their problem; a bare one from the
			// server is connect refusing a request over its size limit,
			// which no retry fixes: REST's 413 (an HTTP 429 from a proxy
			// arrives as Unavailable).
			return &APIError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Detail: ce.Message()}
		case p == nil:
			// Made here (an answer over this client's limit, a stream
			// reset by HTTP/2's ENHANCE_YOUR_CALM): the call may or may
			// not have acted.
			return &networkError{err}
		}
	case connect.CodeUnavailable:
		if p == nil && !connect.IsWireError(ce) && !strings.HasPrefix(ce.Message(), "HTTP status ") {
			// Made here, not answered (an https:// URL to a plain HTTP
			// listener): not Relais's 503 (newcomer QA). A proxy's own
			// 503 ("HTTP status 503 …") is an answer.
			return &networkError{err}
		}
		status = http.StatusServiceUnavailable
	case connect.CodeInternal, connect.CodeDataLoss:
		status = http.StatusInternalServerError
	default:
		// Canceled, DeadlineExceeded, Unknown, Aborted: the call may or
		// may not have acted.
		return &networkError{err}
	}
	ae := &APIError{Status: status, Detail: ce.Message()}
	if p != nil {
		ae.Code, ae.Detail = p.GetCode(), p.GetDetail()
		for _, e := range p.GetErrors() {
			ae.Errors = append(ae.Errors, FieldError{Path: e.GetPath(), Message: e.GetMessage()})
		}
		ae.RetryAfter = p.GetRetryAfter().AsDuration()
		if p.GetField() != "" {
			// As REST's problem carries them: a count as the number JSON
			// decodes, a duration as the protocol writes it ("600s",
			// where REST has PT10M).
			var ceiling any = p.GetCeiling()
			if n, err := strconv.ParseFloat(p.GetCeiling(), 64); err == nil {
				ceiling = n
			}
			ae.Extra = map[string]any{"field": p.GetField(), "ceiling": ceiling}
		}
	}
	return ae
}

// streamSession is one Subscribe stream and the goroutines serving it: a
// reader that starts tasks and cancels them, an acknowledger of
// heartbeats, and a watchdog that drops a silent connection.
type streamSession struct {
	r        *run
	c        streamClient
	cancel   context.CancelFunc
	id       string
	interval time.Duration
	ended    chan struct{} // closed when the reader returned; err says why
	err      error
	done     sync.WaitGroup

	lastEvent atomic.Int64 // unix nanoseconds
	acks      chan int64

	mu sync.Mutex
	// draining: no task starts any more (set under mu, so that no task is
	// added to the run's WaitGroup once its drain waits on it).
	draining bool
	// drained is closed when the server's first draining heartbeat was
	// read: no assignment comes after it.
	drained     chan struct{}
	drainedOnce sync.Once
	tasks       map[string]*streamTask
}

// streamLock is a started streamed task's lock, as far as the worker can
// tell. The server extends it while the stream lives, every heartbeat or
// third of a lock duration, so after the stream's last event it lasts at
// least leftAfter more: a replica that dies leaves it held, and an outcome
// reported meanwhile (to the replica restarted, or another) still settles
// the task instead of seeing it run again. Once the stream ended (or the
// worker drains), retries stop then, or at the end of the worker's own
// latest extension (see run.keepOrphan) if later. The estimate can only
// be long, never wrong in effect:
// Relais checks the lock, and refuses an outcome whose lock lapsed (an
// extension that failed while heartbeats went on, in a database outage),
// which ends the retries as any refusal does; a stream that ends cleanly
// hands its tasks back at once, with the same effect.
type streamLock struct {
	// s is the stream holding the task: the one that assigned it, then
	// the one that resumed it, if one did.
	s atomic.Pointer[streamSession]
	// taskCtx is the handler's: its cause says whether Relais took the
	// task back (a Cancellation, the task assigned again).
	taskCtx context.Context
	// extended is when the lock ends, as the worker's own extensions of
	// it left it (unix nanoseconds; 0 for none): those of a task whose
	// stream ended (see run.keepOrphan).
	extended atomic.Int64
}

// expiry is, while the stream lives and the worker runs on, a lock
// duration from now: the replica extends the lock for as long as the
// stream holds the task, and says so if it lost it (lost), or refuses the
// outcome (lock_expired after a database outage longer than the lock).
// Giving up then would leave the task held by the stream, neither settled
// nor offered again, until the stream ends. Otherwise (the stream ended,
// its replica perhaps dead with the lock held; the worker shutting down)
// it is what the replica's keep-alives leave at least (see leftAfter) past
// the stream's last event, and one lock duration past since at most: a
// stream whose heartbeats go on while its replica cannot reach the
// database keeps the last event fresh but not the lock, and a worker
// shutting down would wait for the outage's end (its stream, closed at
// the end of Run, hands back what it holds).
func (l *streamLock) expiry(since time.Time) time.Time {
	s := l.s.Load()
	d := s.r.w.cfg.LockDuration
	if s.live() && !s.r.draining.Load() {
		return time.Now().Add(d)
	}
	until := time.Unix(0, s.lastEvent.Load()).Add(leftAfter(d, s.interval))
	if limit := since.Add(d); limit.Before(until) {
		until = limit
	}
	if ext := time.Unix(0, l.extended.Load()); ext.After(until) {
		return ext
	}
	return until
}

// leftAfter is how long a stream's lock lasts at least past the stream's
// last event: the replica extends it to a lock duration d from then every
// heartbeat interval, or a third of d if shorter, without a word to the
// client, so an event seen means an extension at most that long before
// it; a little is kept for the network and the extension's own time. Half
// a lock duration, as it once was, gave nothing for a 20 s lock with 10 s
// heartbeats: a replica restarted within two seconds cost the attempts of
// the tasks in flight (QA).
func leftAfter(d, interval time.Duration) time.Duration {
	return d - min(interval, d/3) - min(d/10, 2*time.Second)
}

// lost reports whether Relais said the task is no longer this worker's. A
// stream that ended says nothing of the kind: its replica may have died
// with the lock held.
func (l *streamLock) lost() bool {
	cause := context.Cause(l.taskCtx)
	return errors.Is(cause, ErrCancelled) || errors.Is(cause, ErrLockLost) && !errors.Is(cause, errStreamEnded)
}

// live reports whether the session's reader still runs (its stream has
// not ended).
func (s *streamSession) live() bool {
	select {
	case <-s.ended:
		return false
	default:
		return true
	}
}

// errStreamEnded is why a streamed task's handler is cancelled once its
// stream ended and no stream resumed it (with ErrLockLost: another worker
// may have it by then).
var errStreamEnded = errors.New("the stream ended")

// errNotResumed is why a streamed task's handler is cancelled once the
// stream that followed its stream's end did not resume it: Relais took the
// task back (or its lock lapsed), and would refuse its outcome.
var errNotResumed = errors.New("the next stream could not resume the task")

// waitingTask is a streamed task waiting for a slot. The server frees a
// slot's credit when its outcome commits and pushes the next task at once,
// which can arrive before the outcome's answer frees the slot here: the
// task waits for it (at most one per slot, across the run's streams)
// instead of being released.
type waitingTask struct {
	s *streamSession
	t *Task
}

// streamTask is a streamed task its Cancellation may end.
type streamTask struct {
	cancel context.CancelCauseFunc
	task   *Task // for the log of its cancellation
	lock   *streamLock
	// done is set once its handling ended (under the run's orphanMu): it
	// is no longer the worker's to resume.
	done bool
}

// orphan is a started streamed task whose stream ended without Relais
// saying it is gone (the replica stopped, or died, or the connection was
// cut): its handler runs on, its lock extended by the worker itself (see
// run.keepOrphan), for the next stream to resume it.
type orphan struct {
	task *streamTask
	// stop ends its keeping, once resumed or its handling ended.
	stop context.CancelFunc
}

// subscribe opens a stream and reads its first heartbeat.
func (r *run) subscribe(ctx context.Context, c streamClient) (*streamSession, error) {
	w := r.w
	// A token TokenFunc cannot give is the reason to retry, not the 401
	// a subscription without one would bring back.
	if _, err := w.token(ctx); err != nil {
		return nil, err // a tokenError, retried
	}
	resume := r.orphaned()
	req := &workerv1.SubscribeRequest{WorkerId: w.cfg.WorkerID, MaxInFlight: int32(w.cfg.Concurrency),
		LockDuration: durationpb.New(w.cfg.LockDuration), Resumable: true}
	for _, o := range resume {
		req.Resume = append(req.Resume, &workerv1.ResumedAssignment{OccurrenceId: o.task.task.ID, Attempt: int32(o.task.task.Attempt)})
	}
	for _, s := range r.subs {
		sub := &workerv1.Subscription{Definition: s.Definition, Fields: s.Fields}
		for _, rev := range s.Revisions {
			sub.Revisions = append(sub.Revisions, int32(rev))
		}
		req.Subscriptions = append(req.Subscriptions, sub)
	}
	// The stream outlives ctx: a graceful shutdown keeps it (and so the
	// locks) until the tasks in flight are settled.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// ctx ending while connecting gives up; once connected, it no longer
	// ends the stream.
	watching := context.AfterFunc(ctx, cancel)
	// Relais answers a subscription with its first heartbeat at once: a
	// server (or a proxy) that accepts the connection and says nothing is
	// given up on and tried again, or Run would wait for ever, silently.
	var silent atomic.Bool
	timer := time.AfterFunc(w.subscribeTimeout, func() { silent.Store(true); cancel() })
	stream, err := c.api.Subscribe(sctx, request(c, req))
	if err == nil && !stream.Receive() {
		err = stream.Err()
		if err == nil {
			err = errors.New("the stream ended before its first heartbeat")
		}
	}
	timer.Stop()
	if !watching() && err == nil {
		err = ctx.Err()
	}
	if err != nil && silent.Load() && ctx.Err() == nil {
		// wireError below makes it a network error: retried.
		err = fmt.Errorf("no first heartbeat within %v of subscribing", w.subscribeTimeout)
	}
	if err != nil {
		if stream != nil {
			_ = stream.Close()
		}
		cancel()
		return nil, wireError(err)
	}
	hb := stream.Msg().GetHeartbeat()
	if hb == nil || hb.GetStreamId() == "" {
		_ = stream.Close()
		cancel()
		return nil, &networkError{errors.New("the stream's first event is not its heartbeat")}
	}
	s := &streamSession{r: r, c: c, cancel: cancel, id: hb.GetStreamId(), interval: max(hb.GetInterval().AsDuration(), 10*time.Millisecond),
		ended: make(chan struct{}), drained: make(chan struct{}), acks: make(chan int64, 1), tasks: map[string]*streamTask{}}
	s.lastEvent.Store(time.Now().UnixNano())
	s.ack(hb.GetSequence())
	// Before the reader starts: a Cancellation of a resumed task finds it.
	r.adopt(s, resume, hb.GetResumed())
	s.done.Add(3)
	go s.read(stream)
	go s.acknowledge(sctx)
	go s.watch(sctx)
	return s, nil
}

// read handles the stream's events until it ends.
func (s *streamSession) read(stream *connect.ServerStreamForClient[workerv1.WorkerEvent]) {
	defer s.done.Done()
	log := s.r.w.log.With("stream", s.id)
	for stream.Receive() {
		s.lastEvent.Store(time.Now().UnixNano())
		switch e := stream.Msg().GetEvent().(type) {
		case *workerv1.WorkerEvent_Assignment:
			s.assigned(taskOf(e.Assignment))
		case *workerv1.WorkerEvent_Cancellation:
			cause := fmt.Errorf("%w: Relais took the task back", ErrLockLost)
			if r := e.Cancellation.GetReason(); r == workerv1.CancellationReason_CANCELLATION_REASON_INSTANCE_STOPPED ||
				r == workerv1.CancellationReason_CANCELLATION_REASON_DEADLINE_EXCEEDED {
				cause = fmt.Errorf("%w (%s)", ErrCancelled, reasonText(r))
			}
			s.cancelTask(e.Cancellation.GetOccurrenceId(), cause)
		case *workerv1.WorkerEvent_Heartbeat:
			s.ack(e.Heartbeat.GetSequence())
			if e.Heartbeat.GetDraining() {
				// Every assignment came before it, and those that came
				// while the worker drains were released as they came.
				s.drainedOnce.Do(func() { close(s.drained) })
			}
		}
	}
	s.err = stream.Err()
	_ = stream.Close()
	if apiCode(wireError(s.err)) != "" {
		// Ended by the replica itself (replica_stopping): it was there,
		// keeping the locks, until then.
		s.lastEvent.Store(time.Now().UnixNano())
	}
	s.mu.Lock()
	draining := s.draining
	held := s.tasks
	s.tasks = map[string]*streamTask{}
	s.mu.Unlock()
	if s.err != nil && !draining {
		switch {
		case apiCode(wireError(s.err)) == codeReplicaStopping:
			log.Info("stream ended: the replica is stopping", "err", s.err)
		case errors.Is(s.err, io.ErrUnexpectedEOF) || errors.Is(s.err, syscall.ECONNRESET):
			// connect reports a connection cut mid-message as an internal
			// protocol error, which reads like a bug of either side.
			log.Warn("stream ended: the connection to the replica was lost (the replica crashed, or the network cut it)", "err", s.err)
		default:
			// The Relais code names the cause (not_granted,
			// database_unavailable…), where the error's own reads as the
			// gRPC status (permission_denied, unavailable).
			log.Warn("stream ended", "code", apiCode(wireError(s.err)), "err", s.err)
		}
	}
	s.cancel()
	close(s.ended)
	// After ended is closed (their lock's estimate no longer a stream's):
	// the handlers run on, for the next stream to resume their tasks. A
	// replica that stops leaves them locked to this worker; one that dies
	// too; one that saw the connection end handed them back, which the
	// next stream says by not resuming them.
	for _, t := range held {
		s.r.orphan(t)
	}
	// The waiting tasks are given up without a release: never started,
	// they are not resumed, and the server takes back what the stream
	// held but left to resume once its lock lapses.
	s.dropWaiting()
}

// orphan keeps t's handler running after its stream ended, and its lock
// alive, until a new stream resumes it or its handling ends.
func (r *run) orphan(t *streamTask) {
	r.orphanMu.Lock()
	defer r.orphanMu.Unlock()
	if t.done {
		return
	}
	if r.orphans == nil {
		r.orphans = map[string]*orphan{}
	}
	ctx, stop := context.WithCancel(context.Background())
	o := &orphan{task: t, stop: stop}
	r.orphans[t.task.ID] = o
	go r.keepOrphan(ctx, o)
}

// keepOrphan extends an orphan's lock as a fetched task's is (over REST,
// which needs no stream), at once and then each time half of it is left,
// until ctx ends (resumed, or its handling ended): a worker that does not
// get a new stream soon (Relais restarting for longer than the lock, the
// worker shutting down meanwhile) keeps its tasks, and finishes or
// releases them as it would. The first extension also learns at once
// whether Relais took the task back as the stream ended (a connection cut
// a live replica saw): the handler is then cancelled without waiting for
// a new stream. A refusal, or an outage until the lock may have lapsed,
// cancels the handler; what it still returns successfully is reported
// all the same, as for any task whose stream ended (see afterStreamEnded).
func (r *run) keepOrphan(ctx context.Context, o *orphan) {
	t := o.task
	log := r.w.log.With(taskAttrs(t.task)...)
	expiry := t.lock.expiry(time.Now())
	for {
		next, err := r.extend(ctx, t.task.ID, t.task.Attempt, expiry, log)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !r.unorphan(o) {
				return
			}
			if errors.Is(err, ErrCancelled) {
				log.Info("task cancelled by Relais after its stream ended; cancelling the handler", "cause", err)
				t.cancel(err)
				return
			}
			if ctl := t.task.ctl; ctl != nil && ctl.returned.Load() && apiCode(err) == "already_settled" {
				// Its handler returned and its outcome is being reported:
				// a try whose answer was lost settled it (chaos QA: a
				// Warn said the work was lost, then the report's retry
				// was answered). The report goes on to its answer.
				log.Info("the task was settled while its outcome's report was retried (a try whose answer was lost landed); the report goes on until it is answered", "cause", err)
				// No lock is left to lapse: the report's tries, bounded
				// by the lock's end, get a lock duration more to be
				// answered (a replay of the settlement).
				t.lock.extended.Store(time.Now().Add(r.w.cfg.LockDuration).UnixNano())
				return
			}
			// Its handler may have returned long before, its outcome still
			// being reported (chaos QA: "cancelling the handler" read
			// as a handler still running).
			// The way out named for an SDK user (Temporal QA: the server's
			// advice, to keep acknowledging heartbeats, is for a client
			// of one's own, and this worker did).
			log.Warn(orphanLost(err), "cause", err)
			t.cancel(fmt.Errorf("%w: %w", errStreamEnded, err))
			return
		}
		expiry = next
		t.lock.extended.Store(next.UnixNano())
		if !sleepCtx(ctx, time.Until(next.Add(-r.w.cfg.LockDuration/2))) {
			return
		}
	}
}

// orphanLost says why a task whose stream ended is no longer this
// worker's: Relais out of reach until its lock expired, or Relais's
// refusal of the extension (it hands a stream's tasks back when it ends).
// The advice to poll fits the second alone (SDK QA: it followed a
// Relais outage longer than the lock, which polling outlives no better).
func orphanLost(err error) string {
	const lost = "the task is no longer this worker's (its handler is cancelled if it still runs, its outcome not reported if it returned)"
	if errors.Is(err, errUnextended) {
		return "the stream ended and Relais could not be reached to keep the task's lock before it expired: " + lost + "; it is offered again"
	}
	return "the stream ended and the task's lock could not be kept: " + lost + "; Relais hands a stream's tasks back when it ends, and Config.Protocol ProtocolLongPoll keeps them through a dropped connection"
}

// unorphan takes o out of the orphans and stops keeping its lock; false if
// it was not there.
func (r *run) unorphan(o *orphan) bool {
	r.orphanMu.Lock()
	defer r.orphanMu.Unlock()
	if r.orphans[o.task.task.ID] != o {
		return false
	}
	delete(r.orphans, o.task.task.ID)
	o.stop()
	return true
}

// orphaned lists the orphans, for a new stream to resume.
func (r *run) orphaned() []*orphan {
	r.orphanMu.Lock()
	defer r.orphanMu.Unlock()
	out := make([]*orphan, 0, len(r.orphans))
	for _, o := range r.orphans {
		out = append(out, o)
	}
	return out
}

// adopt hands the orphans a new stream s resumed over to it; the others,
// asked for and not resumed, are no longer this worker's: their handlers
// are cancelled (a Relais that resumes nothing, as one before resumable
// streams, leaves them to report a success already had, as they did).
func (r *run) adopt(s *streamSession, asked []*orphan, resumed []string) {
	for _, o := range asked {
		if !r.unorphan(o) {
			// Its handling ended meanwhile (its lock could not be kept, or
			// its handler returned): the new stream would hold for
			// nothing one it resumed, which a settlement has not freed.
			if slices.Contains(resumed, o.task.task.ID) {
				r.wg.Add(1)
				go r.releaseResumed(s, o.task.task)
			}
			continue
		}
		t := o.task
		if slices.Contains(resumed, t.task.ID) {
			s.mu.Lock()
			t.lock.s.Store(s)
			s.tasks[t.task.ID] = t
			s.mu.Unlock()
			if ctl := t.task.ctl; ctl != nil && ctl.returned.Load() {
				// Its handler returned; its outcome is still being
				// reported (chaos QA: "its handler runs on" read as a
				// second run).
				r.w.log.Info("task resumed on the new stream; its outcome is being reported", taskAttrs(t.task)...)
			} else {
				r.w.log.Info("task resumed on the new stream; its handler runs on", taskAttrs(t.task)...)
			}
			continue
		}
		r.w.log.Info("the new stream did not resume the task (Relais took it back as the stream ended, or its lock lapsed); cancelling the handler, whose outcome is not reported", taskAttrs(t.task)...)
		t.cancel(fmt.Errorf("%w: %w, and %w", ErrLockLost, errStreamEnded, errNotResumed))
	}
}

// releaseResumed releases t, resumed by s after its handling ended: if an
// outcome settled it meanwhile, the refusal is the answer.
func (r *run) releaseResumed(s *streamSession, t *Task) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.settleCtx, settleTimeout)
	defer cancel()
	err := streamWire{s.c}.release(ctx, t.ID, workerRequest{WorkerID: r.w.cfg.WorkerID, Attempt: int32(t.Attempt)})
	r.w.log.Debug("released a task resumed after its handling ended", append(taskAttrs(t), "err", err)...)
}

// dropOrphans cancels the handlers no stream resumed, as Run ends.
func (r *run) dropOrphans() {
	for _, o := range r.orphaned() {
		if r.unorphan(o) {
			o.task.cancel(fmt.Errorf("%w: %w", ErrLockLost, errStreamEnded))
		}
	}
}

func reasonText(r workerv1.CancellationReason) string {
	switch r {
	case workerv1.CancellationReason_CANCELLATION_REASON_INSTANCE_STOPPED:
		return "instance stopped"
	case workerv1.CancellationReason_CANCELLATION_REASON_DEADLINE_EXCEEDED:
		return "deadline exceeded"
	default:
		return "lock lost"
	}
}

func taskOf(a *workerv1.Assignment) *Task {
	t := &Task{ID: a.GetOccurrenceId(), Definition: a.GetDefinition(), Revision: int(a.GetRevision()), Inputs: a.GetInputs(),
		Attempt: int(a.GetAttempt()), AttemptsLeft: int(a.GetAttemptsLeft()), LockExpiresAt: a.GetLockExpiresAt().AsTime(),
		InstanceID: a.GetInstanceId(), Node: a.GetNode(), Priority: int(a.GetPriority())}
	if d := a.GetDeadlineAt(); d != nil {
		at := d.AsTime()
		t.DeadlineAt = &at
	}
	return t
}

// assigned starts a pushed task in a free slot, or queues it for the slot
// of an outcome whose answer is on its way (see waiting). The server never
// sends more than Concurrency unsettled tasks; one it sends while the
// worker drains, or beyond its slots and those, is released at once (no
// attempt spent).
func (s *streamSession) assigned(t *Task) {
	r := s.r
	r.assigned.Store(t.ID, t)
	t.wire = streamWire{s.c}
	log := r.w.log.With(taskAttrs(t)...)
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		log.Info("task sent while the worker drains; releasing it")
		r.handBack(t, log)
		return
	}
	if r.tryAcquire() {
		s.startLocked(t)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if r.wait(s, t) {
		return
	}
	r.wg.Add(1)
	log.Error("server sent more tasks than the worker's concurrency; releasing one")
	go func() {
		defer r.wg.Done()
		r.handBack(t, log)
	}()
}

// wait queues t for the next slot to free, or starts it if one freed
// meanwhile; false when as many tasks wait as there are slots.
func (r *run) wait(s *streamSession, t *Task) bool {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	// freeSlot frees a slot under waitMu: one freed since assigned's
	// tryAcquire is seen here.
	if r.tryAcquire() {
		if !s.startIfLive(t) {
			r.release(1)
			return false
		}
		return true
	}
	if len(r.waiting) >= r.w.cfg.Concurrency {
		return false
	}
	r.wg.Add(1)
	r.waiting = append(r.waiting, waitingTask{s: s, t: t})
	return true
}

// startIfLive runs t in a slot already taken, unless s drains or ended.
func (s *streamSession) startIfLive(t *Task) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.ended:
		return false
	default:
	}
	if s.draining {
		return false
	}
	s.startLocked(t)
	return true
}

// startLocked runs t in a slot already taken; s.mu is held.
func (s *streamSession) startLocked(t *Task) {
	r := s.r
	ctx, cancel := context.WithCancelCause(r.handlerCtx)
	// Only a started task's outcome is retried for as long as its lock may
	// last: a task released unstarted gets a few tries (see settle), and
	// the stream's reader, which releases those sent while it drains,
	// must not wait on them.
	lock := &streamLock{taskCtx: ctx}
	lock.s.Store(s)
	t.held = lock
	entry := &streamTask{cancel: cancel, task: t, lock: lock}
	if old := s.tasks[t.ID]; old != nil {
		old.cancel(fmt.Errorf("%w: assigned again", ErrLockLost))
	}
	s.tasks[t.ID] = entry
	forget := func() {
		r.orphanMu.Lock()
		entry.done = true
		if o := r.orphans[t.ID]; o != nil && o.task == entry {
			delete(r.orphans, t.ID)
			o.stop()
		}
		r.orphanMu.Unlock()
		cur := lock.s.Load()
		cur.mu.Lock()
		if cur.tasks[t.ID] == entry {
			delete(cur.tasks, t.ID)
		}
		cur.mu.Unlock()
	}
	// Deferred, the task is no longer the stream's: neither its
	// Cancellations nor its end cancel what the handler does after.
	t.ctl = &taskControl{forget: forget}
	r.wg.Add(1)
	r.goroutines.run(func() {
		defer r.wg.Done()
		defer r.freeSlot()
		defer forget()
		defer r.assigned.CompareAndDelete(t.ID, t)
		r.process(t, r.handler(t), ctx, cancel, nil)
	})
}

// freeSlot passes a finished task's slot to the first waiting task whose
// stream still lives, or frees it.
func (r *run) freeSlot() {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	for len(r.waiting) > 0 {
		w := r.waiting[0]
		r.waiting = r.waiting[1:]
		if w.s.startIfLive(w.t) {
			r.wg.Done() // its wait, now a run
			return
		}
		r.giveUp(w)
	}
	r.release(1)
}

// giveUp ends w's wait without running it, in the background (counted by
// the run's WaitGroup until then): the task is handed back, unless its
// stream ended (the server took back what the stream held).
func (r *run) giveUp(w waitingTask) {
	go func() {
		defer r.wg.Done()
		select {
		case <-w.s.ended:
		default:
			r.handBack(w.t, r.w.log.With(taskAttrs(w.t)...))
		}
	}()
}

// dropWaiting takes s's waiting tasks out of the queue and gives them up:
// none starts any more.
func (s *streamSession) dropWaiting() {
	r := s.r
	r.waitMu.Lock()
	var mine []waitingTask
	kept := r.waiting[:0]
	for _, w := range r.waiting {
		if w.s == s {
			mine = append(mine, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waiting[len(kept):])
	r.waiting = kept
	r.waitMu.Unlock()
	for _, w := range mine {
		r.giveUp(w)
	}
}

func (s *streamSession) cancelTask(id string, cause error) {
	r := s.r
	r.waitMu.Lock()
	for i, w := range r.waiting {
		if w.s == s && w.t.ID == id {
			// Never started: nothing to cancel or settle.
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			r.w.log.Info("task cancelled by Relais before it started", append(taskAttrs(w.t), "cause", cause)...)
			r.wg.Done()
			break
		}
	}
	r.waitMu.Unlock()
	s.mu.Lock()
	t := s.tasks[id]
	delete(s.tasks, id)
	s.mu.Unlock()
	if t != nil {
		s.r.w.log.Info("task cancelled by Relais; cancelling the handler", append(taskAttrs(t.task), "cause", cause)...)
		t.cancel(cause)
	}
}

// ack queues the acknowledgement of heartbeat seq, replacing an older
// one not sent yet.
func (s *streamSession) ack(seq int64) {
	for {
		select {
		case s.acks <- seq:
			return
		default:
		}
		select {
		case <-s.acks:
		default:
		}
	}
}

// acknowledge sends heartbeat acknowledgements: a stream whose client
// acknowledges none of three heartbeats is ended by the server.
func (s *streamSession) acknowledge(ctx context.Context) {
	defer s.done.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case seq := <-s.acks:
			actx, cancel := context.WithTimeout(ctx, s.interval)
			_, err := s.c.api.Heartbeat(actx, request(s.c, &workerv1.HeartbeatRequest{StreamId: s.id, Sequence: seq}))
			cancel()
			if connect.CodeOf(err) == connect.CodeNotFound {
				// The server no longer knows the stream.
				s.cancel()
				return
			}
		}
	}
}

// watch drops a connection that fell silent: a half-open TCP connection
// would otherwise hold the worker forever. It looks every second at most,
// so that a silence is caught when it passes its bound, not up to an
// interval later.
func (s *streamSession) watch(ctx context.Context) {
	defer s.done.Done()
	t := time.NewTicker(min(s.interval, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if silent := time.Since(time.Unix(0, s.lastEvent.Load())); silent > silentHeartbeats*s.interval+time.Second {
				s.r.w.log.Warn("stream silent; reconnecting", "stream", s.id, "silent", silent.Round(time.Millisecond))
				s.cancel()
				return
			}
		}
	}
}

// drain asks the server for no more tasks; those in flight keep their
// locks until they are settled.
func (s *streamSession) drain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.dropWaiting()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if _, err := s.c.api.Drain(ctx, request(s.c, &workerv1.DrainRequest{StreamId: s.id})); err != nil {
		s.r.w.log.Warn("asking the stream to stop sending tasks failed; tasks sent meanwhile are released", "err", err)
		return
	}
	// Assignments sent before the server heard of the drain may still be
	// on their way: closing now would leave them to the server as the
	// stream's, handed back disconnected, an attempt spent on work that
	// never started. The server marks the end of them with a draining
	// heartbeat; the reader releases each as it comes. A server that sends
	// none (older than the mark) is waited for a moment only.
	select {
	case <-s.drained:
	case <-s.ended:
	case <-time.After(drainMarkWait):
	}
}

// drainMarkWait bounds the wait for the server's draining heartbeat.
const drainMarkWait = 2 * time.Second

// close ends the stream and waits for its goroutines. What it still holds
// is handed back by the server.
func (s *streamSession) close() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.dropWaiting()
	s.cancel()
	s.done.Wait()
}

// codeReplicaStopping is Relais's code for a replica shutting down: its
// streams end and it refuses subscriptions; another replica serves.
const codeReplicaStopping = "replica_stopping"

// streamProven is how long a stream must have lived for its end to reset
// the reconnection backoff.
const streamProven = 5 * time.Second

// streamLoop receives tasks from worker streams, reconnecting when one
// ends, until ctx ends (nil, the stream left open in r.stream for the
// drain) or a refusal that retrying cannot fix (the error). fallback
// reports a server without streams, when Config.Protocol allows polling.
func (r *run) streamLoop(ctx context.Context) (fallback bool, err error) {
	w := r.w
	c := newStreamClient(w)
	bo := w.fetchBackoff
	// first holds until the server answered: a TokenFunc that failed the
	// first tries (its file not there yet) asked it nothing.
	for first := true; ; {
		if ctx.Err() != nil {
			return false, nil
		}
		s, err := r.subscribe(ctx, c)
		var te *tokenError
		asked := !errors.As(err, &te)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			var ae *APIError
			if errors.As(err, &ae) && (ae.Status == http.StatusNotImplemented || ae.Status == http.StatusNotFound && ae.Code == "" || ae.Status == http.StatusHTTPVersionNotSupported) {
				if w.cfg.Protocol == ProtocolAuto && first {
					w.log.Info("no worker stream at this URL (an older Relais, or a URL that is not Relais's root); long polling instead", "url", w.cfg.URL)
					return true, nil
				}
				return false, fmt.Errorf("worker: subscribe: no worker stream at %s (an older Relais, or a URL that is not Relais's root): %w", w.cfg.URL, err)
			}
			if asked {
				first = false
			}
			if !w.transient(err) {
				// Logged once, where Run stops with it (evaluator QA:
				// said here too, a refusal read as two).
				err = r.nameSubscriptions(err)
				return false, fmt.Errorf("worker: subscribe: %w", err)
			}
			d := max(bo.next(), retryAfter(err))
			if apiCode(err) == codeReplicaStopping && retryAfter(err) > 0 {
				// Another replica serves at once: no growing backoff.
				d = retryAfter(err)
			}
			msg := "subscribing failed; retrying"
			if ae != nil && ae.Status == http.StatusUnauthorized && w.cfg.TokenFunc != nil {
				msg = "subscribing failed: the token does not authenticate; retrying, TokenFunc read again before each try"
			}
			w.log.Warn(msg, "err", err, "delay", d.String())
			if !r.awaitSubscribe(ctx, d, &bo) {
				return false, nil
			}
			continue
		}
		first = false
		w.log.Info("stream connected", "stream", s.id, "max_in_flight", w.cfg.Concurrency)
		r.stream = s
		w.connected.Store(true)
		connectedAt := time.Now()
		select {
		case <-ctx.Done():
			return false, nil
		case <-s.ended:
		}
		w.connected.Store(false)
		s.close()
		r.stream = nil
		ended := apiCode(wireError(s.err))
		if ended == "stream_replaced" {
			return false, fmt.Errorf("worker: another Worker subscribed with worker id %q (two Workers, in one process or two, must not share one): %w", w.cfg.WorkerID, wireError(s.err))
		}
		// A stream that lived a while proved the server healthy: the
		// failures of the outage before it no longer count, else a second
		// restart within the minute would leave the worker idle for tens
		// of seconds. Streams that keep ending at once still back off.
		if time.Since(connectedAt) > streamProven {
			bo.reset()
		}
		// A replica stopping asks to reconnect at once; anything else waits
		// a little, growing if streams keep ending.
		d := bo.next()
		if ended == codeReplicaStopping {
			d = 0
		}
		if d > 0 {
			w.log.Info("reconnecting the stream", "delay", d.Round(time.Millisecond).String())
		}
		if !w.sleep(ctx, d) {
			return false, nil
		}
	}
}

// awaitSubscribe waits d before subscribing again, or less: until a report
// or a lock extension reaches Relais meanwhile, which proves it back (the
// backoff is then reset). It reports false once ctx ends.
func (r *run) awaitSubscribe(ctx context.Context, d time.Duration, bo *backoff) bool {
	w := r.w
	// A signal from before this wait says nothing of the failure just met.
	select {
	case <-w.reachable:
	default:
	}
	wake, cancel := context.WithCancel(ctx)
	defer cancel()
	var reached atomic.Bool
	go func() {
		select {
		case <-w.reachable:
			reached.Store(true)
			cancel()
		case <-wake.Done():
		}
	}()
	if w.sleep(wake, d) {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if reached.Load() {
		bo.reset()
		w.log.Info("Relais answered a report or an extension; subscribing again now")
	}
	return true
}

// tryAcquire takes one slot if one is free.
func (r *run) tryAcquire() bool {
	select {
	case r.slots <- struct{}{}:
		return true
	default:
		return false
	}
}
