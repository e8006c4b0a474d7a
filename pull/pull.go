// Package pull is the pull protocol (DESIGN §3) over HTTP: fetch-and-lock
// with long polling, and complete, fail and extend. The domain rules live
// in the engine; this package owns bounds, waiting and the wire format.
package pull

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpauth"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/longpoll"
	"github.com/relais/relais/internal/pgfault"
)

// Protocol serves the pull routes.
type Protocol struct {
	logger *slog.Logger
	bounds config.Pull
	body   int64
	// heartbeat is the worker streams' heartbeat: a poller stays live in
	// the worker catalog for its wait plus three of them.
	heartbeat time.Duration
	eng       *engine.Engine
	// lookup authenticates a waiting fetch's token again after each wait.
	lookup auth.Lookup
	hub    *longpoll.Hub
	// settled, when set, hears of each attempt a route settled: a worker
	// stream of the same worker on this replica frees its slot at once
	// (see OnSettled).
	settled func(ref engine.WorkerRef, attempt int)

	// fetches counts fetch-and-lock's answers and claims.
	fetches *longpoll.FetchCounters
	// fetchTime is the duration of fetch-and-lock by result (a long poll's
	// wait included); settleTime that of the settling routes by action
	// and result. Results are a fixed vocabulary (see resultOf).
	fetchTime  *prometheus.HistogramVec
	settleTime *prometheus.HistogramVec
}

// durationBuckets cover a settlement (milliseconds); fetchBuckets a long
// poll that waited its whole wait too, up to RELAIS_PULL_MAX_WAIT's
// ceiling (an hour: SRE QA, the buckets ended at its default, 60 s).
var (
	durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	fetchBuckets    = append(slices.Clone(durationBuckets), 300, 900, 3600)
)

// New returns the protocol on eng, waking long polls through hub.
func New(logger *slog.Logger, cfg config.Polling, eng *engine.Engine, hub *longpoll.Hub, reg prometheus.Registerer) *Protocol {
	p := &Protocol{logger: logger, bounds: cfg.Pull, body: cfg.MaxBodyBytes, heartbeat: cfg.Heartbeat, eng: eng, lookup: eng.LookupToken, hub: hub,
		fetches: longpoll.NewFetchCounters(prometheus.CounterOpts{Name: "relais_pull_claimed_total", Help: "Occurrences reserved by fetch-and-lock."},
			prometheus.CounterOpts{Name: "relais_pull_fetches_total", Help: "Fetch-and-lock requests by result."}, reg),
		fetchTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "relais_pull_fetch_duration_seconds",
			Help: "Fetch-and-lock duration, long-poll wait included, by result: claimed, empty, throttled (too_many_waiters), " +
				"refused (4xx), unavailable (database_unavailable), error, abandoned (the client left).",
			Buckets: fetchBuckets}, []string{"result"}),
		settleTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "relais_pull_settle_duration_seconds",
			Help: "Duration of complete, fail, extend, defer, release, settle (a batch) and settle-token requests, and of the worker stream's " +
				"Complete, Fail, Extend, Defer and Release calls, by action and result: " +
				"ok, conflict (409: a stale lock, already settled, cancelled), refused (other 4xx), unavailable, error, abandoned.",
			Buckets: durationBuckets}, []string{"action", "result"}),
	}
	// Present from the start, empty: a dashboard's panel shows no data
	// rather than an unknown metric before the first fetch (SRE QA).
	for _, result := range []string{"claimed", "empty"} {
		p.fetchTime.WithLabelValues(result)
	}
	for _, action := range []string{"complete", "fail", "extend"} {
		p.settleTime.WithLabelValues(action, "ok")
	}
	if reg != nil {
		reg.MustRegister(p.fetchTime, p.settleTime)
	}
	return p
}

// resultOf classifies how a request that reached its handler ended, for
// the duration metrics: a fixed vocabulary, never a detail of the request.
func resultOf(ctx context.Context, err error) string {
	if err == nil {
		return "ok"
	}
	fe, ok := fault.As(err)
	switch {
	case (!ok || fe.Kind == fault.Internal) && ctx.Err() != nil:
		return "abandoned"
	case !ok && pgfault.Lost(err):
		return "unavailable"
	case !ok:
		return "error"
	}
	switch fe.Kind {
	case fault.Internal:
		return "error"
	case fault.Unavailable:
		return "unavailable"
	case fault.Conflict:
		return "conflict"
	case fault.TooManyRequests:
		return "throttled"
	}
	return "refused"
}

// timed observes how long a settling route's handler took, by action and
// result.
func (p *Protocol) timed(action string, h func(w http.ResponseWriter, r *http.Request) error) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		began := time.Now()
		err := h(w, r)
		p.settleTime.WithLabelValues(action, resultOf(r.Context(), err)).Observe(time.Since(began).Seconds())
		return err
	}
}

// ObserveSettlement records a settlement another surface made (the worker
// stream's calls) as the settling routes record theirs.
func (p *Protocol) ObserveSettlement(action, result string, took time.Duration) {
	p.settleTime.WithLabelValues(action, result).Observe(took.Seconds())
}

// fetchTimed is fetch, observing its duration by result.
func (p *Protocol) fetchTimed(w http.ResponseWriter, r *http.Request) error {
	began := time.Now()
	claimed, err := p.fetch(w, r)
	result := resultOf(r.Context(), err)
	switch {
	case err == nil && claimed > 0:
		result = "claimed"
	case err == nil:
		result = "empty"
	}
	p.fetchTime.WithLabelValues(result).Observe(time.Since(began).Seconds())
	return err
}

// handle adapts an error-returning handler. No pull route reads a query
// parameter or honours Idempotency-Key (a fetch's replay is its
// request_id, a settlement's its identical body): either is refused
// rather than ignored.
func (p *Protocol) handle(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return httpjson.ErrorHandler(p.logger, func(w http.ResponseWriter, r *http.Request) error {
		if err := httpjson.NoParams(r); err != nil {
			return err
		}
		if err := httpjson.NoIdempotencyKey(r); err != nil {
			return err
		}
		return h(w, r)
	})
}

type subscriptionJSON struct {
	Definition string                `json:"definition"`
	Revisions  subscriptionRevisions `json:"revisions"`
	Fields     []string              `json:"fields"`
}

// subscriptionRevisions are the revisions a subscription takes: a list,
// or "all" (as a grant says it), the same as leaving them out: every
// revision granted.
type subscriptionRevisions []int

func (r *subscriptionRevisions) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == `"all"` {
		*r = nil
		return nil
	}
	var list []int
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New(`revisions must be a list of revision numbers or "all"`)
	}
	if list != nil && len(list) == 0 {
		// Taken as every revision, a list computed empty would take
		// later, breaking revisions (evaluator QA): refused, as a grant's
		// and fields' empty lists are.
		return errors.New(`revisions must list at least one revision, or be "all" or left out for every revision granted`)
	}
	*r = list
	return nil
}

type fetchRequest struct {
	WorkerID      string                `json:"worker_id"`
	Subscriptions []subscriptionJSON    `json:"subscriptions"`
	MaxTasks      *int                  `json:"max_tasks"`
	LockDuration  *isoduration.Duration `json:"lock_duration"`
	Wait          *isoduration.Duration `json:"wait"`
	RequestID     requestID             `json:"request_id"`
}

// ReservationJSON is one delivered occurrence.
type reservationJSON struct {
	ID            uuid.UUID       `json:"id"`
	Definition    string          `json:"definition"`
	Revision      int             `json:"revision"`
	Inputs        json.RawMessage `json:"inputs"`
	Attempt       int             `json:"attempt"`
	AttemptsLeft  int             `json:"attempts_left"`
	LockExpiresAt time.Time       `json:"lock_expires_at"`
	DeadlineAt    *time.Time      `json:"deadline_at"`
	InstanceID    uuid.UUID       `json:"instance_id"`
	Node          string          `json:"node"`
	Priority      int             `json:"priority"`
}

// requestDigest identifies what a fetch asks for, as its client sent it
// (not as its patterns resolve today, nor with this replica's defaults),
// in a canonical form: the order of subscriptions, revisions and fields,
// repeats in them, and an empty list against none do not change what is
// asked. A replay of its request_id must ask the same. Its wait is left
// out: a replay may wait otherwise.
func requestDigest(subs []engine.Subscription, maxTasks *int, lock *isoduration.Duration) []byte {
	type canonical struct {
		Definition string   `json:"d"`
		Revisions  []int    `json:"r"`
		Fields     []string `json:"f"`
	}
	c := make([]canonical, len(subs))
	for i, sub := range subs {
		c[i] = canonical{Definition: sub.Definition, Revisions: sortedSet(sub.Revisions), Fields: sortedSet(sub.Fields)}
	}
	items := make([]string, len(c))
	for i := range c {
		one, _ := json.Marshal(c[i])
		items[i] = string(one)
	}
	items = sortedSet(items)
	b, err := json.Marshal(struct {
		Version       int      `json:"v"`
		Subscriptions []string `json:"s"`
		MaxTasks      *int     `json:"m"`
		Lock          string   `json:"l"`
	}{1, items, maxTasks, lockText(lock)})
	if err != nil {
		panic(err) // plain values: cannot fail
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

func lockText(d *isoduration.Duration) string {
	if d == nil {
		return ""
	}
	return d.Std().String()
}

// sortedSet is v sorted without repeats, nil when empty.
func sortedSet[T cmp.Ordered](v []T) []T {
	if len(v) == 0 {
		return nil
	}
	out := slices.Clone(v)
	slices.Sort(out)
	return slices.Compact(out)
}

func checkWorkerID(id string) *fault.FieldError {
	if m := engine.WorkerIDProblem(id); m != "" {
		return &fault.FieldError{Path: "/worker_id", Message: m}
	}
	return nil
}

func (p *Protocol) fetchParams(req fetchRequest) (maxTasks int, lock, wait time.Duration, err error) {
	var errs []fault.FieldError
	if fe := checkWorkerID(req.WorkerID); fe != nil {
		errs = append(errs, *fe)
	}
	if len(req.Subscriptions) == 0 {
		errs = append(errs, fault.FieldError{Path: "/subscriptions", Message: "must list at least one definition"})
	}
	for i, s := range req.Subscriptions {
		if s.Definition == "" {
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/subscriptions/%d/definition", i), Message: "is required"})
		}
	}
	switch rid := req.RequestID.v; {
	case rid == nil:
	case strings.TrimSpace(*rid) == "":
		// An unset variable in a client must not read as "no request_id":
		// the fetch would not be replayed, and a lost answer would strand
		// what it claimed until the locks lapse.
		errs = append(errs, fault.FieldError{Path: "/request_id", Message: "must not be empty or blank: leave it out for a fetch without one"})
	case len(*rid) > 200:
		errs = append(errs, fault.FieldError{Path: "/request_id", Message: "must be at most 200 bytes"})
	}
	maxTasks, lock, wait = 1, p.bounds.DefaultLockDuration, 0
	if req.MaxTasks != nil {
		maxTasks = *req.MaxTasks
		if maxTasks < 1 {
			errs = append(errs, fault.FieldError{Path: "/max_tasks", Message: "must be at least 1"})
		}
	}
	if req.LockDuration != nil {
		lock = req.LockDuration.Std()
		if lock < engine.MinLockDuration {
			errs = append(errs, engine.LockTooShort)
		}
	}
	if req.Wait != nil {
		wait = req.Wait.Std()
	}
	// Every value over its ceiling is named at its pointer, with the
	// other problems if any (engine.Refusal).
	var over []*fault.Error
	for _, b := range []struct {
		field   string
		above   bool
		ceiling any
	}{
		{"max_tasks", maxTasks > p.bounds.MaxTasks, p.bounds.MaxTasks},
		{"lock_duration", lock > p.bounds.MaxLockDuration, p.bounds.MaxLockDuration},
		{"wait", wait > p.bounds.MaxWait, p.bounds.MaxWait},
	} {
		if b.above {
			over = append(over, engine.BoundExceeded(b.field, b.ceiling))
		}
	}
	if err := engine.Refusal("the fetch", errs, over); err != nil {
		return 0, 0, 0, err
	}
	return maxTasks, lock, wait, nil
}

// fetch serves fetch-and-lock and returns how many occurrences it
// delivered.
func (p *Protocol) fetch(w http.ResponseWriter, r *http.Request) (int, error) {
	req, err := httpjson.Decode[fetchRequest](w, r, p.body)
	if err != nil {
		return 0, err
	}
	maxTasks, lock, wait, err := p.fetchParams(req)
	over, _ := fault.As(err)
	if err != nil && (over == nil || over.Code != "bound_exceeded") {
		return 0, err
	}
	principal, _ := auth.FromContext(r.Context())
	subs := make([]engine.Subscription, len(req.Subscriptions))
	for i, s := range req.Subscriptions {
		subs[i] = engine.Subscription{Definition: s.Definition, Revisions: s.Revisions, Fields: s.Fields}
	}
	pairs, err := p.eng.ResolveSubscriptions(r.Context(), principal.ConsumerID, subs)
	if over != nil {
		// A ceiling alone in the request's own members: the
		// subscriptions' problems, which the database tells, come in the
		// same answer (verifier QA: a round later).
		return 0, engine.CeilingWith("the fetch", over, err)
	}
	if err != nil {
		return 0, err
	}
	if err := p.hub.Refusal(); err != nil {
		return 0, err
	}
	// The worker catalog lists pollers by their last fetch (written at
	// most every few seconds per worker).
	p.eng.SeePoller(r.Context(), engine.PollerSighting{ConsumerID: principal.ConsumerID, WorkerID: req.WorkerID, Subscriptions: subs,
		Pairs: pairs, LiveFor: wait + engine.LiveHeartbeats*p.heartbeat})
	claim := engine.ClaimRequest{ConsumerID: principal.ConsumerID, WorkerID: req.WorkerID, Pairs: pairs, MaxTasks: maxTasks,
		LockDuration: lock}
	if req.RequestID.v != nil {
		claim.RequestID = *req.RequestID.v
		claim.RequestDigest = requestDigest(subs, req.MaxTasks, req.LockDuration)
	}
	token, _ := httpauth.Bearer(r.Header)
	still := func(ctx context.Context) error {
		_, err := auth.Authenticate(ctx, p.lookup, token)
		return err
	}
	got, err := p.hub.ClaimOrWait(r.Context(), p.eng, claim, wait, still)
	p.fetches.Waited(err)
	if wait > 0 && err != nil && r.Context().Err() != nil {
		p.eng.PollerLeft(r.Context(), principal.ConsumerID, req.WorkerID, p.heartbeat)
	}
	if err != nil {
		return 0, err
	}
	out := struct {
		Occurrences []reservationJSON `json:"occurrences"`
	}{Occurrences: make([]reservationJSON, 0, len(got))}
	for _, g := range got {
		out.Occurrences = append(out.Occurrences, reservationJSON{ID: g.ID, Definition: g.Definition, Revision: g.Revision, Inputs: g.Inputs,
			Attempt: g.Attempt, AttemptsLeft: g.AttemptsLeft, LockExpiresAt: g.LockExpiresAt, DeadlineAt: g.DeadlineAt,
			InstanceID: g.InstanceID, Node: g.Node, Priority: g.Priority})
	}
	claimed := 0
	for _, g := range got {
		if !g.Replayed {
			claimed++
		}
	}
	p.fetches.Answered(len(got), claimed)
	httpjson.Encode(w, http.StatusOK, out)
	return len(got), nil
}

type completeRequest struct {
	WorkerID string          `json:"worker_id"`
	Attempt  attemptNumber   `json:"attempt"`
	Outputs  json.RawMessage `json:"outputs"`
}

// checkAttempt refuses an attempt number under 1 at path.
func checkAttempt(attempt *int32, path string) *fault.FieldError {
	if attempt != nil && *attempt < 1 {
		return &fault.FieldError{Path: path, Message: "must be an attempt number (1 or more), the fetched occurrence's attempt"}
	}
	return nil
}

// ref names the occurrence of r's path, its worker and, when the body
// names it, the attempt the call is for.
func (p *Protocol) ref(r *http.Request, workerID string, attempt *int32) (engine.WorkerRef, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return engine.WorkerRef{}, fault.NotAnID("occurrence", chi.URLParam(r, "id"))
	}
	scope, token := viaSettleToken(r.Context())
	if workerID == "" && token {
		// A front end holding a settle token is no worker: it is named so
		// in the attempt.
		workerID = engine.SettleTokenWorker
	}
	if fe := checkWorkerID(workerID); fe != nil {
		return engine.WorkerRef{}, fault.New(fault.BadRequest, "invalid_request", "worker_id is invalid").WithErrors([]fault.FieldError{*fe})
	}
	if fe := checkAttempt(attempt, "/attempt"); fe != nil {
		return engine.WorkerRef{}, fault.New(fault.BadRequest, "invalid_request", "attempt is invalid").WithErrors([]fault.FieldError{*fe})
	}
	principal, _ := auth.FromContext(r.Context())
	ref := engine.WorkerRef{ConsumerID: principal.ConsumerID, WorkerID: workerID, Occurrence: id, SettleToken: token, TokenAttempt: scope.Attempt}
	if attempt != nil {
		ref.Attempt = *attempt
	}
	return ref, nil
}

// OnSettled makes the settling routes report each attempt they settle to
// f: a worker that streams and settles some of its tasks over REST (or a
// colleague settling a deferred task) would otherwise have its stream's
// slot freed only at the stream's next keep-alive. Call it before Routes.
func (p *Protocol) OnSettled(f func(ref engine.WorkerRef, attempt int)) { p.settled = f }

func (p *Protocol) onSettled(ref engine.WorkerRef, attempt int) {
	if p.settled != nil && attempt != 0 {
		p.settled(ref, attempt)
	}
}

// completeHints tells a completion whose outputs were not nested where
// they go (see httpjson.UnknownHint).
var completeHints = map[int]string{1: `a completion takes "worker_id", "attempt" and "outputs"; the definition's outputs go under "outputs" ({"outputs": {…}})`}

func (p *Protocol) complete(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeReport[completeRequest](p, w, r, func(err error) error { return httpjson.UnknownHint(err, completeHints) })
	if err != nil {
		return err
	}
	ref, err := p.ref(r, req.WorkerID, req.Attempt.v)
	if err != nil {
		return err
	}
	if len(req.Outputs) == 0 {
		return fault.New(fault.BadRequest, "invalid_request", "outputs are required").WithErrors([]fault.FieldError{{Path: "/outputs", Message: "is required"}})
	}
	s, err := p.eng.Complete(r.Context(), ref, req.Outputs)
	if err != nil {
		return err
	}
	p.onSettled(ref, s.Attempt)
	out := map[string]any{"status": s.Status, "route": nil}
	if s.Route != "" {
		out["route"] = s.Route
	}
	httpjson.Encode(w, http.StatusOK, out)
	return nil
}

// decodeReport decodes a completion or a failure as strictly as any body
// (hint, when set, rewords its refusal); one that decodes as JSON but is
// refused (an unknown member, outputs written at the top level) is noted
// on the attempt its worker_id holds, as a refusal of its content is: a
// worker stuck on it read as one that never answered (verifier QA).
func decodeReport[T any](p *Protocol, w http.ResponseWriter, r *http.Request, hint func(error) error) (T, error) {
	body, err := httpjson.ReadBody(w, r, p.body)
	if err != nil {
		var v T
		return v, err
	}
	v, err := httpjson.DecodeBytes[T](body)
	if err == nil {
		return v, nil
	}
	if hint != nil {
		err = hint(err)
	}
	var named struct {
		WorkerID string        `json:"worker_id"`
		Attempt  attemptNumber `json:"attempt"`
	}
	if _, token := viaSettleToken(r.Context()); json.Unmarshal(body, &named) == nil && (named.WorkerID != "" || token) {
		if ref, rerr := p.ref(r, named.WorkerID, named.Attempt.v); rerr == nil {
			p.eng.NoteRefusedReport(r.Context(), ref, err)
		}
	}
	return v, err
}

type failRequest struct {
	WorkerID     string                `json:"worker_id"`
	Attempt      attemptNumber         `json:"attempt"`
	ErrorCode    string                `json:"error_code"`
	Message      string                `json:"message"`
	Retryable    bool                  `json:"retryable"`
	RetryDelay   *isoduration.Duration `json:"retry_delay"`
	AttemptsLeft *int                  `json:"attempts_left"`
}

func (p *Protocol) fail(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeReport[failRequest](p, w, r, nil)
	if err != nil {
		return err
	}
	ref, err := p.ref(r, req.WorkerID, req.Attempt.v)
	if err != nil {
		return err
	}
	f := engine.Failure{ErrorCode: req.ErrorCode, Message: req.Message, Retryable: req.Retryable, AttemptsLeft: req.AttemptsLeft}
	if req.RetryDelay != nil {
		// The engine refuses a delay above the ceiling (bound_exceeded).
		d := req.RetryDelay.Std()
		f.RetryDelay = &d
	}
	s, err := p.eng.Fail(r.Context(), ref, f)
	if err != nil {
		return err
	}
	p.onSettled(ref, s.Attempt)
	httpjson.Encode(w, http.StatusOK, availability(s))
	return nil
}

type extendRequest struct {
	WorkerID     string                `json:"worker_id"`
	Attempt      attemptNumber         `json:"attempt"`
	LockDuration *isoduration.Duration `json:"lock_duration"`
}

func (p *Protocol) extend(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[extendRequest](w, r, p.body)
	if err != nil {
		return err
	}
	ref, err := p.ref(r, req.WorkerID, req.Attempt.v)
	if err != nil {
		return err
	}
	d := p.bounds.DefaultLockDuration
	if req.LockDuration != nil {
		d = req.LockDuration.Std()
		if d < engine.MinLockDuration {
			return fault.New(fault.BadRequest, "invalid_request", "lock_duration is too short").WithErrors([]fault.FieldError{engine.LockTooShort})
		}
		if d > p.bounds.MaxLockDuration {
			return engine.BoundExceeded("lock_duration", p.bounds.MaxLockDuration)
		}
	}
	until, err := p.eng.Extend(r.Context(), ref, d)
	if err != nil {
		return err
	}
	httpjson.Encode(w, http.StatusOK, map[string]any{"lock_expires_at": until})
	return nil
}

type deferRequest struct {
	WorkerID string        `json:"worker_id"`
	Attempt  attemptNumber `json:"attempt"`
	Reason   string        `json:"reason"`
}

func (p *Protocol) deferOccurrence(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[deferRequest](w, r, p.body)
	if err != nil {
		return err
	}
	ref, err := p.ref(r, req.WorkerID, req.Attempt.v)
	if err != nil {
		return err
	}
	d, err := p.eng.Defer(r.Context(), ref, req.Reason)
	if err != nil {
		return err
	}
	p.onSettled(ref, d.Attempt)
	// The reason stored, scrubbed: a deferral asked again with another
	// keeps the first's, which the worker sees here.
	httpjson.Encode(w, http.StatusOK, map[string]any{"status": d.Status, "deferred_at": d.DeferredAt, "deadline_at": d.DeadlineAt, "defer_reason": d.Reason})
	return nil
}

type workerRequest struct {
	WorkerID string        `json:"worker_id"`
	Attempt  attemptNumber `json:"attempt"`
}

func (p *Protocol) release(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[workerRequest](w, r, p.body)
	if err != nil {
		return err
	}
	ref, err := p.ref(r, req.WorkerID, req.Attempt.v)
	if err != nil {
		return err
	}
	s, err := p.eng.Release(r.Context(), ref)
	if err != nil {
		return err
	}
	p.onSettled(ref, s.Attempt)
	httpjson.Encode(w, http.StatusOK, availability(s))
	return nil
}

func (p *Protocol) settleToken(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[workerRequest](w, r, p.body)
	if err != nil {
		return err
	}
	ref, err := p.ref(r, req.WorkerID, req.Attempt.v)
	if err != nil {
		return err
	}
	t, err := p.eng.IssueSettleToken(r.Context(), ref)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpjson.Encode(w, http.StatusCreated, map[string]any{"token": t.Token, "occurrence_id": ref.Occurrence, "expires_at": t.ExpiresAt})
	return nil
}

// revokeSettleTokens answers DELETE /occurrences/{id}/settle-token: the
// consumer's settle tokens of the occurrence revoked, {"revoked": n}.
func (p *Protocol) revokeSettleTokens(w http.ResponseWriter, r *http.Request) error {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return fault.NotAnID("occurrence", chi.URLParam(r, "id"))
	}
	principal, _ := auth.FromContext(r.Context())
	n, err := p.eng.RevokeSettleTokens(r.Context(), principal.ConsumerID, id)
	if err != nil {
		return err
	}
	httpjson.Encode(w, http.StatusOK, map[string]int64{"revoked": n})
	return nil
}

type settleItem struct {
	ID           string                `json:"id"`
	Attempt      attemptNumber         `json:"attempt"`
	Outputs      json.RawMessage       `json:"outputs"`
	ErrorCode    *string               `json:"error_code"`
	Message      string                `json:"message"`
	Retryable    bool                  `json:"retryable"`
	RetryDelay   *isoduration.Duration `json:"retry_delay"`
	AttemptsLeft *int                  `json:"attempts_left"`
}

type settleRequest struct {
	WorkerID string       `json:"worker_id"`
	Items    []settleItem `json:"items"`
}

// settleHints tells a batch settlement where its members go (see
// httpjson.UnknownHint): a single completion's body sent to the batch
// route, an item whose outputs were not nested.
var settleHints = map[int]string{
	1: `a batch settlement takes "worker_id" and "items" ({"worker_id": …, "items": [{"id": …, "attempt": …, "outputs": {…}}]})`,
	3: `an item takes "id", "attempt", and "outputs" to complete or "error_code" (with "message", "retryable", "retry_delay", "attempts_left") to fail; the definition's outputs go under "outputs"`,
}

// settle completes and fails many reservations of one worker in one
// request and one transaction; each item is answered on its own as the
// single route would (200 with its settlement, or its problem).
func (p *Protocol) settle(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[settleRequest](w, r, p.body)
	if err != nil {
		return httpjson.UnknownHint(err, settleHints)
	}
	var errs []fault.FieldError
	if fe := checkWorkerID(req.WorkerID); fe != nil {
		errs = append(errs, *fe)
	}
	switch {
	case len(req.Items) == 0:
		errs = append(errs, fault.FieldError{Path: "/items", Message: fmt.Sprintf("must hold 1 to %d items", engine.MaxBatch)})
	case len(req.Items) > engine.MaxBatch:
		return engine.BoundExceeded("items", engine.MaxBatch)
	}
	items := make([]engine.BatchSettlement, len(req.Items))
	for i, it := range req.Items {
		id, err := uuid.Parse(it.ID)
		if err != nil {
			errs = append(errs, fault.FieldError{Path: "/items/" + strconv.Itoa(i) + "/id", Message: "must be an occurrence id"})
			// Refused here; an id of its own keeps it out of the
			// duplicate check below.
			id = uuid.New()
		}
		items[i].Occurrence = id
		if string(it.Outputs) != "null" {
			// null reads as absent, as error_code's does: a failure
			// serialised from a struct with both members.
			items[i].Outputs = it.Outputs
		}
		if fe := checkAttempt(it.Attempt.v, "/items/"+strconv.Itoa(i)+"/attempt"); fe != nil {
			errs = append(errs, *fe)
		} else if it.Attempt.v != nil {
			items[i].Attempt = *it.Attempt.v
		}
		if it.ErrorCode != nil {
			f := engine.Failure{ErrorCode: *it.ErrorCode, Message: it.Message, Retryable: it.Retryable, AttemptsLeft: it.AttemptsLeft}
			if it.RetryDelay != nil {
				d := it.RetryDelay.Std()
				f.RetryDelay = &d
			}
			items[i].Failure = &f
		}
	}
	// With the body's problems, the batch's (an item that does not
	// settle one way, an id given twice): one answer names them all.
	errs = append(errs, engine.CheckSettlements(items)...)
	if len(errs) > 0 {
		return fault.New(fault.BadRequest, "invalid_request", "the batch is invalid: nothing was settled").WithErrors(errs)
	}
	principal, _ := auth.FromContext(r.Context())
	results, err := p.eng.SettleBatch(r.Context(), principal.ConsumerID, req.WorkerID, items)
	if err != nil {
		return err
	}
	for i, res := range results {
		if res.Err == nil {
			p.onSettled(engine.WorkerRef{ConsumerID: principal.ConsumerID, WorkerID: req.WorkerID, Occurrence: items[i].Occurrence}, res.Settlement.Attempt)
		}
	}
	type itemJSON struct {
		Index   int            `json:"index"`
		ID      string         `json:"id"`
		Status  int            `json:"status"`
		Result  map[string]any `json:"result,omitempty"`
		Problem map[string]any `json:"problem,omitempty"`
	}
	out := struct {
		Items []itemJSON `json:"items"`
	}{Items: make([]itemJSON, len(results))}
	for i, res := range results {
		item := itemJSON{Index: i, ID: req.Items[i].ID}
		if res.Err != nil {
			item.Status, item.Problem = httpjson.ItemProblemOf(r, p.logger, res.Err, i)
		} else {
			s := res.Settlement
			item.Status = http.StatusOK
			if items[i].Failure != nil {
				item.Result = availability(s)
			} else {
				item.Result = map[string]any{"status": s.Status, "route": nil}
				if s.Route != "" {
					item.Result["route"] = s.Route
				}
			}
		}
		out.Items[i] = item
	}
	httpjson.Encode(w, http.StatusOK, out)
	return nil
}

// attemptNumber is the attempt a settlement names: left out, none (the
// occurrence's current one); null is refused, as request_id's is: a
// client's unset variable must not read as none, which would act on
// whatever attempt is current.
type attemptNumber struct{ v *int32 }

func (a *attemptNumber) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return errors.New("must not be null: leave it out to name no attempt")
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("must be an attempt number (1 or more), the fetched occurrence's attempt")
	}
	a.v = &n
	return nil
}

// requestID is a fetch's request_id: left out, none; null is refused as
// an empty one is (a client's unset variable must not read as none).
type requestID struct{ v *string }

func (r *requestID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return errors.New("must not be null: leave it out for a fetch without one")
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("must be a string")
	}
	r.v = &s
	return nil
}

// availability is the answer to a failure or a release: its status, the
// attempts left and, when it leaves the occurrence available, when, and
// the deadline if it has one (a retry due past it is never tried).
func availability(s engine.Settlement) map[string]any {
	out := map[string]any{"status": s.Status, "attempts_left": s.AttemptsLeft, "available_at": s.AvailableAt}
	if s.DeadlineAt != nil {
		out["deadline_at"] = s.DeadlineAt
	}
	return out
}
