// Package push delivers push occurrences (DESIGN §4): a runner inside each
// replica claims them, makes one synchronous call per occurrence within a
// hard budget, and settles the result through the engine. There is no
// automatic retry. It also serves the destinations admin routes.
package push

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/outage"
	"github.com/relais/relais/internal/pgfault"
)

// fallbackPoll bounds how long the runner trusts notifications alone.
const fallbackPoll = time.Second

// Runner makes push calls for one replica.
type Runner struct {
	eng      *engine.Engine
	logger   *slog.Logger
	cfg      config.Push
	client   *http.Client
	workerID string

	wake      chan struct{}
	draining  chan struct{}
	drainOnce sync.Once
	mu        sync.Mutex
	// inflight maps an occurrence to the cancel of its call, so stopping
	// the instance aborts the call (ChannelCancel).
	inflight map[uuid.UUID]context.CancelCauseFunc
	calls    sync.WaitGroup

	results *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// NewRunner returns a runner; call Run.
// transportBackstop bounds a TLS handshake and the wait for an answer's
// headers, should a call's deadline fail to: twice the longest budget.
const transportBackstop = 2 * process.HardMaxPushTimeout

func NewRunner(eng *engine.Engine, logger *slog.Logger, cfg config.Push, reg prometheus.Registerer) *Runner {
	// Named after the replica as the Workers page names it (host-4242),
	// not in a spelling of its own (on-call QA). A unit test's runner
	// may have no engine.
	replica := engine.DefaultReplica
	if eng != nil {
		replica = eng.Replica()
	}
	r := &Runner{eng: eng, logger: logger, cfg: cfg, workerID: "relais-push@" + replica,
		wake: make(chan struct{}, 1), draining: make(chan struct{}), inflight: map[uuid.UUID]context.CancelCauseFunc{},
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "relais_push_calls_total", Help: "Push calls by result code (ok or the error code)."}, []string{"result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "relais_push_call_duration_seconds",
			Help: "Push call duration by destination and outcome: ok (a 2xx {\"outputs\"} answer, checked against the contract afterwards), " +
				"http_error (a non-2xx status), deadline_exceeded, connection_failed, outcome_unknown (the request was sent, its answer lost), invalid_outputs, response_too_large, aborted (instance stopped), unprepared.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"destination", "outcome"}),
	}
	// Present from the start at 0: the first failure after a restart is
	// then a rise that rate() and increase() see.
	for _, result := range []string{"ok", engine.CodeConnectionFailed, engine.CodeDeadlineExceeded, engine.CodeOutcomeUnknown, engine.CodeInvalidOutputs,
		engine.CodeResponseTooLarge, engine.CodePushUnprepared, engine.CodeCallAborted} {
		r.results.WithLabelValues(result)
	}
	if reg != nil {
		reg.MustRegister(r.results, r.latency)
	}
	r.client = &http.Client{
		Transport: &http.Transport{
			// Calls go where the destination says, never through an
			// environment proxy.
			Proxy:               nil,
			DialContext:         countingDial((&net.Dialer{KeepAlive: 30 * time.Second}).DialContext),
			MaxIdleConnsPerHost: cfg.Concurrency,
			IdleConnTimeout:     idleConnTimeout,
			// Backstops only, past the longest budget: the call's own
			// deadline must end it first, or a call with the longest
			// budget raced them and was said outcome_unknown instead of
			// deadline_exceeded half the time (verifier QA), which
			// on_error branches on.
			TLSHandshakeTimeout:   transportBackstop,
			ResponseHeaderTimeout: transportBackstop,
			// Bounded as the body is (push QA: 10 MiB of headers a call).
			MaxResponseHeaderBytes: cfg.MaxResponseBytes,
			// The body is decoded here, whole (see decode): net/http's
			// own decoding makes a gzip that is none read as a lost answer.
			DisableCompression: true,
		},
		// A redirect is an answer, not an instruction: following it would
		// send the inputs somewhere the admin did not register.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return r
}

// Notify handles a ChannelOccurrence payload: push availability wakes the
// runner.
func (r *Runner) Notify(payload string) {
	if mode, _, _, _, ok := engine.ParseAvailabilityPayload(payload); ok && mode == engine.ModePush {
		r.poke()
	}
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Cancel handles a ChannelCancel payload: it aborts the call of a cancelled
// occurrence if this replica is making it.
func (r *Runner) Cancel(payload string) {
	id, reason, ok := engine.ParseCancelPayload(payload)
	if !ok {
		return
	}
	r.mu.Lock()
	cancel := r.inflight[id]
	r.mu.Unlock()
	if cancel != nil {
		cancel(cancelled{reason: reason})
	}
}

// Drain stops the runner claiming calls: a replica that is stopping
// leaves new ones to the others, and its stop waits only for the calls in
// flight (each bounded by its budget). Run then returns once they ended.
func (r *Runner) Drain() { r.drainOnce.Do(func() { close(r.draining) }) }

// Run claims and calls until ctx ends or Drain, then waits for calls in
// flight (each is bounded by its budget).
func (r *Runner) Run(ctx context.Context) {
	slots := make(chan struct{}, r.cfg.Concurrency)
	timer := time.NewTimer(0)
	defer timer.Stop()
	defer r.calls.Wait()
	claims := outage.New(r.logger, "push claim")
	// A replica lacking a data key hands back what it cannot open and
	// pauses its claims, doubling from 1 s to 30 s: the replicas that
	// have the key make those calls meanwhile, and this one does not
	// claim them again at every wake-up.
	var paused time.Duration
	var pausedUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.draining:
			return
		case <-r.wake:
		case <-timer.C:
		}
		select {
		case <-r.draining:
			// select picks at random among ready cases: a wake-up must not
			// claim once Drain was called.
			return
		default:
		}
		free := r.cfg.Concurrency - len(slots)
		if wait := time.Until(pausedUntil); wait > 0 {
			timer.Reset(wait)
			continue
		}
		if free > 0 {
			// A claim runs to its end: cancelled as its COMMIT went out,
			// it could reserve calls that are never made (and failed
			// outcome_unknown once their reservation lapses).
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
			calls, unprepared, err := r.eng.ClaimPush(cctx, r.workerID, free)
			cancel()
			switch {
			case err == nil:
				claims.Succeeded()
			case ctx.Err() == nil:
				claims.Failed(err)
			}
			keyless := false
			for _, u := range unprepared {
				keyless = keyless || u.KeyMissing
				r.calls.Go(func() { r.handBack(ctx, u) })
			}
			switch {
			case keyless:
				paused = min(max(2*paused, time.Second), 30*time.Second)
				pausedUntil = time.Now().Add(paused)
				r.logger.Warn("push claims paused: this replica lacks a data key the calls were sealed with; the replicas that have it make them", "for", paused)
			case len(calls) > 0:
				paused = 0
			}
			for _, c := range calls {
				slots <- struct{}{}
				r.start(ctx, c, func() { <-slots; r.poke() })
			}
			if len(calls) == free {
				r.poke() // maybe more waiting
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(fallbackPoll)
	}
}

func (r *Runner) start(ctx context.Context, c engine.PushCall, done func()) {
	budget := engine.CallBudget(c.Timeout, nil, r.cfg.MaxTimeout)
	// The call outlives a replica shutdown request for at most its budget:
	// abandoning it would leave its outcome unknown.
	base, cancelWhy := context.WithCancelCause(context.WithoutCancel(ctx))
	callCtx, cancel := context.WithTimeout(base, budget)
	r.mu.Lock()
	r.inflight[c.ID] = cancelWhy
	r.mu.Unlock()
	r.calls.Go(func() {
		defer done()
		defer func() {
			r.mu.Lock()
			delete(r.inflight, c.ID)
			r.mu.Unlock()
			cancel()
			cancelWhy(nil)
		}()
		started := time.Now()
		res := r.call(callCtx, c, budget)
		res.Took = time.Since(started)
		if res.ErrorCode != "" {
			// Not the message: it may quote what the destination answered,
			// which is scrubbed of protected values only when stored. A
			// call a stop aborted is no destination's problem.
			level := slog.LevelWarn
			if res.ErrorCode == engine.CodeCallAborted {
				level = slog.LevelInfo
			}
			r.logger.Log(ctx, level, "push call failed", "occurrence", c.ID, "destination", c.Destination, "code", res.ErrorCode,
				"took", res.Took.Round(time.Millisecond))
		}
		// Settlement gets its own short context: the call's may be spent.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer scancel()
		// The metrics wait for the settlement: a 2xx whose outputs break
		// the contract is a failed call (invalid_outputs), which only the
		// engine, holding the pinned revision, can tell.
		result := r.settle(sctx, ctx.Done(), c, res)
		r.latency.WithLabelValues(c.Destination, outcomeOf(result)).Observe(res.Took.Seconds())
		if result == "" {
			result = "ok"
		}
		r.results.WithLabelValues(result).Inc()
	})
}

// claimTimeout bounds one claim of calls.
const claimTimeout = 10 * time.Second

// settleTimeout bounds the recording of one call's result, retries
// included: the call's lock outlasts it (engine.PushGrace).
const settleTimeout = engine.PushSettleWindow

// settle records the result of c's call and returns the code the
// occurrence failed with ("" when it completed; the call's own code when
// the result could not be recorded). While the database cannot be
// reached (a restart, a failover), it tries again with backoff until ctx
// ends or the replica stops: a call the destination answered is recorded
// through a short outage rather than failed outcome_unknown by the timers
// once its reservation expires. Both cannot land: SettlePush and the timer
// each lock the occurrence and act only on the attempt still open, so
// whichever comes second changes nothing.
func (r *Runner) settle(ctx context.Context, stopping <-chan struct{}, c engine.PushCall, res engine.PushResult) string {
	var code string
	tries, err := untilReached(ctx, stopping, func(ctx context.Context) error {
		var err error
		code, err = r.eng.SettlePush(ctx, c.ID, c.Attempt, res)
		return err
	})
	switch {
	case err == nil:
		if tries > 1 {
			r.logger.Info("push result recorded once the database was back", "occurrence", c.ID, "tries", tries)
		}
		return code
	case !pgfault.Unreachable(err):
		r.logger.Info("push result not recorded", "occurrence", c.ID, "reason", err)
	default:
		r.logger.Warn("push result not recorded: the database could not be reached; the timers fail the call outcome_unknown once its reservation expires",
			"occurrence", c.ID, "tries", tries, "err", err)
	}
	return res.ErrorCode
}

// handBack hands back a reservation whose call was not prepared for the
// database's absence (no request was sent), trying again while the
// database cannot be reached, within the reservation's grace: handed back,
// the call is made once; left reserved, the timers would fail it as
// outcome_unknown, and page someone about a call no destination received.
func (r *Runner) handBack(ctx context.Context, u engine.PushReservation) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	tries, err := untilReached(hctx, ctx.Done(), func(ctx context.Context) error { return r.eng.HandBackPush(ctx, u) })
	switch {
	case err == nil:
		r.logger.Info("push occurrence handed back; its call is made once claimed again", "occurrence", u.ID, "tries", tries)
	default:
		r.logger.Warn("push occurrence not handed back: the timers fail it outcome_unknown once its reservation expires, though no request was sent",
			"occurrence", u.ID, "tries", tries, "err", err)
	}
}

// untilReached runs write until it succeeds or fails for another reason
// than the database's absence, ctx ends or the replica stops (stopping),
// waiting between tries with a backoff of 100 ms doubling up to 1 s. It
// returns the tries and write's last error.
func untilReached(ctx context.Context, stopping <-chan struct{}, write func(context.Context) error) (int, error) {
	delay := 100 * time.Millisecond
	for tries := 1; ; tries++ {
		err := write(ctx)
		if err == nil || !pgfault.Unreachable(err) {
			return tries, err
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-stopping:
		case <-timer.C:
			delay = min(2*delay, time.Second)
			continue
		}
		timer.Stop()
		return tries, err
	}
}

// outcomeOf is the outcome label of a call that ended with errorCode: the
// error codes the runner makes, with every HTTP status folded into
// http_error so the label keeps a handful of values per destination.
func outcomeOf(errorCode string) string {
	switch {
	case errorCode == "":
		return "ok"
	case strings.HasPrefix(errorCode, engine.CodeDestinationHTTP):
		return "http_error"
	case errorCode == engine.CodeCallAborted:
		return "aborted"
	case errorCode == engine.CodePushUnprepared:
		return "unprepared"
	}
	return errorCode
}

// callBody is what a destination receives.
type callBody struct {
	OccurrenceID uuid.UUID `json:"occurrence_id"`
	// Attempt is Relais-Attempt's number again, inside what the signature
	// covers: a receiver telling a repeat from a new attempt (an
	// operator's retry) by the signed body cannot be fooled by a replay
	// with another header.
	Attempt    int             `json:"attempt"`
	Definition string          `json:"definition"`
	Revision   int             `json:"revision"`
	Inputs     json.RawMessage `json:"inputs"`
	Deadline   *time.Time      `json:"deadline"`
}

// call makes the one HTTP exchange of c. ctx carries the hard budget for
// the whole exchange: connect, write, read.
func (r *Runner) call(ctx context.Context, c engine.PushCall, budget time.Duration) engine.PushResult {
	body, err := json.Marshal(callBody{OccurrenceID: c.ID, Attempt: c.Attempt, Definition: c.Definition, Revision: c.Revision, Inputs: c.Inputs, Deadline: c.DeadlineAt})
	if err != nil {
		return engine.PushResult{ErrorCode: engine.CodePushUnprepared, Message: "the request body could not be encoded"}
	}
	if _, err := url.Parse(c.URL); err != nil {
		return engine.PushResult{ErrorCode: engine.CodePushUnprepared, Message: "the destination URL is unusable"}
	}
	res, sent, err := r.exchange(ctx, c, body)
	if err != nil && strings.Contains(err.Error(), "server response headers exceeded") && ctx.Err() == nil {
		// net/http's refusal of headers past MaxResponseHeaderBytes has
		// no type of its own.
		return engine.PushResult{ErrorCode: engine.CodeResponseTooLarge, Message: fmt.Sprintf("the response's headers are larger than %d bytes", r.cfg.MaxResponseBytes)}
	}
	if err != nil {
		return transportFailure(ctx, err, budget, sent)
	}
	defer res.Body.Close()
	// The body as sent, decoded once whole: a gzip that does not decode
	// is then told from an answer cut short (push QA: a whole body that
	// said gzip and was none read as an answer lost, and a 503's hid its
	// status).
	raw, err := io.ReadAll(io.LimitReader(res.Body, r.cfg.MaxResponseBytes+1))
	if err != nil {
		// The destination answered: it had the whole request.
		return transportFailure(ctx, err, budget, true)
	}
	data, tooLarge, decodeErr := decode(res.Header.Get("Content-Encoding"), raw, r.cfg.MaxResponseBytes)
	if res.StatusCode < 200 || res.StatusCode > 299 {
		if decodeErr != nil {
			data = []byte("(a body that says Content-Encoding: gzip but is not valid gzip)")
		}
		body := snippet(data)
		if strings.TrimSpace(body) == "" {
			// Not a dangling colon (push QA).
			body = "(no body)"
		}
		msg := fmt.Sprintf("the destination answered %d: %s", res.StatusCode, body)
		if to := redirectHost(res); to != "" {
			msg = fmt.Sprintf("the destination answered %d, a redirect to %s (Relais follows none: register the URL it redirects to): %s", res.StatusCode, to, body)
		}
		if wait := res.Header.Get("Retry-After"); wait != "" && (res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable) {
			// Relais retries nothing by itself: whoever retries the
			// occurrence reads when the destination asked to be called
			// again.
			after := fmt.Sprintf("%.40q (Retry-After)", wait)
			if secs, err := strconv.Atoi(strings.TrimSpace(wait)); err == nil && secs >= 0 {
				after = fmt.Sprintf("%d seconds (Retry-After)", secs)
			}
			msg = fmt.Sprintf("the destination answered %d, asking to be called again after %s: %s", res.StatusCode, after, snippet(data))
		}
		return engine.PushResult{ErrorCode: engine.CodeDestinationHTTP + strconv.Itoa(res.StatusCode), Message: msg}
	}
	if tooLarge {
		return engine.PushResult{ErrorCode: engine.CodeResponseTooLarge, Message: fmt.Sprintf("the response is larger than %d bytes", r.cfg.MaxResponseBytes)}
	}
	if decodeErr != nil {
		// An answer that arrived whole but says gzip and is none (or is
		// cut, or fails its checksum): the destination's fault, not an
		// answer lost.
		return engine.PushResult{ErrorCode: engine.CodeInvalidOutputs, Message: "the response says Content-Encoding: gzip but is not valid gzip (" + decodeErr.Error() + `); a destination answers {"outputs": {...}}`}
	}
	answer := answerOf(data)
	if enc := strings.TrimSpace(res.Header.Get("Content-Encoding")); answer.ErrorCode != "" && enc != "" && !strings.EqualFold(enc, "gzip") && !strings.EqualFold(enc, "identity") {
		// Said as what it is, not as JSON that does not parse (push QA:
		// a deflate answer read "not a JSON object").
		answer.Message = fmt.Sprintf("the response says Content-Encoding: %.40q, which Relais did not ask for and does not read (it sends Accept-Encoding: gzip): answer gzip or no encoding", enc)
	}
	return answer
}

// decode is a response body as its Content-Encoding says, gzip or none
// (the only one Relais accepts; another is left as it is, for the JSON
// parse to refuse), at most limit bytes: tooLarge when the body, sent or
// decoded, is more.
func decode(encoding string, raw []byte, limit int64) (data []byte, tooLarge bool, err error) {
	if int64(len(raw)) > limit {
		return raw[:limit], true, nil
	}
	if !strings.EqualFold(strings.TrimSpace(encoding), "gzip") {
		return raw, false, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, false, err
	}
	data, err = io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}

// exchange sends c's request and returns the answer, and whether the
// whole request reached the network: a request that did not cannot have
// been acted on, one that did may have been, whatever happened next.
//
// net/http sends a request again by itself on a reused connection that
// breaks after it was written, when the request is replayable, which its
// Idempotency-Key header makes it: a second call the attempt never
// recorded. So the request has no GetBody, and exchange itself makes it
// again, once, only when not a byte of it reached a reused connection (one
// the destination closed while it sat idle). What reached the network is
// counted on the connection (countingConn): net/http's WroteRequest trace
// fires once the request is in the connection's buffer, before it is
// flushed.
func (r *Runner) exchange(ctx context.Context, c engine.PushCall, body []byte) (*http.Response, bool, error) {
	for try := 0; ; try++ {
		var (
			conn        atomic.Pointer[countingConn]
			written     int64 // the connection's bytes and failed writes when it was taken
			failed      int64
			reused      bool
			serializeOK atomic.Bool
		)
		trace := &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if cc := asCounting(info.Conn); cc != nil {
					written, failed, reused = cc.written.Load(), cc.failed.Load(), info.Reused
					conn.Store(cc)
				}
			},
			WroteRequest: func(info httptrace.WroteRequestInfo) { serializeOK.Store(info.Err == nil) },
		}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.URL, bytes.NewReader(body))
		if err != nil {
			return nil, false, err
		}
		req.GetBody = nil
		for k, v := range c.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Idempotency-Key", c.ID.String())
		// The key is the occurrence's, the same on every attempt: a
		// destination that keeps answers by key tells a new attempt (a
		// retry an operator ordered) by its number.
		req.Header.Set("Relais-Attempt", strconv.Itoa(c.Attempt))
		req.Header.Set("User-Agent", "relais-push")
		req.Header.Set("Accept-Encoding", "gzip")
		if c.SigningSecret != "" {
			// Signed at each try: the time is the sending's.
			req.Header.Set(SignatureHeader, Signature(c.SigningSecret, time.Now(), body))
		}
		res, err := r.client.Do(req)
		if err == nil {
			return res, true, nil
		}
		// Do returns an error only once the connection's write loop is
		// done with the request: the counts are final.
		cc := conn.Load()
		wrote := cc != nil && cc.written.Load() > written
		sent := wrote && serializeOK.Load() && cc.failed.Load() == failed
		if !wrote && reused && try == 0 && ctx.Err() == nil {
			continue
		}
		return nil, sent, err
	}
}

// idleConnTimeout is how long a push connection is kept for the next call:
// under the keep-alive of common servers (gunicorn's 2 s, Node's and
// Apache's 5 s). A connection the destination closes while it sits idle
// races the next call, whose outcome is then unknown when its request
// was written before the close was seen (3 s here made a gunicorn
// destination's calls outcome_unknown now and then: push QA).
const idleConnTimeout = time.Second

// countingConn is a destination connection that counts the bytes it wrote
// to the network and the writes that failed: how exchange tells a request
// that reached the destination from one that cannot have.
type countingConn struct {
	net.Conn
	written, failed atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	if err != nil {
		c.failed.Add(1)
	}
	return n, err
}

// countingDial wraps dial's connections in countingConns.
func countingDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn}, nil
	}
}

// asCounting is the countingConn under conn, a TLS one's included.
func asCounting(conn net.Conn) *countingConn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	cc, _ := conn.(*countingConn)
	return cc
}

// redirectHost is where a redirect leads, its scheme and host only: the
// rest of a Location may carry a credential the destination's own URL
// scrubbing does not know.
func redirectHost(res *http.Response) string {
	if res.StatusCode < 300 || res.StatusCode > 399 {
		return ""
	}
	loc, err := res.Location()
	if err != nil || loc.Host == "" {
		return ""
	}
	return loc.Scheme + "://" + loc.Host
}

// maxAnswerDepth bounds the nesting the strict check of an answer reads;
// deeper answers fail their contract's validation anyway.
const maxAnswerDepth = 1000

// answerOf reads a destination's 2xx answer, {"outputs": {...}}, or says
// what is wrong with it: the operator reads the message on the failed
// occurrence to fix the destination.
func answerOf(data []byte) engine.PushResult {
	invalid := func(format string, args ...any) engine.PushResult {
		return engine.PushResult{ErrorCode: engine.CodeInvalidOutputs, Message: fmt.Sprintf(format, args...) + `; a destination answers {"outputs": {...}}`}
	}
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		// A 204, or a 200 without a body (push QA: told it was not an
		// object).
		return invalid("the response has no body")
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		return invalid("the response starts with a byte order mark (U+FEFF), which JSON does not allow: send the object without it")
	}
	var answer map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&answer); err != nil || answer == nil {
		// Quoted as an error answer's body is (operator QA: an HTML page
		// behind a 200 was not shown); the engine scrubs and bounds it.
		return engine.PushResult{ErrorCode: engine.CodeInvalidOutputs, Message: `the response is not a JSON object (a destination answers {"outputs": {...}}): ` + snippet(data)}
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		// A second document (two answers concatenated, a stray byte):
		// which one the destination meant cannot be told.
		return invalid("the response has data after its JSON object")
	}
	var others []string
	for k := range answer {
		if k != "outputs" {
			others = append(others, jsontree.Pointer("", k))
		}
	}
	if len(others) > 0 {
		slices.Sort(others)
		return invalid("the response has members other than outputs: %s", strings.Join(others, ", "))
	}
	outputs := answer["outputs"]
	if len(outputs) == 0 || outputs[0] != '{' {
		return invalid("the response has no outputs object")
	}
	// Strict, as the API's bodies: a duplicate key would be guessed at,
	// and an escaped lone surrogate is text PostgreSQL refuses to store.
	if problems := jsontree.CheckText(data, maxAnswerDepth); len(problems) > 0 {
		return invalid("the response is not strict JSON at %s: %s", problems[0].Pointer, problems[0].Message)
	}
	return engine.PushResult{Outputs: outputs}
}

// transportFailure says why an exchange got no complete answer. What the
// destination received decides the code: nothing it could act on
// (connection_failed: it could not be reached, or the request was not
// written whole), or the whole request (outcome_unknown: the answer was
// lost, and the destination may have acted on it, as it may after a
// timeout, deadline_exceeded).
func transportFailure(ctx context.Context, err error, budget time.Duration, sent bool) engine.PushResult {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && !sent:
		// The budget ran out connecting (a host that drops packets, a
		// wrong address), or before the request was written whole:
		// nothing reached it that it could act on (push QA: it read as a
		// call that may have charged a card).
		return engine.PushResult{ErrorCode: engine.CodeConnectionFailed, Message: "the destination could not be reached within the budget of " + isoduration.Format(budget) + ": the request was not sent whole, so it cannot have acted on it"}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return engine.PushResult{ErrorCode: engine.CodeDeadlineExceeded, Message: "no complete answer within the budget of " + isoduration.Format(budget)}
	case errors.Is(ctx.Err(), context.Canceled):
		// Cut short by the occurrence's deadline (its timer failed it),
		// a destination too slow for it: a failure alerts must see, not
		// an operator's stop.
		var why cancelled
		if errors.As(context.Cause(ctx), &why) && why.reason == engine.CancelDeadlineExceeded {
			return engine.PushResult{ErrorCode: engine.CodeDeadlineExceeded, Message: "the occurrence's deadline passed during the call: its result is not taken"}
		}
		return engine.PushResult{ErrorCode: engine.CodeCallAborted, Message: "the call was aborted (instance stopped)"}
	}
	// Not the url.Error's text: it quotes the URL, query values included.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return engine.PushResult{ErrorCode: engine.CodeConnectionFailed, Message: "the destination could not be reached: " + op.Err.Error()}
	case sent && strings.Contains(err.Error(), `malformed HTTP response "\x15\x03`):
		// A TLS alert record: the destination speaks TLS, and cannot have
		// read a plain HTTP request (push QA: "may have acted").
		return engine.PushResult{ErrorCode: engine.CodeConnectionFailed, Message: "the destination answered in TLS: its URL should start with https://, and it cannot have acted on the plain HTTP request"}
	case !sent && (errors.As(err, new(tls.RecordHeaderError)) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")):
		// The handshake's first answer is no TLS record: a plain HTTP
		// server behind an https:// URL, most often (push QA; net/http
		// names the case where the answer begins with "HTTP/").
		return engine.PushResult{ErrorCode: engine.CodeConnectionFailed, Message: "the destination does not answer in TLS (" + err.Error() + "): if it serves plain HTTP, its URL should start with http://; no request was sent"}
	case sent:
		return engine.PushResult{ErrorCode: engine.CodeOutcomeUnknown,
			Message: "the request was sent whole but its answer was lost (" + err.Error() + "): the destination may have acted on it"}
	}
	return engine.PushResult{ErrorCode: engine.CodeConnectionFailed, Message: "the exchange with the destination failed before the request was sent whole: " + err.Error()}
}

// cancelled is why a call in flight was cancelled: a ChannelCancel
// payload's reason (engine.CancelInstanceStopped, CancelDeadlineExceeded).
type cancelled struct{ reason string }

func (c cancelled) Error() string { return "occurrence cancelled: " + c.reason }

// snippet is an error body as text for diagnosis. It is not cut here: the
// engine scrubs the whole of it of protected values first, then bounds it,
// so that a value straddling the cut cannot leave a prefix behind.
func snippet(b []byte) string {
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
