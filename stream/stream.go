// Package stream is the connected-worker protocol (DESIGN §10): the
// relais.worker.v1.WorkerService, served with connect-go on the REST
// listener so that gRPC, gRPC-Web and Connect clients all work, with gRPC
// server reflection and health.
//
// A worker subscribes once; its stream is pushed an assignment as soon as
// an occurrence it subscribes to is claimable (NOTIFY, any replica), never
// more than its credit (max_in_flight) at once. While the stream lives, its
// locks are kept alive by one statement per keep-alive tick; when it ends,
// what it still holds is offered again at once. Cancellations (a stop, a
// deadline) are pushed as they commit. Settlements are unary calls on the
// engine's one path, with the REST protocol's refusals as error details.
//
// The domain rules live in the engine; this package owns the wire format,
// bounds, credit, liveness and the streams of its replica. It does not
// import the pull surface: what both need lives in the engine and in
// internal/wake.
package stream

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpauth"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/pgfault"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
)

// Service serves relais.worker.v1.WorkerService on one replica.
type Service struct {
	logger *slog.Logger
	cfg    config.Config
	eng    *engine.Engine
	lookup auth.Lookup
	reg    *registry
	health *health

	claimed prometheus.Counter
	// observe times the settling calls (see ObserveSettlements).
	observe SettlementObserver
}

// loseAnswer, set by tests only, makes a settlement of ref that committed
// answer as if its COMMIT's answer had been lost.
var loseAnswer atomic.Pointer[func(ref engine.WorkerRef) bool]

// emptyClaimed, set by tests only, is called with a stream's worker id
// after a claim of the stream found nothing, before it asks when more is
// due: where a test makes PostgreSQL hang.
var emptyClaimed atomic.Pointer[func(worker string)]

// beforeWait, set by tests only, is called with a stream's worker id each
// time its loop is about to wait for what comes next: where a test holds
// the loop while wake-ups pile up.
var beforeWait atomic.Pointer[func(worker string)]

// loseClaimAnswer, set by tests only, makes a claim of a stream of worker
// that reserved something answer as if its COMMIT's answer had been lost.
var loseClaimAnswer atomic.Pointer[func(worker string) bool]

var _ workerv1connect.WorkerServiceHandler = (*Service)(nil)

// New returns the service on eng; lookup authenticates bearer tokens.
func New(logger *slog.Logger, cfg config.Config, eng *engine.Engine, lookup auth.Lookup, reg prometheus.Registerer) *Service {
	s := &Service{logger: logger, cfg: cfg, eng: eng, lookup: lookup, reg: newRegistry(cfg.Stream.MaxStreams, reg),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "relais_stream_claimed_total", Help: "Occurrences assigned to worker streams."})}
	s.health = newHealth(s.reg.closing)
	if reg != nil {
		reg.MustRegister(s.claimed)
	}
	return s
}

// Notify handles a ChannelOccurrence payload (wakes the matching streams).
func (s *Service) Notify(payload string) { s.reg.notify(payload) }

// Cancel handles a ChannelCancel payload (pushes a Cancellation to the
// stream holding the occurrence, if on this replica).
func (s *Service) Cancel(payload string) { s.reg.cancel(payload) }

// Signal handles a ChannelWorker payload (a unary call made on another
// replica about a stream of this one).
func (s *Service) Signal(payload string) { s.reg.signal(payload) }

// Invalidate handles a ChannelInvalidate payload (a consumer's changed
// grants make its streams resolve their subscriptions again).
func (s *Service) Invalidate(payload string) { s.reg.regrant(payload) }

// WakeAll makes every stream re-check the database, after notifications
// may have been missed.
func (s *Service) WakeAll() { s.reg.wakeAll() }

// Close ends every stream of this replica after handing its assignments
// back (released: the attempt is given back), refuses new ones, and waits
// up to timeout for them to end. It reports whether they all did.
func (s *Service) Close(timeout time.Duration) bool { return s.reg.close(timeout) }

// sendTimeout bounds one write to a stream: a client that stopped reading
// fills the flow-control window and the write blocks.
func (s *Service) sendTimeout() time.Duration { return max(s.cfg.Stream.Heartbeat, 5*time.Second) }

// compressMinBytes is the smallest message a stream compresses.
const compressMinBytes = 1024

// SubscribePath is the path of Subscribe, whose request body is the start
// of a stream (not a message to read within a bound).
const SubscribePath = workerv1connect.WorkerServiceSubscribeProcedure

// HeartbeatPath is the path of Heartbeat, which each stream's client calls
// every few seconds.
const HeartbeatPath = workerv1connect.WorkerServiceHeartbeatProcedure

// Handlers returns the routes to mount at the root of the listener: the
// worker service, gRPC server reflection (v1 and v1alpha) and the gRPC
// health service, each as a path prefix (ending in /) and its handler,
// and the worker service's procedures, each at its exact path.
func (s *Service) Handlers() map[string]http.Handler {
	// A client that accepts gzip gets it only for messages worth it: most
	// are a few hundred bytes, which gzip makes no smaller but costs a
	// compressor's setup each (5 % of a replica's CPU in the bench's cycle).
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(int(s.cfg.MaxBodyBytes)), connect.WithRecover(s.recovered),
		connect.WithCompressMinBytes(compressMinBytes), connect.WithInterceptors(s.timing(), s.cutShort())}
	opts = append(opts, strictJSONCodecs()...)
	out := map[string]http.Handler{}
	path, inner := workerv1connect.NewWorkerServiceHandler(s, opts...)
	inner = withResponseController(inner)
	h := s.authenticatedFirst(inner)
	// The service's path ending in / takes only what no procedure is.
	out[path] = s.authenticatedFirst(unknownProcedure())
	// Each procedure at its own path too, so that the request metrics and
	// logs tell a minutes-long Subscribe from a Complete (the service path,
	// ending in /, takes what no procedure is).
	// The token first, as for every call (verifier QA: 415 before 401).
	out[workerv1connect.WorkerServiceSubscribeProcedure] = s.authenticatedFirst(unaryJSONSubscribe(inner))
	for _, p := range []string{workerv1connect.WorkerServiceHeartbeatProcedure,
		workerv1connect.WorkerServiceDrainProcedure, workerv1connect.WorkerServiceCompleteProcedure, workerv1connect.WorkerServiceFailProcedure,
		workerv1connect.WorkerServiceExtendProcedure, workerv1connect.WorkerServiceDeferProcedure, workerv1connect.WorkerServiceReleaseProcedure} {
		out[p] = h
	}
	reflector := grpcreflect.NewStaticReflector(workerv1connect.WorkerServiceName, grpchealth.HealthV1ServiceName)
	path, h = grpcreflect.NewHandlerV1(reflector)
	out[path] = h
	path, h = grpcreflect.NewHandlerV1Alpha(reflector)
	out[path] = h
	path, h = grpchealth.NewHandler(s.health)
	out[path] = s.health.endWatches(h)
	return out
}

// unknownProcedure answers a call to a procedure the worker service lacks
// in the call's own protocol (gRPC's UNIMPLEMENTED, Connect's
// unimplemented), naming the procedures it has: connect-go answered a
// bare text/plain 404, which a gRPC client reports as an unexpected HTTP
// status (Zeebe-user QA, calling ActivateJobs).
func unknownProcedure() http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/"+workerv1connect.WorkerServiceName+"/")
		err := connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s has no procedure %q: its procedures are Subscribe, Heartbeat, Drain, Complete, Fail, Extend, Defer and Release",
			workerv1connect.WorkerServiceName, name))
		// Its access line names the code, whatever the protocol's status
		// (gRPC answers 200 with grpc-status 12).
		httpjson.NoteProblem(r.Context(), "unimplemented")
		if !ew.IsSupported(r) {
			http.Error(w, err.Message(), http.StatusNotFound)
			return
		}
		_ = ew.Write(w, r, err)
	})
}

// authenticatedFirst refuses a worker-service call whose token does not
// authenticate before its body is read, as every REST route does: a body
// that does not decode was answered 400 with the parser's words to anyone
// (security QA). A settle token, which Complete and Fail take for their
// own occurrence, and a lookup that fails for another reason than the
// token (the database) are left to the call. A stream's Heartbeat and
// Drain are only checked for a token here: while the database cannot be
// reached they are accepted on the token their stream knows (streamOf),
// and a lookup more on each of them, every heartbeat, delayed the
// acknowledgements past their due (a CI run's streams ended
// heartbeat_missed during an outage). What it learnt of a token it
// authenticated goes to the handler with the request (authenticatedAs).
func (s *Service) authenticatedFirst(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := httpauth.Bearer(r.Header)
		var refusal *fault.Error
		var known *authentication
		switch {
		case !ok && len(r.Header.Values("Authorization")) > 1:
			refusal = fault.New(fault.Unauthorized, "unauthorized", "the Authorization header is given more than once: send it once")
		case !ok:
			refusal = fault.New(fault.Unauthorized, "unauthorized", "an authorization: Bearer <consumer token> header is required")
		case engine.IsSettleToken(token):
			if r.URL.Path != workerv1connect.WorkerServiceCompleteProcedure && r.URL.Path != workerv1connect.WorkerServiceFailProcedure {
				// Only those two take one (verifier QA: any rlsst_ token
				// passed here): read as a consumer's, it is refused in the
				// words the REST routes use for it.
				if _, err := auth.Authenticate(r.Context(), s.lookup, token); err != nil {
					if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized {
						refusal = fe
					}
				}
			} else if scope, err := s.eng.AuthenticateSettleToken(r.Context(), token); err != nil {
				if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized {
					refusal = fe
				}
			} else {
				known = &authentication{token: token, settle: true, scope: scope}
			}
		case r.URL.Path == workerv1connect.WorkerServiceHeartbeatProcedure, r.URL.Path == workerv1connect.WorkerServiceDrainProcedure:
		default:
			if p, err := auth.Authenticate(r.Context(), s.lookup, token); err != nil {
				if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized {
					refusal = fe
				}
			} else {
				known = &authentication{token: token, principal: p}
			}
		}
		if refusal == nil || !ew.IsSupported(r) {
			if known != nil {
				r = r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, known))
			}
			next.ServeHTTP(w, r)
			return
		}
		httpjson.NoteProblem(r.Context(), refusal.Code)
		_ = ew.Write(w, r, problemError(refusal))
	})
}

// authentication is what authenticatedFirst learnt of a call's token: the
// handler reads it (authenticatedAs) rather than authenticating the token
// a second time, a settle token's lookup being a query.
type authentication struct {
	token     string
	principal auth.Principal     // a consumer token's
	scope     engine.SettleScope // a settle token's
	settle    bool
}

type authenticatedKey struct{}

// authenticatedAs is what authenticatedFirst learnt of token, if it
// authenticated it for this call: nil otherwise (Heartbeat and Drain, a
// lookup that failed for another reason than the token).
func authenticatedAs(ctx context.Context, token string) *authentication {
	a, _ := ctx.Value(authenticatedKey{}).(*authentication)
	if a == nil || a.token != token {
		return nil
	}
	return a
}

// unaryJSONSubscribe answers a Subscribe sent as a unary Connect call
// (Content-Type application/json, the first thing curl sends) with a body
// that says what a stream takes: connect-go answers it 415 with none
// (stream client QA).
func unaryJSONSubscribe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if r.Method != http.MethodPost || mt != "application/json" && mt != "application/proto" {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Accept-Post", "application/connect+json, application/connect+proto, application/grpc, application/grpc-web")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnsupportedMediaType)
		streaming := "application/connect+" + strings.TrimPrefix(mt, "application/")
		msg := fmt.Sprintf("Subscribe is a server stream: send it as Connect's streaming protocol (Content-Type %s, the message in one enveloped frame), gRPC or gRPC-Web, not as a unary call (%s); see docs/connected-workers.md", streaming, mt)
		_ = json.NewEncoder(w).Encode(map[string]string{"code": "unimplemented", "message": msg})
	})
}

// settling are the procedures that settle an occurrence, as the REST
// routes do.
var settling = []string{workerv1connect.WorkerServiceCompleteProcedure, workerv1connect.WorkerServiceFailProcedure,
	workerv1connect.WorkerServiceExtendProcedure, workerv1connect.WorkerServiceDeferProcedure, workerv1connect.WorkerServiceReleaseProcedure}

// Settles reports whether path, one of Handlers' paths, is a procedure
// that settles an occurrence (Complete, Fail, Extend, Defer, Release):
// the replica cuts those short as it does the REST routes when PostgreSQL
// stops answering.
func Settles(path string) bool { return slices.Contains(settling, path) }

// recovered answers a panicking handler with Internal; the value is not
// shown (it may hold a payload) and the stack is logged.
func (s *Service) recovered(ctx context.Context, spec connect.Spec, _ http.Header, v any) error {
	s.logger.ErrorContext(ctx, "worker protocol handler panicked", "procedure", spec.Procedure, "panic", fmt.Sprintf("a value of type %T", v))
	return problemError(fault.New(fault.Internal, "internal", "an internal error occurred; it was logged"))
}

type responseControllerKey struct{}

// withResponseController gives handlers the response's controller, to
// bound each write to a stream with a deadline.
func withResponseController(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), responseControllerKey{}, http.NewResponseController(w))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func responseController(ctx context.Context) *http.ResponseController {
	rc, _ := ctx.Value(responseControllerKey{}).(*http.ResponseController)
	return rc
}

// consumer authenticates the call's bearer token: only consumers may work.
// It returns the token too (a stream checks it is still valid).
func (s *Service) consumer(ctx context.Context, h http.Header) (auth.Principal, string, error) {
	token, ok := httpauth.Bearer(h)
	if !ok {
		return auth.Principal{}, "", fault.New(fault.Unauthorized, "unauthorized", "an authorization: Bearer <consumer token> header is required")
	}
	var p auth.Principal
	if a := authenticatedAs(ctx, token); a != nil && !a.settle {
		p = a.principal
	} else {
		var err error
		if p, err = auth.Authenticate(ctx, s.lookup, token); err != nil {
			return auth.Principal{}, "", err
		}
	}
	if p.ConsumerID == 0 {
		return auth.Principal{}, "", fault.New(fault.Forbidden, "forbidden", "the worker protocol needs a consumer token (POST /api/v1/consumers)")
	}
	return p, token, nil
}

func checkWorkerID(id string) *fault.FieldError {
	if m := engine.WorkerIDProblem(id); m != "" {
		return &fault.FieldError{Path: "/worker_id", Message: m}
	}
	return nil
}

func pointer(parts ...any) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "/%v", p)
	}
	return b.String()
}

// ref authenticates a settlement and names its occurrence, its worker
// and the attempt it is for, if it names one. A settle token is accepted where settleToken is set (complete and fail),
// for its own occurrence only.
//
// The token is checked before the request, as on every REST route: a call
// without a valid one is 401 whatever its body. Protobuf drops a misspelt
// field silently, so a missing occurrence_id is then said to be missing,
// rather than looked up as an empty id (or blamed on a settle token).
func (s *Service) ref(ctx context.Context, h http.Header, occurrence, workerID string, attempt *int32, settleToken bool) (engine.WorkerRef, error) {
	id, err := uuid.Parse(occurrence)
	if token, ok := httpauth.Bearer(h); ok && settleToken && engine.IsSettleToken(token) {
		var scope engine.SettleScope
		if a := authenticatedAs(ctx, token); a != nil && a.settle {
			scope = a.scope
		} else {
			var serr error
			if scope, serr = s.eng.AuthenticateSettleToken(ctx, token); serr != nil {
				return engine.WorkerRef{}, serr
			}
		}
		if occurrence == "" {
			return engine.WorkerRef{}, required("/occurrence_id")
		}
		if err != nil || scope.Occurrence != id {
			return engine.WorkerRef{}, fault.New(fault.Unauthorized, "unauthorized", "this settle token settles another occurrence")
		}
		if workerID == "" {
			workerID = engine.SettleTokenWorker
		}
		if fe := checkWorkerID(workerID); fe != nil {
			return engine.WorkerRef{}, fault.New(fault.BadRequest, "invalid_request", "worker_id is invalid").WithErrors([]fault.FieldError{*fe})
		}
		ref := engine.WorkerRef{ConsumerID: scope.ConsumerID, WorkerID: workerID, Occurrence: id, SettleToken: true, TokenAttempt: scope.Attempt}
		return ref, withAttempt(&ref, attempt)
	}
	p, _, err2 := s.consumer(ctx, h)
	if err2 != nil {
		return engine.WorkerRef{}, err2
	}
	if occurrence == "" {
		return engine.WorkerRef{}, required("/occurrence_id")
	}
	if err != nil {
		return engine.WorkerRef{}, fault.NotAnID("occurrence", occurrence)
	}
	if fe := checkWorkerID(workerID); fe != nil {
		return engine.WorkerRef{}, fault.New(fault.BadRequest, "invalid_request", "worker_id is invalid").WithErrors([]fault.FieldError{*fe})
	}
	ref := engine.WorkerRef{ConsumerID: p.ConsumerID, WorkerID: workerID, Occurrence: id}
	return ref, withAttempt(&ref, attempt)
}

// withAttempt sets the attempt a call names on ref, refusing one under 1.
func withAttempt(ref *engine.WorkerRef, attempt *int32) error {
	if attempt == nil {
		return nil
	}
	if *attempt < 1 {
		return fault.New(fault.BadRequest, "invalid_request", "attempt is invalid").
			WithErrors([]fault.FieldError{{Path: "/attempt", Message: "must be an attempt number (1 or more), the Assignment's attempt"}})
	}
	ref.Attempt = *attempt
	return nil
}

// required refuses a request without the field at path.
func required(path string) *fault.Error {
	return fault.New(fault.BadRequest, "invalid_request", "%s is required", strings.TrimPrefix(path, "/")).
		WithErrors([]fault.FieldError{{Path: path, Message: "is required"}})
}

// settled frees the credit of the stream holding ref's occurrence: at once
// on this replica, through a signal on another.
// SettledElsewhere hears of an attempt another surface settled (the REST
// pull routes): the stream of this replica holding it frees its slot at
// once, and pushes the next task. A stream on another replica learns at
// its next keep-alive.
func (s *Service) SettledElsewhere(ref engine.WorkerRef, attempt int) {
	s.settledHere(ref, attempt)
}

// settledHere tells the stream of this replica holding ref's occurrence, if
// there is one, that attempt was settled.
func (s *Service) settledHere(ref engine.WorkerRef, attempt int) bool {
	h := s.reg.holder(ref.Occurrence)
	if h == nil || h.consumerID != ref.ConsumerID {
		return false
	}
	h.post(event{kind: eventSettled, occurrence: ref.Occurrence, attempt: attempt})
	return true
}

func (s *Service) settled(ctx context.Context, ref engine.WorkerRef, attempt int) {
	if attempt == 0 {
		return
	}
	if s.settledHere(ref, attempt) {
		return
	}
	if err := s.eng.SignalWorkers(ctx, engine.WorkerSignal{Kind: engine.SignalSettled, Occurrence: ref.Occurrence, Attempt: attempt,
		ConsumerID: ref.ConsumerID, WorkerID: ref.WorkerID}); err != nil && ctx.Err() == nil {
		// The stream learns at its next keep-alive instead.
		s.logger.Warn("signalling a settlement to its stream failed", "occurrence", ref.Occurrence, "err", err)
	}
}

// Complete settles an assignment with its outputs.
func (s *Service) Complete(ctx context.Context, req *connect.Request[workerv1.CompleteRequest]) (*connect.Response[workerv1.CompleteResponse], error) {
	const procedure = "Complete"
	ref, err := s.ref(ctx, req.Header(), req.Msg.GetOccurrenceId(), req.Msg.GetWorkerId(), req.Msg.Attempt, true)
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	outputs := req.Msg.GetOutputs()
	switch {
	case len(outputs) == 0:
		err = fault.New(fault.BadRequest, "invalid_request", "outputs are required").WithErrors([]fault.FieldError{{Path: "/outputs", Message: "is required (a JSON object)"}})
	case !json.Valid(outputs):
		err = fault.New(fault.BadRequest, "invalid_json", "outputs are not JSON").WithErrors([]fault.FieldError{{Path: "/outputs", Message: "must be a UTF-8 JSON object"}})
	default:
		// What REST refuses as not strict JSON, at its pointer under
		// /outputs: invalid UTF-8 inside a string, a duplicate key (a
		// decoder would keep the last one, not necessarily what was
		// meant), an escaped lone surrogate (PostgreSQL cannot store it).
		err = httpjson.CheckTextAt(outputs, "/outputs", "the outputs are")
	}
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	st, err := s.complete(ctx, ref, json.RawMessage(outputs))
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	return connect.NewResponse(&workerv1.CompleteResponse{Status: st.Status, Route: st.Route}), nil
}

// complete settles ref's assignment and frees its credit. When the stream
// holding it is on this replica and work is known to wait, the same
// transaction claims the task that takes the freed slot: one group commit
// per slot instead of two (the settlement's, then the stream's claim's),
// which is what bounds a worker whose every slot waits for its outcome to
// commit before it takes the next task.
func (s *Service) complete(ctx context.Context, ref engine.WorkerRef, outputs json.RawMessage) (engine.Settlement, error) {
	return s.settle(ctx, ref, func(next *engine.ClaimRequest) (engine.Settlement, []engine.Reservation, error) {
		return s.eng.CompleteAndClaim(ctx, ref, outputs, next)
	})
}

// settle settles ref's assignment with settle, given the claim that fills
// the slot it frees when the stream holding it is on this replica and
// work is known to wait (see complete), nil otherwise.
func (s *Service) settle(ctx context.Context, ref engine.WorkerRef,
	settle func(next *engine.ClaimRequest) (engine.Settlement, []engine.Reservation, error)) (engine.Settlement, error) {
	h := s.reg.holder(ref.Occurrence)
	next := h.refillFor(ref)
	st, got, err := settle(next)
	if lose := loseAnswer.Load(); lose != nil && err == nil && (*lose)(ref) {
		err = pgfault.Unavailable(errors.New("test: the COMMIT's answer was lost"))
		if st.RefillTag != "" {
			err = &engine.RefillUnanswered{Tag: st.RefillTag, Err: err}
		}
		st, got = engine.Settlement{}, nil
	}
	var unanswered *engine.RefillUnanswered
	switch {
	case errors.As(err, &unanswered):
		// Its COMMIT may have claimed the refill unanswered: the stream
		// asks for it again under its tag, or hands it back as it ends.
		if !h.post(event{kind: eventRefillLost, tag: unanswered.Tag}) {
			// Bounded: the database that lost the COMMIT's answer may hang.
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
			if _, herr := s.eng.HandBackTagged(hctx, ref.ConsumerID, ref.WorkerID, unanswered.Tag); herr != nil {
				s.logger.Warn("handing back what a lost refill reserved failed; its locks lapse instead", "err", herr)
			}
			cancel()
		}
		return st, err
	case err != nil || st.Attempt == 0:
		return st, err
	case st.Replayed:
		// The first answer was lost: free the slot if this replica's
		// stream still holds it, without a signal (the other replicas'
		// streams learn at their keep-alive, as they would have).
		s.settledHere(ref, st.Attempt)
	case next == nil:
		s.settled(ctx, ref, st.Attempt)
	case !h.post(event{kind: eventSettled, occurrence: ref.Occurrence, attempt: st.Attempt, refilled: true, refill: got}):
		// The stream ended meanwhile: nobody will run them.
		s.handBack(ctx, ref.ConsumerID, ref.WorkerID, got)
	}
	return st, nil
}

// handBack releases reservations no worker saw (attempt given back) and
// returns how many it handed back.
func (s *Service) handBack(ctx context.Context, consumerID int64, workerID string, unseen []engine.Reservation) int {
	if len(unseen) == 0 {
		return 0
	}
	n, err := s.eng.ReleaseUnseen(ctx, consumerID, workerID, unseen)
	if err != nil {
		s.logger.Error("handing back undelivered assignments failed; their locks lapse instead", "err", err)
	}
	return n
}

// Fail reports that the work could not be done.
func (s *Service) Fail(ctx context.Context, req *connect.Request[workerv1.FailRequest]) (*connect.Response[workerv1.FailResponse], error) {
	const procedure = "Fail"
	m := req.Msg
	ref, err := s.ref(ctx, req.Header(), m.GetOccurrenceId(), m.GetWorkerId(), m.Attempt, true)
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	f := engine.Failure{ErrorCode: m.GetErrorCode(), Message: m.GetMessage(), Retryable: m.GetRetryable()}
	if d := m.GetRetryDelay(); d != nil {
		if bad := invalidDuration("/retry_delay", d); bad != nil {
			return nil, toConnect(ctx, s.logger, procedure, bad)
		}
		if d.AsDuration() < 0 {
			return nil, toConnect(ctx, s.logger, procedure, fault.New(fault.BadRequest, "invalid_request", "the failure is invalid").
				WithErrors([]fault.FieldError{{Path: "/retry_delay", Message: "must be zero or more"}}))
		}
		delay := d.AsDuration()
		f.RetryDelay = &delay
	}
	if m.AttemptsLeft != nil {
		left := int(m.GetAttemptsLeft())
		f.AttemptsLeft = &left
	}
	st, err := s.settle(ctx, ref, func(next *engine.ClaimRequest) (engine.Settlement, []engine.Reservation, error) {
		return s.eng.FailAndClaim(ctx, ref, f, next)
	})
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	return connect.NewResponse(&workerv1.FailResponse{Status: st.Status, AttemptsLeft: int32(st.AttemptsLeft),
		AvailableAt: optionalTime(st.AvailableAt), DeadlineAt: optionalTime(st.DeadlineAt)}), nil
}

// Extend prolongs a lock held without a stream.
func (s *Service) Extend(ctx context.Context, req *connect.Request[workerv1.ExtendRequest]) (*connect.Response[workerv1.ExtendResponse], error) {
	const procedure = "Extend"
	ref, err := s.ref(ctx, req.Header(), req.Msg.GetOccurrenceId(), req.Msg.GetWorkerId(), req.Msg.Attempt, false)
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	d := s.cfg.Pull.DefaultLockDuration
	if ld := req.Msg.GetLockDuration(); ld != nil {
		if bad := invalidDuration("/lock_duration", ld); bad != nil {
			return nil, toConnect(ctx, s.logger, procedure, bad)
		}
		// Zero and below are too short, as REST's extend says of PT0S.
		if d = ld.AsDuration(); d > s.cfg.Pull.MaxLockDuration {
			return nil, toConnect(ctx, s.logger, procedure, engine.BoundExceeded("lock_duration", s.cfg.Pull.MaxLockDuration))
		}
		if d < engine.MinLockDuration {
			return nil, toConnect(ctx, s.logger, procedure, fault.New(fault.BadRequest, "invalid_request", "lock_duration is too short").
				WithErrors([]fault.FieldError{engine.LockTooShort}))
		}
	}
	until, err := s.eng.Extend(ctx, ref, d)
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	return connect.NewResponse(&workerv1.ExtendResponse{LockExpiresAt: timestamppb.New(until)}), nil
}

// Defer hands the occurrence over to be settled later.
func (s *Service) Defer(ctx context.Context, req *connect.Request[workerv1.DeferRequest]) (*connect.Response[workerv1.DeferResponse], error) {
	const procedure = "Defer"
	ref, err := s.ref(ctx, req.Header(), req.Msg.GetOccurrenceId(), req.Msg.GetWorkerId(), req.Msg.Attempt, false)
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	d, err := s.eng.Defer(ctx, ref, req.Msg.GetReason())
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	s.settled(ctx, ref, d.Attempt)
	return connect.NewResponse(&workerv1.DeferResponse{Status: d.Status, DeferredAt: timestamppb.New(d.DeferredAt),
		DeadlineAt: optionalTime(d.DeadlineAt)}), nil
}

// Release hands the reservation back without spending an attempt.
func (s *Service) Release(ctx context.Context, req *connect.Request[workerv1.ReleaseRequest]) (*connect.Response[workerv1.ReleaseResponse], error) {
	const procedure = "Release"
	ref, err := s.ref(ctx, req.Header(), req.Msg.GetOccurrenceId(), req.Msg.GetWorkerId(), req.Msg.Attempt, false)
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	st, err := s.eng.Release(ctx, ref)
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	s.settled(ctx, ref, st.Attempt)
	return connect.NewResponse(&workerv1.ReleaseResponse{Status: st.Status, AttemptsLeft: int32(st.AttemptsLeft),
		AvailableAt: optionalTime(st.AvailableAt), DeadlineAt: optionalTime(st.DeadlineAt)}), nil
}

// streamOf finds the stream a Heartbeat or Drain names, on this replica or
// (through the catalog) another one; the caller's consumer must own it.
func (s *Service) streamOf(ctx context.Context, h http.Header, streamID string) (*session, uuid.UUID, int64, error) {
	p, _, err := s.consumer(ctx, h)
	if err != nil {
		// While the database cannot be reached, a stream of this replica
		// still knows its own token: its acknowledgements keep counting,
		// else an outage would end every stream as heartbeat_missed.
		if local := s.localWithToken(h, streamID); local != nil && fault.HasCode(err, pgfault.UnavailableCode) {
			return local, local.id, local.consumerID, nil
		}
		return nil, uuid.UUID{}, 0, err
	}
	if streamID == "" {
		return nil, uuid.UUID{}, 0, required("/stream_id")
	}
	id, err := uuid.Parse(streamID)
	if err != nil {
		return nil, uuid.UUID{}, 0, fault.New(fault.NotFound, "not_found", "stream %q not found: subscribe again", streamID)
	}
	if local := s.reg.stream(id); local != nil && local.consumerID == p.ConsumerID {
		return local, id, p.ConsumerID, nil
	}
	owner, err := s.eng.StreamConsumer(ctx, id)
	if err != nil {
		if fault.HasCode(err, "not_found") {
			return nil, id, 0, streamNotFound(id)
		}
		return nil, id, 0, err
	}
	if owner != p.ConsumerID {
		return nil, id, 0, streamNotFound(id)
	}
	return nil, id, owner, nil
}

// streamNotFound refuses a stream id that names no stream of the caller's
// consumer: one that ended, or another consumer's, said alike so that the
// answer tells no one which streams exist.
func streamNotFound(id uuid.UUID) error {
	return fault.New(fault.NotFound, "not_found", "stream %s not found: it ended (a heartbeat acknowledged as a drained or stopped stream closes lands here too: nothing to do), or it is another consumer's (check the token); a worker still running subscribes again", id)
}

// localWithToken is the stream of this replica that streamID names, when
// the request carries the very token that stream subscribed with.
func (s *Service) localWithToken(h http.Header, streamID string) *session {
	token, ok := httpauth.Bearer(h)
	id, err := uuid.Parse(streamID)
	if !ok || err != nil {
		return nil
	}
	local := s.reg.stream(id)
	if local == nil || subtle.ConstantTimeCompare([]byte(token), []byte(local.currentToken())) != 1 {
		return nil
	}
	return local
}

// Heartbeat acknowledges the last heartbeat the client read.
func (s *Service) Heartbeat(ctx context.Context, req *connect.Request[workerv1.HeartbeatRequest]) (*connect.Response[workerv1.HeartbeatResponse], error) {
	const procedure = "Heartbeat"
	local, id, consumer, err := s.streamOf(ctx, req.Header(), req.Msg.GetStreamId())
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	seq := req.Msg.GetSequence()
	badSequence := ""
	switch {
	case seq < 0:
		badSequence = "must be a sequence the stream sent (0 or more)"
	case local != nil && !local.ack(seq):
		badSequence = fmt.Sprintf("stream %s has not sent heartbeat %d", id, seq)
	}
	if badSequence != "" {
		return nil, toConnect(ctx, s.logger, procedure, fault.New(fault.BadRequest, "invalid_request", "the heartbeat is invalid").
			WithErrors([]fault.FieldError{{Path: "/sequence", Message: badSequence}}))
	}
	if local == nil {
		err = s.eng.SignalWorkers(ctx, engine.WorkerSignal{Kind: engine.SignalAck, Stream: id, ConsumerID: consumer, Sequence: seq})
	} else if token, ok := httpauth.Bearer(req.Header()); ok {
		// streamOf authenticated it as the stream's consumer (or, while
		// the database is out of reach, found it to be the stream's own).
		local.adopt(token)
	}
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	return connect.NewResponse(&workerv1.HeartbeatResponse{}), nil
}

// Drain stops a stream from sending new assignments.
func (s *Service) Drain(ctx context.Context, req *connect.Request[workerv1.DrainRequest]) (*connect.Response[workerv1.DrainResponse], error) {
	const procedure = "Drain"
	local, id, consumer, err := s.streamOf(ctx, req.Header(), req.Msg.GetStreamId())
	if err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	if local != nil {
		local.post(event{kind: eventDrain})
	} else if err := s.eng.SignalWorkers(ctx, engine.WorkerSignal{Kind: engine.SignalDrain, Stream: id, ConsumerID: consumer}); err != nil {
		return nil, toConnect(ctx, s.logger, procedure, err)
	}
	return connect.NewResponse(&workerv1.DrainResponse{}), nil
}
