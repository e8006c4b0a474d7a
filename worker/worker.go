// Package worker is the Go SDK for Relais pull workers: a service embeds
// it, registers a Handler per task definition, and Run receives tasks,
// runs the handlers, keeps their locks alive and reports the outcome.
//
// By default it connects a worker stream (relais.worker.v1.WorkerService,
// DESIGN §10): tasks are pushed as soon as they are claimable and Relais
// keeps their locks alive while the stream lives. Against a server without
// streams it long-polls the REST pull protocol instead (Config.Protocol).
// It depends on this module's isoduration, jsontree and generated protocol
// packages only (no server package). What it guarantees:
//
//   - at most Config.Concurrency handlers run at once, and it never
//     reserves more tasks than it has room to run (a stream's
//     max_in_flight is Config.Concurrency), but for a handler that
//     ignores its context past its timeout: its task is failed, which
//     frees its credit, while the handler keeps its slot until it
//     returns (see Config.HandlerTimeout);
//   - a handler's context ends as soon as its task may belong to someone
//     else (lock lost, occurrence cancelled); context.Cause says why;
//   - outcomes are reported once, retried on network trouble, and never
//     after the lock was lost;
//   - logs carry task ids and error codes, never inputs, outputs or
//     failure messages, which may hold secrets.
//
// A worker in short (Example, and examples/crmworker, in full):
//
//	w, err := worker.New(worker.Config{URL: os.Getenv("RELAIS_URL"), Token: os.Getenv("RELAIS_TOKEN")})
//	if err != nil {
//		log.Fatal(err)
//	}
//	// Revision 1, the one this code was written for: nil would take every
//	// revision granted, a later breaking one included.
//	w.Handle("add_company_to_crm", []int{1}, func(ctx context.Context, t *worker.Task) (any, error) {
//		var in struct{ CompanyName string `json:"company_name"` }
//		if err := t.Decode(&in); err != nil {
//			return nil, worker.Fail("INVALID_INPUTS", "%v", err) // not retried
//		}
//		return map[string]any{"result": "created", "crm_id": "C-1"}, nil // the outputs
//	})
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	if err := w.Run(ctx); err != nil { // nil once ctx ends and in-flight tasks are settled
//		log.Fatal(err)
//	}
//
// The module is not on a Go module proxy, so `go get` cannot fetch it:
// require it and point it at a clone, then tidy once your code imports
// this package (go mod edit -require github.com/relais/relais@v0.0.0
// -replace github.com/relais/relais=../relais; go mod tidy).
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/relais/relais/internal/isoduration"
)

// Defaults of Config.
const (
	DefaultConcurrency     = 4
	DefaultLockDuration    = time.Minute
	DefaultWait            = 20 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultHandlerTimeout  = 5 * time.Minute
	// DefaultSettleWindow is how long a fetched task's outcome waits for
	// others to be reported with it in one request.
	DefaultSettleWindow = 2 * time.Millisecond
)

// Protocol is how tasks reach a worker (Config.Protocol).
type Protocol string

// Protocols of Config.Protocol.
const (
	// ProtocolAuto connects a worker stream, and long-polls instead when
	// the server has no stream (a Relais before DESIGN §10).
	ProtocolAuto Protocol = ""
	// ProtocolStream connects a worker stream only.
	ProtocolStream Protocol = "stream"
	// ProtocolLongPoll long-polls the REST pull routes only.
	ProtocolLongPoll Protocol = "long_poll"
)

// pollMargin is how long past its long-poll wait a fetch may take before
// the worker gives up on it: the server answers at the end of the wait,
// so only a broken connection runs into the margin.
const pollMargin = 30 * time.Second

// minPollMargin is the least margin a caller's HTTP client must leave
// over the wait, or every empty long poll would end in a client timeout.
const minPollMargin = 5 * time.Second

// Config configures a Worker. URL and Token are required.
type Config struct {
	// URL is Relais's base URL, such as http://127.0.0.1:8080 or a
	// proxy's prefix (https://gw.example/relais), without /api/v1: the
	// worker adds the paths it calls.
	URL string
	// Token is a consumer token: only consumers may pull. White space
	// around it (the last newline of the file it was read from) is
	// trimmed; New refuses one holding other characters a header cannot
	// carry.
	Token string
	// TokenFunc, instead of Token, gives the token for each request: read
	// from a file a secret store keeps current, say, so that a rotated
	// token (POST /api/v1/consumers/{id}/rotate, with an overlap) is taken
	// up without a restart. With it, a 401 is retried with backoff, the
	// token read again each time, rather than ending Run: a worker whose
	// new token is not in place yet waits for it. An error it returns is
	// retried the same way, logged at WARN each time (the file is missing,
	// say): it never ends Run. It must be safe for concurrent use and
	// quick (cache what is slow to read).
	TokenFunc func(ctx context.Context) (string, error)
	// WorkerID names this process to Relais (1 to 200 bytes, without
	// surrounding white space or control characters: New refuses them);
	// locks belong to it. Default: hostname-pid, then hostname-pid-2,
	// hostname-pid-3 for the process's next Workers left without one. Two
	// Workers, in one process or two, must not share one, or each could
	// settle the other's tasks (and each stream replaces the other's).
	WorkerID string
	// HTTPClient sends the requests. Default: a client whose timeout is
	// the long-poll wait plus a margin, keeping Concurrency+1 idle
	// connections (each handler may settle while the stream or a long
	// poll holds one). New refuses a client whose Timeout would cut long
	// polls short. A client of your own should keep as many: with
	// net/http's default of 2, most settlements dial a new connection.
	HTTPClient *http.Client
	// Concurrency is the most handlers running at once. Default 4. It is
	// also the stream's max_in_flight and a fetch's max_tasks, which Relais
	// bounds (100 unless its operator set RELAIS_STREAM_MAX_IN_FLIGHT or
	// RELAIS_PULL_MAX_TASKS): above, Run returns the refusal, naming
	// Concurrency.
	Concurrency int
	// LockDuration is the lock asked for at fetch and at each extension;
	// the worker extends it when half of it is left. A fetch answered
	// more than half of it after it was sent (a long Wait, or a worker
	// or network that stalled) has its locks extended before the
	// handlers start: a lock found lapsed starts no handler. On a stream Relais
	// keeps it alive instead, and it bounds how long the tasks of a
	// worker whose replica died stay locked; a task whose stream ended has
	// its lock extended by the worker, as a fetched task's, until a new
	// stream resumes it. At least 1s (New refuses less, as Relais would);
	// default 1m.
	LockDuration time.Duration
	// Wait is how long one fetch long-polls for work. Default 20s.
	Wait time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight handlers
	// after its context ends; then their contexts are cancelled (cause
	// ErrShutdownTimeout) and their tasks released, but for a handler that
	// still returns its outputs: its task completes, the work done kept.
	// Default 30s. It does
	// not bound the reporting of outcomes of handlers that returned: while
	// Relais cannot be reached, an outcome is retried until its lock
	// expires (up to LockDuration), since giving up would have the work
	// done again; give the process a grace period of ShutdownTimeout plus
	// LockDuration (Kubernetes' terminationGracePeriodSeconds) to never cut
	// that short.
	ShutdownTimeout time.Duration
	// HandlerTimeout bounds one handler: past it, its context is cancelled
	// (cause ErrHandlerTimeout), then the task is failed, retryable, with
	// code handler_timeout: at once if the handler returns, after a few
	// seconds' grace if it ignores its context (the lock is kept until
	// then, and the handler keeps its Concurrency slot until it returns).
	// Default 5m.
	HandlerTimeout time.Duration
	// SettleWindow is how long the outcome of a fetched task waits for
	// others to be reported with it in one request (POST
	// /api/v1/pull/settle, one transaction for them all; at most 50).
	// Default 2ms; a negative value reports each outcome on its own.
	// Outcomes of streamed tasks travel on the stream's own calls.
	SettleWindow time.Duration
	// Protocol chooses how tasks arrive: ProtocolAuto (the default) uses
	// a worker stream and falls back to long polling when the server has
	// none; ProtocolStream and ProtocolLongPoll use only one.
	Protocol Protocol
	// Logger receives the worker's logs. Default: slog.Default() (the
	// process's default logger, stderr at info level unless the program
	// set another): a refused outcome (invalid outputs, a revoked token)
	// is only ever told there. A task started or completed is logged at
	// debug level, a failure reported at info, what went wrong at warn
	// and error. Use slog.New(slog.DiscardHandler) to silence it.
	Logger *slog.Logger
	// OnTaskEnd, when set, is called once for each task whose handler
	// ran, once its outcome was reported to Relais or could not be: the
	// place for metrics (tasks by outcome and error code, handler
	// durations) and traces, without wrapping every handler. A task
	// cancelled or lost while its handler runs is told once the handler
	// returned (a handler that ignores its context delays it, even past
	// the return of a Run that abandoned it with ErrShutdownTimeout, its
	// task then released); one failed for a handler that ignored its
	// timeout is told when the failure is reported. It runs on the task's
	// goroutine, the task's Concurrency
	// slot still held: keep it quick. It must be safe for concurrent use;
	// a panic in it is logged, never propagated.
	OnTaskEnd func(TaskEnd)
	// OnTaskStart, when set, is called as each task's handler starts, on
	// the task's goroutine; OnTaskEnd is then called once for it. Together
	// they make a gauge of the handlers running (one that ignored its
	// timeout counts until its failure is reported), or open a trace's
	// span. Keep it quick; it must be safe for concurrent use; a panic in
	// it is logged, never propagated.
	OnTaskStart func(TaskStart)
}

// TaskStart is a task whose handler starts (see Config.OnTaskStart).
type TaskStart struct {
	Definition   string
	Revision     int
	OccurrenceID string
	Attempt      int
}

// TaskEnd is what became of a task whose handler ran (see
// Config.OnTaskEnd).
type TaskEnd struct {
	// Definition, Revision, OccurrenceID and Attempt are the task's
	// (Task's Definition, Revision, ID and Attempt).
	Definition   string
	Revision     int
	OccurrenceID string
	Attempt      int
	// Outcome is how the task ended for this worker.
	Outcome TaskOutcome
	// ErrorCode is the code the failure was reported with (OutcomeFailed),
	// as Relais received it.
	ErrorCode string
	// Handler is how long the handler ran: until it returned, or, for a
	// handler still running past its timeout, until the task was failed
	// for it.
	Handler time.Duration
	// Err says why the outcome was not reported (OutcomeUnreported), or
	// is Relais's refusal of the report that told the worker the task was
	// no longer its own (OutcomeCancelled, OutcomeLockLost): nil when the
	// outcome was reported.
	Err error
	// HandlerErr is the error the handler returned (a panic as an
	// error), whatever became of its report; nil when it returned none.
	// The SDK never logs it (a failure's message may quote inputs): a
	// hook may, where it knows what the messages hold (Go SDK QA: a
	// failure's cause was seen only in the console).
	HandlerErr error
}

// TaskOutcome is how a task ended for this worker.
type TaskOutcome string

const (
	// OutcomeCompleted: the outputs were reported and taken.
	OutcomeCompleted TaskOutcome = "completed"
	// OutcomeFailed: a failure was reported (the handler's, its timeout,
	// outputs Relais refused): Relais retries the task or not, as its
	// policy and the failure say.
	OutcomeFailed TaskOutcome = "failed"
	// OutcomeDeferred: the handler deferred the task (Task.Defer); its
	// outcome is reported later, by id.
	OutcomeDeferred TaskOutcome = "deferred"
	// OutcomeReleased: handed back without spending an attempt (the
	// worker shut down before the handler finished).
	OutcomeReleased TaskOutcome = "released"
	// OutcomeCancelled: Relais cancelled the task (the instance was
	// stopped, its deadline passed); nothing is reported.
	OutcomeCancelled TaskOutcome = "cancelled"
	// OutcomeLockLost: the task was no longer this worker's (its lock
	// lapsed, its stream ended and it was handed back or assigned again);
	// nothing is reported.
	OutcomeLockLost TaskOutcome = "lock_lost"
	// OutcomeUnreported: the outcome could not be reported (Relais
	// refused it, or could not be reached before the lock expired); Err
	// says why. The lock lapses and Relais offers the task again, or
	// fails it if no attempt is left.
	OutcomeUnreported TaskOutcome = "unreported"
)

// Handler does the work of one task. Its outputs are encoded as JSON and
// must satisfy the definition's output contract (nil means {}). Outputs
// that Relais refuses (422 invalid_outputs) fail the occurrence at once,
// without retry and with code invalid_outputs: the handler's code is at
// fault, and running it again on the same inputs would only spend the
// remaining attempts on the same mistake. The refusal's JSON pointers are
// logged. Outputs that cannot be encoded as JSON at all (a channel, a
// function) fail the occurrence the same way, before anything is sent.
//
// Return a *BusinessError (see Fail) when the task cannot succeed, a
// *RetryableError (see Retry) to choose the retry code and delay, or any
// other error for a retryable failure with code handler_error. A panic is
// recovered and reported as a retryable handler_panic failure, and so is a
// handler whose goroutine exits with runtime.Goexit.
//
// ctx stays alive while Run shuts down gracefully, but ends when the
// lock is lost or the occurrence cancelled; whatever the handler returns
// then is dropped, because Relais would refuse it. On a worker stream the
// handler runs on when its stream ends, and the worker's next stream
// resumes its task (a rolling restart of Relais, a replica that died);
// its context ends if the next stream cannot (a network blip that a live
// replica saw: it handed the task back at once, the attempt spent), or if
// none comes before the lock may lapse. Long polling rides out blips
// shorter than the lock. Outputs a handler returns once its context ended
// so are reported all the same (refused if the task was handed back; not
// sent, nor retried any longer, once it was assigned to this worker
// again); a failure then is not reported.
type Handler func(ctx context.Context, t *Task) (outputs any, err error)

// Worker pulls tasks from Relais and runs handlers on them. Create it
// with New, register handlers with Handle, then call Run once.
type Worker struct {
	cfg  Config
	base string
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string]route
	started  bool
	// ownClient is set when New built the HTTP client, whose idle
	// connections Run then closes on return.
	ownClient bool

	// Seams for tests: how the worker waits between retries, and the
	// ranges of its backoffs.
	sleep         func(ctx context.Context, d time.Duration) bool
	fetchBackoff  backoff
	settleBackoff backoff
	shutdownGrace time.Duration
	// subscribeTimeout bounds the wait for a stream's first heartbeat.
	subscribeTimeout time.Duration

	// batch gathers fetched tasks' outcomes; nil reports each alone.
	batch *settleBatch

	// reachable is signalled when a report or a lock extension reaches
	// Relais: a stream waiting to subscribe again after an outage tries
	// at once rather than at the end of a backoff grown during it (Go
	// SDK QA: idle for 26 s after Relais was back). Nil: never signalled.
	reachable chan struct{}

	// connected is what Connected reports.
	connected atomic.Bool
	// noAttempt is set once Relais refused a settlement's attempt member
	// as unknown (a release before it): settlements go without it.
	noAttempt atomic.Bool
}

// Close releases the idle connections of a Worker used without Run (to
// settle deferred tasks by id, say, or as a settle-token front end): their
// goroutines otherwise linger until the transport's idle timeout (Go SDK
// QA). Run does the same as it returns. A Config.HTTPClient the caller gave
// is the caller's, left alone. The Worker may still be used: a later call
// opens a connection again.
func (w *Worker) Close() {
	if w.ownClient {
		w.cfg.HTTPClient.CloseIdleConnections()
	}
}

// Connected reports whether the worker is taking tasks from Relais now:
// its stream is connected, or (long polling) its latest fetch was
// answered. It is false before Run, while Run cannot reach Relais (a
// wrong URL, an outage: Run retries without returning) and after Run
// returns: a readiness probe of the worker's process reads it.
func (w *Worker) Connected() bool { return w.connected.Load() }

type route struct {
	revisions []int
	// fields are the declared inputs (see Fields); nil means all.
	fields []string
	h      Handler
	// timeout bounds the handler (see HandlerTimeout); 0 is
	// Config.HandlerTimeout.
	timeout time.Duration
}

// configBound names the Config field behind a bound a subscription or a
// fetch exceeded: the refusal names the wire's member (max_in_flight,
// max_tasks), which the program never set. Relais's ceilings are its
// operator's (RELAIS_STREAM_MAX_IN_FLIGHT, RELAIS_PULL_MAX_TASKS, ...), so
// New cannot check them.
func (w *Worker) configBound(err error) error {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "bound_exceeded" {
		return err
	}
	field, _ := ae.Extra["field"].(string)
	if field == "" {
		field, _, _ = strings.Cut(ae.Detail, " ")
	}
	var setting string
	switch field {
	case "max_in_flight", "max_tasks":
		setting = fmt.Sprintf("Concurrency %d", w.cfg.Concurrency)
	case "lock_duration":
		setting = fmt.Sprintf("LockDuration %v", w.cfg.LockDuration)
	case "wait":
		setting = fmt.Sprintf("Wait %v", w.cfg.Wait)
	default:
		return err
	}
	return fmt.Errorf("worker: Config's %s is above what this Relais takes (%s): lower it: %w", setting, field, err)
}

// settleAttempts is how many times an outcome is sent before the worker
// gives up when its task has no lock to bound the retries: a streamed task
// released before it started (see settle).
const settleAttempts = 5

// settleTimeout bounds one complete, fail or extend request.
const settleTimeout = 30 * time.Second

// defaultIDs counts the Workers New gave a default WorkerID.
var defaultIDs atomic.Int64

// New checks cfg, fills in its defaults and returns a Worker.
func New(cfg Config) (*Worker, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("worker: URL %q must be an absolute http or https URL", cfg.URL)
	}
	// The worker adds the paths it calls (/api/v1/pull/..., the stream's
	// service path); a URL ending in the API's path would double it, and
	// the stream would only see refusals it takes for server errors.
	if p := strings.TrimRight(u.Path, "/"); strings.HasSuffix(p, "/api/v1") || strings.Contains(p, "/api/v1/") {
		return nil, fmt.Errorf("worker: URL %q must be Relais's base URL, without %s (the worker adds the paths it calls)", cfg.URL, u.Path)
	}
	if strings.ContainsAny(cfg.URL, "?#") || u.User != nil {
		// The worker joins paths to the URL: a query or fragment, even an
		// empty one, would end up in every path, and credentials belong
		// in Token (said redacted: the error is likely logged).
		return nil, fmt.Errorf("worker: URL %q must be Relais's base URL, without a query, a fragment or credentials (the token goes in Token)", u.Redacted())
	}
	switch {
	case cfg.Token == "" && cfg.TokenFunc == nil:
		return nil, errors.New("worker: a consumer Token (or a TokenFunc) is required")
	case cfg.Token != "" && cfg.TokenFunc != nil:
		return nil, errors.New("worker: give Token or TokenFunc, not both")
	case cfg.Token != "":
		tok, err := cleanToken(cfg.Token)
		if err != nil {
			return nil, fmt.Errorf("worker: Token: %w", err)
		}
		cfg.Token = tok
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"Concurrency", cfg.Concurrency < 0}, {"LockDuration", cfg.LockDuration < 0}, {"Wait", cfg.Wait < 0},
		{"ShutdownTimeout", cfg.ShutdownTimeout < 0}, {"HandlerTimeout", cfg.HandlerTimeout < 0},
	} {
		if f.neg {
			return nil, fmt.Errorf("worker: %s must not be negative (zero gives the default)", f.name)
		}
	}
	if cfg.LockDuration > 0 && cfg.LockDuration < time.Second {
		// Relais refuses a lock under a second on both protocols: say so
		// here, not when Run first fetches.
		return nil, fmt.Errorf("worker: LockDuration %v is under Relais's floor of 1s", cfg.LockDuration)
	}
	switch cfg.Protocol {
	case ProtocolAuto, ProtocolStream, ProtocolLongPoll:
	default:
		return nil, fmt.Errorf("worker: Protocol %q is not %q, %q or empty (auto)", cfg.Protocol, ProtocolStream, ProtocolLongPoll)
	}
	if cfg.WorkerID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "worker"
		}
		cfg.WorkerID = host + "-" + strconv.Itoa(os.Getpid())
		// Several Workers of one process (one per definition that keeps
		// its slots) would share the id, and each stream replace the
		// other's: the second and later are told apart.
		if n := defaultIDs.Add(1); n > 1 {
			cfg.WorkerID += "-" + strconv.FormatInt(n, 10)
		}
	}
	if len(cfg.WorkerID) > 200 {
		return nil, errors.New("worker: WorkerID must be at most 200 bytes")
	}
	if strings.TrimSpace(cfg.WorkerID) != cfg.WorkerID || strings.ContainsFunc(cfg.WorkerID, unicode.IsControl) {
		// As Relais refuses it at the first fetch or subscription.
		return nil, fmt.Errorf("worker: WorkerID %q must not begin or end with white space or hold control characters", cfg.WorkerID)
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.LockDuration = cmp.Or(cfg.LockDuration, DefaultLockDuration)
	cfg.Wait = cmp.Or(cfg.Wait, DefaultWait)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.HandlerTimeout = cmp.Or(cfg.HandlerTimeout, DefaultHandlerTimeout)
	ownClient := false
	if cfg.HTTPClient == nil {
		tr, ok := http.DefaultTransport.(*http.Transport)
		if ok {
			tr = tr.Clone()
		} else {
			tr = &http.Transport{Proxy: http.ProxyFromEnvironment}
		}
		// Each running handler may extend or settle while a long poll is
		// open: keep that many connections rather than redial each time.
		tr.MaxIdleConnsPerHost = cfg.Concurrency + 1
		cfg.HTTPClient = &http.Client{Transport: tr, Timeout: cfg.Wait + pollMargin}
		ownClient = true
	} else if t := cfg.HTTPClient.Timeout; t > 0 && t < cfg.Wait+minPollMargin {
		return nil, fmt.Errorf("worker: HTTPClient.Timeout %v would cut long polls of %v short; use at least %v", t, cfg.Wait, cfg.Wait+minPollMargin)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.SettleWindow == 0 {
		cfg.SettleWindow = DefaultSettleWindow
	}
	w := &Worker{
		cfg:              cfg,
		base:             strings.TrimRight(u.String(), "/"),
		log:              logger.With("worker_id", cfg.WorkerID),
		handlers:         map[string]route{},
		ownClient:        ownClient,
		sleep:            sleepCtx,
		reachable:        make(chan struct{}, 1),
		fetchBackoff:     backoff{min: 500 * time.Millisecond, max: 30 * time.Second},
		settleBackoff:    backoff{min: 200 * time.Millisecond, max: 5 * time.Second},
		shutdownGrace:    5 * time.Second,
		subscribeTimeout: defaultSubscribeTimeout,
	}
	if cfg.SettleWindow > 0 {
		w.batch = &settleBatch{w: w, window: cfg.SettleWindow, max: maxSettleBatch}
	}
	return w, nil
}

// defaultSubscribeTimeout is how long a subscription waits for the
// stream's first heartbeat, which Relais sends at once.
const defaultSubscribeTimeout = 30 * time.Second

// maxSettleBatch is the most outcomes one batch report carries.
const maxSettleBatch = 50

// Handle registers h for tasks of definition, in the revisions it
// understands (nil or empty: every revision granted to the consumer,
// revisions published later included, breaking ones too: `relais apply`
// and the definition's diff say which changes break). definition
// may be a pattern, as subscriptions accept: "crm.*" (every key under that
// namespace, keys created later included) or "*", with nil revisions; a
// task goes to the handler of its own key if there is one, else to that
// of the longest pattern matching it. It must be called before Run; it
// panics on a second handler for one definition, or on revisions given
// with a pattern, like http.ServeMux, because those are programming errors.
func (w *Worker) Handle(definition string, revisions []int, h Handler) {
	if definition == "" || h == nil {
		panic("worker: Handle needs a definition and a handler")
	}
	if strings.HasSuffix(definition, "*") && len(revisions) > 0 {
		panic(fmt.Sprintf("worker: pattern %q takes every revision: pass nil revisions", definition))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("worker: Handle called after Run")
	}
	if _, dup := w.handlers[definition]; dup {
		panic(fmt.Sprintf("worker: definition %q is already handled", definition))
	}
	w.handlers[definition] = route{revisions: slices.Clone(revisions), h: h}
}

// HandlerTimeout bounds the handler of definition, instead of
// Config.HandlerTimeout, as that bounds every other one: a Worker serving
// both quick tasks and long ones (a 20-minute render) keeps a short
// default and gives the long definition its own. Call it after Handle for
// definition and before Run; like Handle, it panics otherwise, and on a
// timeout not above 0.
func (w *Worker) HandlerTimeout(definition string, d time.Duration) {
	if d <= 0 {
		panic(fmt.Sprintf("worker: HandlerTimeout for %q must be above 0, not %v", definition, d))
	}
	w.configure("HandlerTimeout", definition, func(rt *route) { rt.timeout = d })
}

// configure changes the route of definition, which Handle registered,
// before Run; method names the caller in its panics.
func (w *Worker) configure(method, definition string, change func(*route)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("worker: " + method + " called after Run")
	}
	rt, ok := w.handlers[definition]
	if !ok {
		panic(fmt.Sprintf("worker: %s for %q, which has no handler: call Handle first (a pattern's handler is configured by the pattern given to Handle)", method, definition))
	}
	change(&rt)
	w.handlers[definition] = rt
}

// Fields declares the inputs the handler of definition needs, as JSON
// pointers into its inputs contract ("/company_name", "/contact/email"):
// Relais then delivers only those and their parents, over either
// protocol (data minimization: a value never delivered is never exposed,
// whatever its classification). Without Fields a handler receives every
// input. Call it after Handle for definition and before Run; like Handle,
// it panics otherwise. A pointer the contract lacks in a subscribed
// revision (or one inside a list: declare the list) ends Run with Relais's
// refusal, an *APIError naming it.
func (w *Worker) Fields(definition string, pointers ...string) {
	if len(pointers) == 0 {
		panic(fmt.Sprintf("worker: Fields for %q names no field", definition))
	}
	w.configure("Fields", definition, func(rt *route) { rt.fields = slices.Clone(pointers) })
}

// Run fetches and handles tasks until ctx ends, then shuts down
// gracefully: it stops fetching (abandoning a pending long poll), lets
// in-flight handlers finish and report (their contexts are not derived
// from ctx's cancellation), and returns nil. Handlers still running after
// Config.ShutdownTimeout have their contexts cancelled; Run returns an
// error wrapping ErrShutdownTimeout if some of them then ignore the
// cancellation for a few more seconds, and one wrapping
// ErrOutcomesUnreported if an outcome could not be reported while it shut
// down (Relais unreachable until the task's lock expired). An outcome that
// Relais refused (its token revoked meanwhile, say) is logged at WARN, as
// it is while Run works, and is not Run's error.
//
// Errors that retrying cannot fix end Run early, after the same
// shutdown: a fetch refused with a 4xx other than 408 and 429 (bad token,
// definition not granted, bound exceeded) is returned as an *APIError.
// Network errors and 5xx are retried with backoff. Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("worker: Run called twice")
	}
	if len(w.handlers) == 0 {
		w.mu.Unlock()
		return errors.New("worker: no handler; call Handle before Run")
	}
	w.started = true
	w.mu.Unlock()

	// Handlers and settlements outlive ctx's cancellation (graceful
	// shutdown) but keep its values.
	detached := context.WithoutCancel(ctx)
	handlerCtx, stopHandlers := context.WithCancelCause(detached)
	defer stopHandlers(nil)
	r := &run{
		w:          w,
		subs:       w.subscriptions(),
		slots:      make(chan struct{}, w.cfg.Concurrency),
		handlerCtx: handlerCtx,
		settleCtx:  detached,
		goroutines: newGoroutines(),
	}
	protocol := cmp.Or(string(w.cfg.Protocol), "auto")
	w.log.InfoContext(ctx, "worker started", "concurrency", w.cfg.Concurrency, "definitions", len(r.subs), "protocol", protocol)
	defer w.connected.Store(false)
	var fatal error
	if w.cfg.Protocol == ProtocolLongPoll {
		fatal = r.fetchLoop(ctx)
	} else {
		var fallback bool
		fallback, fatal = r.streamLoop(ctx)
		if fallback {
			fatal = r.fetchLoop(ctx)
		}
	}
	fatal = w.configBound(fatal)
	r.draining.Store(true)
	if fatal != nil {
		// Not a clean stop: said at the stop itself, which a reader of
		// the log skims (newcomer QA: a refused token read as a shutdown).
		w.log.ErrorContext(detached, "worker stopping: Relais refused it, and Run returns the error; waiting for in-flight tasks", "in_flight", len(r.slots), "err", fatal)
	} else {
		w.log.InfoContext(detached, "worker stopping; waiting for in-flight tasks", "in_flight", len(r.slots))
	}
	if r.stream != nil {
		// The stream stays open, and keeps the locks alive, until the
		// tasks in flight are settled or released.
		r.stream.drain()
	}
	drained := r.drain(stopHandlers)
	r.goroutines.stop(!errors.Is(drained, ErrShutdownTimeout))
	err := errors.Join(fatal, drained)
	if r.stream != nil {
		r.stream.close()
	}
	r.dropOrphans()
	// Nobody else uses these connections: leave no goroutine behind.
	w.Close()
	return err
}

func (w *Worker) subscriptions() []subscription {
	subs := make([]subscription, 0, len(w.handlers))
	for def, rt := range w.handlers {
		subs = append(subs, subscription{Definition: def, Revisions: rt.revisions, Fields: rt.fields})
	}
	slices.SortFunc(subs, func(a, b subscription) int { return cmp.Compare(a.Definition, b.Definition) })
	return subs
}

// nameSubscriptions adds the key of the subscription a refusal's pointer
// designates (/subscriptions/1/definition) to its message: the worker
// sorted its subscriptions, so the index alone tells its user nothing.
func (r *run) nameSubscriptions(err error) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err
	}
	for i, fe := range ae.Errors {
		rest, ok := strings.CutPrefix(fe.Path, "/subscriptions/")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
		if err != nil || n < 0 || n >= len(r.subs) {
			continue
		}
		ae.Errors[i].Message = fmt.Sprintf("%s (the handler for %q)", fe.Message, r.subs[n].Definition)
	}
	return err
}

// run is the state of one Run.
type run struct {
	w    *Worker
	subs []subscription
	// slots holds one token per task reserved and not yet settled, so
	// its free capacity is what the next fetch may ask for.
	slots      chan struct{}
	handlerCtx context.Context
	settleCtx  context.Context
	wg         sync.WaitGroup
	// handling counts handlers still running; wg also counts tasks whose
	// handler returned and whose outcome is still being reported.
	handling atomic.Int64
	// stream is the worker stream in use, if any.
	stream *streamSession
	// waiting holds streamed tasks waiting for a slot (see
	// streamSession.assigned), under waitMu, which is taken before a
	// session's mu, never after.
	waitMu  sync.Mutex
	waiting []waitingTask
	// unreported counts the outcomes (completions and failures) that could
	// not be reported (Relais unreachable until the lock expired) since the
	// run began to stop; draining says it has.
	unreported atomic.Int64
	draining   atomic.Bool
	// assigned maps a streamed occurrence's id to its latest assignment
	// (*Task), across the run's streams: a handler whose stream ended
	// reports nothing once its task was assigned again, which the new
	// attempt settles.
	assigned sync.Map
	// running maps an occurrence's id to a channel closed when this run's
	// handler of it returns (see waitEarlierAttempt), under runningMu.
	runningMu sync.Mutex
	running   map[string]chan struct{}
	// goroutines runs the tasks' handling.
	goroutines *goroutines
	// orphans are the started streamed tasks whose stream ended, by
	// occurrence id, until a new stream resumes them (see run.orphan),
	// under orphanMu, which is taken before a session's mu, never after.
	orphanMu sync.Mutex
	orphans  map[string]*orphan
}

// drain waits for in-flight tasks, cancelling them past the shutdown
// timeout.
func (r *run) drain(stopHandlers context.CancelCauseFunc) error {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(r.w.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
		return r.stopped()
	case <-timer.C:
	}
	if n := r.handling.Load(); n > 0 {
		r.w.log.Warn("shutdown timeout; cancelling in-flight handlers", "handlers", n)
	} else {
		r.w.log.Warn("shutdown timeout; every handler returned, their outcomes are still being reported")
	}
	stopHandlers(ErrShutdownTimeout)
	grace := time.NewTimer(r.w.shutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return r.stopped()
	case <-grace.C:
	}
	if r.handling.Load() == 0 {
		// Every handler returned: what is left is reporting outcomes,
		// retried until their locks expire (Config.ShutdownTimeout's
		// documentation says so). Cutting it short would have the
		// finished work done again once the locks expire.
		r.w.log.Warn("handlers returned; waiting for their outcomes to be reported, at most until their locks expire")
		<-done
		return r.stopped()
	}
	// Returning beats hanging forever on a handler that ignores its
	// context; its lock simply expires.
	n := r.handling.Load()
	r.w.log.Error("handlers ignored cancellation; abandoning them", "in_flight", n)
	if n == 1 {
		return fmt.Errorf("%w: 1 handler did not return after cancellation", ErrShutdownTimeout)
	}
	return fmt.Errorf("%w: %d handlers did not return after cancellation", ErrShutdownTimeout, n)
}

// stopped ends a drain whose tasks all ended: nil, or ErrOutcomesUnreported
// when some outcome could not be reported while it drained (their tasks
// run again once their locks expire), so that a supervisor sees it.
func (r *run) stopped() error {
	if n := r.unreported.Load(); n > 0 {
		r.w.log.Error("worker stopped; outcomes were not reported", "unreported", n)
		return fmt.Errorf("%w: %d while shutting down; their tasks will run again once their locks expire", ErrOutcomesUnreported, n)
	}
	r.w.log.Info("worker stopped")
	return nil
}

// acquire blocks until at least one slot is free, then takes every free
// slot; it returns how many it took, or 0 once ctx ends.
func (r *run) acquire(ctx context.Context) int {
	if ctx.Err() != nil {
		// select picks at random among ready cases: check first.
		return 0
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < cap(r.slots) {
		select {
		case r.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (r *run) release(n int) {
	for range n {
		<-r.slots
	}
}

type subscription struct {
	Definition string   `json:"definition"`
	Revisions  []int    `json:"revisions,omitempty"`
	Fields     []string `json:"fields,omitempty"`
}

type fetchRequest struct {
	WorkerID      string         `json:"worker_id"`
	Subscriptions []subscription `json:"subscriptions"`
	MaxTasks      int            `json:"max_tasks"`
	LockDuration  string         `json:"lock_duration"`
	Wait          string         `json:"wait"`
	RequestID     string         `json:"request_id"`
}

const fetchPath = "/api/v1/pull/fetch-and-lock"

// fetchLoop fetches while there is room, until ctx ends (nil) or the
// server refuses the fetch for good (the error).
func (r *run) fetchLoop(ctx context.Context) error {
	w := r.w
	bo := w.fetchBackoff
	// rotated is set once a 401 was met and fetched again at once: a long
	// poll that waited through a rotation's overlap went with the old
	// token, and TokenFunc's next read is likely the new one (Go SDK QA:
	// a clean rotation logged a warning).
	rotated := false
	for {
		n := r.acquire(ctx)
		if n == 0 {
			return nil
		}
		started := time.Now()
		tasks, err := r.fetch(ctx, n)
		// Answered, if only to wait (429 too_many_waiters): still
		// connected; unreachable or unavailable (5xx): not.
		var ae *APIError
		w.connected.Store(err == nil || errors.As(err, &ae) && ae.Status < 500)
		if err != nil {
			r.release(n)
			if ctx.Err() != nil {
				return nil
			}
			if !w.transient(err) {
				// Logged once, where Run stops with it.
				err = r.nameSubscriptions(err)
				return fmt.Errorf("worker: fetch-and-lock: %w", err)
			}
			if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized && w.cfg.TokenFunc != nil && !rotated {
				rotated = true
				w.log.Info("the fetch's token no longer authenticates (a rotation?); fetching again at once with TokenFunc's token", "err", err)
				continue
			}
			d := max(bo.next(), retryAfter(err))
			w.log.Warn("fetch failed; retrying", "err", err, "delay", d.String())
			if !w.sleep(ctx, d) {
				return nil
			}
			continue
		}
		rotated = false
		r.release(n - min(len(tasks), n))
		if len(tasks) == 0 {
			// An empty answer normally comes at the end of the wait. One
			// that comes early (a server shutting down answers at once)
			// must not turn this loop into a busy one.
			if time.Since(started) < w.cfg.Wait/2 {
				if !w.sleep(ctx, bo.next()) {
					return nil
				}
			} else {
				bo.reset()
			}
			continue
		}
		bo.reset()
		lock := r.lockEstimate(started, time.Now())
		for i, t := range tasks {
			if i >= n {
				r.giveBack(t)
				continue
			}
			r.start(t, lock)
		}
	}
}

// lockEstimate says when, by the local clock, the locks of tasks fetched
// by a request sent at started and answered at received expire.
//
// The server locks a task when it claims it: after the request was
// sent, so started+LockDuration is a safe bound, unless the fetch
// long-polled, when the claim may have come much later (even past that
// bound). The worker then assumes the claim came just before the answer
// and extends at once, which gives it a safe bound a round trip later.
func (r *run) lockEstimate(started, received time.Time) lockState {
	d := r.w.cfg.LockDuration
	took := received.Sub(started)
	if took <= d/4 {
		return lockState{expiry: started.Add(d)}
	}
	// Past half the lock, the claim may be old enough for the lock to
	// lapse before an extension sent beside the handler lands: a worker
	// frozen with an answer in its socket resumed to run handlers for
	// tasks already offered to others (Go SDK QA). No long poll within
	// half the lock (the defaults' 20 s of 60) pays for the check.
	return lockState{expiry: received.Add(d), extendNow: true, confirm: took > d/2}
}

// lockState is what the worker knows of a lock it holds.
type lockState struct {
	expiry    time.Time // local clock
	extendNow bool      // expiry is a guess: extend at once
	confirm   bool      // and before the handler starts
}

// fetch reserves up to n tasks, long-polling.
func (r *run) fetch(ctx context.Context, n int) ([]*Task, error) {
	w := r.w
	req := fetchRequest{
		WorkerID:      w.cfg.WorkerID,
		Subscriptions: r.subs,
		MaxTasks:      n,
		LockDuration:  isoduration.Format(w.cfg.LockDuration),
		Wait:          isoduration.Format(w.cfg.Wait),
		RequestID:     newRequestID(),
	}
	var out struct {
		Occurrences []*Task `json:"occurrences"`
	}
	err := r.post(ctx, req, &out)
	if err != nil && isNetworkError(err) && !neverSent(err) && ctx.Err() == nil {
		// The server may have reserved tasks for a request whose answer
		// was lost. The same request_id replays those reservations
		// instead of stranding them until their locks expire.
		w.log.Warn("fetch interrupted; replaying it once", "err", err)
		out.Occurrences = nil
		err = r.post(ctx, req, &out)
	}
	if err != nil && ctx.Err() != nil && !neverSent(err) {
		r.handBackCutFetch(ctx, req)
	}
	return out.Occurrences, err
}

// handBackCutFetch gives back what a fetch the shutdown cut short may have
// claimed: a server that claimed tasks as the worker left answered into a
// closed connection, and they would wait for their locks to lapse, an
// attempt spent each. The same request_id without a wait answers what the
// fetch still holds (or claims what is available now, given back alike).
func (r *run) handBackCutFetch(ctx context.Context, req fetchRequest) {
	w := r.w
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	req.Wait = isoduration.Format(0)
	var out struct {
		Occurrences []*Task `json:"occurrences"`
	}
	if err := w.post(pctx, fetchPath, req, &out); err != nil {
		w.log.Debug("asking what a fetch cut short by the shutdown had claimed failed", "err", err)
		return
	}
	for _, t := range out.Occurrences {
		t.wire = restWire{w}
		r.handBack(t, w.log.With(taskAttrs(t)...))
	}
}

func (r *run) post(ctx context.Context, req fetchRequest, out any) error {
	ctx, cancel := context.WithTimeout(ctx, r.w.cfg.Wait+pollMargin)
	defer cancel()
	return r.w.post(ctx, fetchPath, req, out)
}

// start runs a fetched task's handler in its own goroutine, holding one
// slot, and keeps its lock by extending it.
func (r *run) start(t *Task, lock lockState) {
	t.wire = restWire{r.w}
	ctx, cancel := context.WithCancelCause(r.handlerCtx)
	held := newHeldLock(ctx, lock.expiry)
	t.held = held
	keep := func(ctx context.Context, lose context.CancelCauseFunc) {
		r.keepLock(ctx, lose, t, lock, held, r.w.log.With(taskAttrs(t)...))
	}
	// Past its deadline Relais fails the occurrence, which a long poll's
	// handler would learn only at its next extension (half a lock later):
	// its context ends at the deadline, reckoned on the local clock from
	// the lock's expiry (the server's two times apart, never the server's
	// clock against this one).
	deadline := func() {}
	if t.DeadlineAt != nil && !t.LockExpiresAt.IsZero() {
		at := time.AfterFunc(time.Until(lock.expiry.Add(t.DeadlineAt.Sub(t.LockExpiresAt))), func() {
			cancel(fmt.Errorf("%w (deadline exceeded)", ErrCancelled))
		})
		deadline = func() { at.Stop() }
	}
	r.wg.Add(1)
	r.goroutines.run(func() {
		defer r.wg.Done()
		defer r.release(1)
		defer deadline()
		if lock.confirm && !r.confirmLock(ctx, t, &lock, held) {
			cancel(nil)
			return
		}
		r.process(t, r.handler(t), ctx, cancel, keep)
	})
}

// confirmLock extends a lock that may have lapsed before the handler
// starts, and says whether the worker still holds it. A lock it lost is
// not reported: the occurrence is Relais's again, or another worker's.
func (r *run) confirmLock(ctx context.Context, t *Task, lock *lockState, held *heldLock) bool {
	log := r.w.log.With(taskAttrs(t)...)
	next, err := r.extend(ctx, t.ID, t.Attempt, lock.expiry, log)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrCancelled):
			// Stopped or past its deadline while the answer was late:
			// not a lock lost (verifier QA).
			log.Info("task cancelled by Relais before its handler started", "cause", err)
		default:
			log.Warn("the fetch that claimed this task was answered late (a stalled worker or network); its lock is gone, so its handler is not started", "cause", err)
		}
		return false
	}
	*lock = lockState{expiry: next}
	held.extended(next)
	return true
}

// handler returns the handler of t's definition.
func (r *run) handler(t *Task) route {
	r.w.mu.Lock()
	rt, ok := r.w.handlers[t.Definition]
	if !ok {
		// A pattern subscription delivers keys it matches: the most
		// specific pattern's handler takes them.
		best := -1
		for def, pr := range r.w.handlers {
			prefix, isPattern := strings.CutSuffix(def, "*")
			if isPattern && strings.HasPrefix(t.Definition, prefix) && len(prefix) > best {
				rt, ok, best = pr, true, len(prefix)
			}
		}
	}
	r.w.mu.Unlock()
	if !ok {
		// Only a server bug could deliver an unsubscribed definition;
		// fail it retryably so another worker may take it.
		rt.h = func(context.Context, *Task) (any, error) {
			return nil, Retry("no_handler", 0, fmt.Errorf("worker %s has no handler for %s", r.w.cfg.WorkerID, t.Definition))
		}
	}
	rt.timeout = cmp.Or(rt.timeout, r.w.cfg.HandlerTimeout)
	return rt
}

// giveBack returns a task the server sent beyond max_tasks (it never
// should) at once, rather than run more handlers than allowed.
func (r *run) giveBack(t *Task) {
	t.wire = restWire{r.w}
	log := r.w.log.With(taskAttrs(t)...)
	log.Error("server sent more tasks than asked; giving one back")
	r.settleFail(t, failRequest{ErrorCode: "worker_at_capacity", Message: "the worker had no free slot for this task",
		Retryable: true, RetryDelay: isoduration.Format(0)}, log)
}
