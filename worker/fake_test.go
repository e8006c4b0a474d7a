package worker

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/isoduration"
)

// fakeServer is Relais's pull protocol in memory, as DESIGN §3 and the
// pull package define it: strict JSON bodies, bearer consumer token,
// locks with expiry, the 409 refusals, 422 for outputs missing a required
// key, request_id replay, bounds, and long polling woken by new work.
// Faults can be injected per route to play a flaky network or server.
type fakeServer struct {
	t           testing.TB
	srv         *httptest.Server
	token       string
	required    string        // output key the contract requires
	maxAttempts int           // attempts per occurrence
	retryDelay  time.Duration // the occurrences' frozen retry_delay
	overdeliver int           // extra tasks answered beyond max_tasks (a server bug)

	mu      sync.Mutex
	tasks   map[string]*fakeTask
	order   []string
	replays map[string][]string
	wake    chan struct{}
	faults  map[string][]fault

	downUntil time.Time // every request before it is dropped unanswered (an outage)

	fetches   []fetchRecord
	completes []settleRecord
	fails     []failRecord
	extends   []extendRecord
	releases  []settleRecord
	noRelease bool // answer release with 404, as a Relais before DESIGN §11
	// loseAnswer makes the next fetch that claims tasks keep its answer
	// until the client leaves, as an answer written into a connection the
	// worker was closing.
	loseAnswer bool
	waiting    int // long polls now waiting
	aborted    int // long polls the client gave up on
	dropped    int // requests lost to an outage
}

type fakeTask struct {
	id, def     string
	rev         int
	inputs      json.RawMessage
	status      string // available, reserved, completed, failed, cancelled
	consumer    string
	worker      string
	lockExpires time.Time
	availableAt time.Time
	attempt     int
	outputs     string
}

type fetchRecord struct {
	WorkerID      string
	RequestID     string
	MaxTasks      int
	LockDuration  string
	Wait          string
	Subscriptions []subscription
	HeldBefore    int // live reservations of this worker when the fetch arrived
	Replayed      bool
}

type settleRecord struct {
	ID, WorkerID string
	Outputs      string
	Status       int
	Code         string
}

type failRecord struct {
	ID, WorkerID string
	ErrorCode    string
	Message      string
	Retryable    bool
	RetryDelay   *string
	Status       int
	Code         string
}

type extendRecord struct {
	ID, WorkerID string
	LockDuration string
	Status       int
	Code         string
}

// fault replaces the normal handling of one request.
type fault struct {
	status     int           // answer this problem status without acting
	code       string        // its code
	retryAfter string        // its Retry-After header
	drop       bool          // act normally, then drop the connection unanswered
	hang       bool          // never answer; wait for the client to give up
	delay      time.Duration // wait this long before answering the problem
	late       time.Duration // act normally, then hold the answer this long (a stalled worker or network)
	detail     string        // its detail ("injected" if empty)
	extra      map[string]any
}

func newFake(t testing.TB) *fakeServer {
	s := &fakeServer{
		t: t, token: "consumer-token", required: "crm_id", maxAttempts: 1, retryDelay: time.Hour,
		tasks: map[string]*fakeTask{}, replays: map[string][]string{}, wake: make(chan struct{}), faults: map[string][]fault{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/pull/fetch-and-lock", s.route("fetch", s.fetch))
	mux.HandleFunc("POST /api/v1/pull/occurrences/{id}/complete", s.route("complete", s.complete))
	mux.HandleFunc("POST /api/v1/pull/occurrences/{id}/fail", s.route("fail", s.fail))
	mux.HandleFunc("POST /api/v1/pull/occurrences/{id}/extend", s.route("extend", s.extend))
	mux.HandleFunc("POST /api/v1/pull/occurrences/{id}/release", s.route("release", s.release))
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// add queues an available occurrence and wakes long polls.
func (s *fakeServer) add(def string, rev int, inputs string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("00000000-0000-0000-0000-%012d", len(s.order)+1)
	s.tasks[id] = &fakeTask{id: id, def: def, rev: rev, inputs: json.RawMessage(inputs), status: "available"}
	s.order = append(s.order, id)
	s.notifyLocked()
	return id
}

func (s *fakeServer) notifyLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// cancel stops an occurrence, as stopping its instance does.
func (s *fakeServer) cancel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[id].status = "cancelled"
}

// steal hands a reserved occurrence to another worker.
func (s *fakeServer) steal(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[id].worker = "thief"
	s.tasks[id].lockExpires = time.Now().Add(time.Hour)
}

// outage makes every request fail as if the server were unreachable for d.
func (s *fakeServer) outage(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downUntil = time.Now().Add(d)
}

func (s *fakeServer) inject(route string, fs ...fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[route] = append(s.faults[route], fs...)
}

func (s *fakeServer) status(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasks[id].status
}

func (s *fakeServer) task(id string) fakeTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.tasks[id]
}

func (s *fakeServer) countStatus(status string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tasks {
		if t.status == status {
			n++
		}
	}
	return n
}

// snapshot returns copies of the records under the lock.
func (s *fakeServer) snapshot() (fetches []fetchRecord, completes []settleRecord, fails []failRecord, extends []extendRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fetches), slices.Clone(s.completes), slices.Clone(s.fails), slices.Clone(s.extends)
}

// waitFor polls cond until it holds, failing the test after a generous
// bound: tests assert on what happened, not on how fast.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// protoError is a problem the fake answers.
type protoError struct {
	status  int
	code    string
	detail  string
	errors  []FieldError
	extra   map[string]any
	headers map[string]string
}

func refuse(status int, code, format string, args ...any) *protoError {
	return &protoError{status: status, code: code, detail: fmt.Sprintf(format, args...)}
}

func writeProblem(w http.ResponseWriter, pe *protoError) {
	doc := map[string]any{"type": "urn:relais:problem:" + pe.code, "title": http.StatusText(pe.status), "status": pe.status,
		"code": pe.code, "detail": pe.detail}
	if len(pe.errors) > 0 {
		doc["errors"] = pe.errors
	}
	for k, v := range pe.extra {
		doc[k] = v
	}
	for k, v := range pe.headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(pe.status)
	_ = json.NewEncoder(w).Encode(doc)
}

// route authenticates, applies an injected fault, and writes the
// handler's answer.
func (s *fakeServer) route(name string, h func(r *http.Request) (any, *protoError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		token := s.token
		s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			writeProblem(w, refuse(http.StatusUnauthorized, "unauthorized", "the token is unknown or revoked"))
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			writeProblem(w, refuse(http.StatusUnsupportedMediaType, "unsupported_media_type", "got %q", ct))
			return
		}
		s.mu.Lock()
		var f fault
		if q := s.faults[name]; len(q) > 0 {
			f, s.faults[name] = q[0], q[1:]
		}
		down := time.Now().Before(s.downUntil)
		if down {
			s.dropped++
		}
		s.mu.Unlock()
		if down {
			// Like a server that is gone: the request never arrives.
			panic(http.ErrAbortHandler)
		}
		switch {
		case f.hang:
			// The server notices a client hanging up only once the body
			// has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		case f.status != 0:
			time.Sleep(f.delay)
			pe := refuse(f.status, f.code, "%s", cmp.Or(f.detail, "injected"))
			pe.extra = f.extra
			if f.retryAfter != "" {
				pe.headers = map[string]string{"Retry-After": f.retryAfter}
			}
			writeProblem(w, pe)
			return
		}
		out, pe := h(r)
		if f.drop {
			panic(http.ErrAbortHandler)
		}
		time.Sleep(f.late)
		if pe != nil {
			writeProblem(w, pe)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

// decode reads one JSON document strictly, as the server does.
func decode(r *http.Request, v any) *protoError {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return refuse(http.StatusBadRequest, "invalid_json", "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(http.StatusBadRequest, "invalid_json", "%v", err)
	}
	if dec.More() {
		return refuse(http.StatusBadRequest, "invalid_json", "trailing data")
	}
	return nil
}

func duration(field string, v *string, ceiling time.Duration) (time.Duration, *protoError) {
	d, err := isoduration.Parse(*v)
	if err != nil {
		return 0, refuse(http.StatusBadRequest, "invalid_json", "%v", err)
	}
	if d > ceiling {
		return 0, boundExceeded(field, isoduration.Format(ceiling))
	}
	return d, nil
}

func boundExceeded(field string, ceiling any) *protoError {
	pe := refuse(http.StatusBadRequest, "bound_exceeded", "%s is above the ceiling %v", field, ceiling)
	pe.errors = []FieldError{{Path: "/" + field, Message: fmt.Sprintf("must be at most %v", ceiling)}}
	pe.extra = map[string]any{"field": field, "ceiling": ceiling}
	return pe
}

func (s *fakeServer) fetch(r *http.Request) (any, *protoError) {
	var req struct {
		WorkerID      string         `json:"worker_id"`
		Subscriptions []subscription `json:"subscriptions"`
		MaxTasks      *int           `json:"max_tasks"`
		LockDuration  *string        `json:"lock_duration"`
		Wait          *string        `json:"wait"`
		RequestID     string         `json:"request_id"`
	}
	if pe := decode(r, &req); pe != nil {
		return nil, pe
	}
	if req.WorkerID == "" || len(req.Subscriptions) == 0 || req.MaxTasks == nil || req.LockDuration == nil || req.Wait == nil {
		return nil, refuse(http.StatusBadRequest, "invalid_request", "worker_id, subscriptions, max_tasks, lock_duration and wait are expected")
	}
	if *req.MaxTasks < 1 {
		return nil, refuse(http.StatusBadRequest, "invalid_request", "max_tasks must be at least 1")
	}
	if *req.MaxTasks > 100 {
		return nil, boundExceeded("max_tasks", 100)
	}
	lock, pe := duration("lock_duration", req.LockDuration, 10*time.Minute)
	if pe != nil {
		return nil, pe
	}
	wait, pe := duration("wait", req.Wait, time.Minute)
	if pe != nil {
		return nil, pe
	}
	rec := fetchRecord{WorkerID: req.WorkerID, RequestID: req.RequestID, MaxTasks: *req.MaxTasks, LockDuration: *req.LockDuration,
		Wait: *req.Wait, Subscriptions: req.Subscriptions}
	deadline := time.Now().Add(wait)
	for first := true; ; first = false {
		s.mu.Lock()
		if first {
			now := time.Now()
			for _, t := range s.tasks {
				if t.status == "reserved" && t.worker == req.WorkerID && t.lockExpires.After(now) {
					rec.HeldBefore++
				}
			}
		}
		key := req.WorkerID + "\x00" + req.RequestID
		ids, replay := s.replays[key]
		if req.RequestID == "" || !replay {
			ids = s.claimLocked(req.WorkerID, req.Subscriptions, *req.MaxTasks+s.overdeliver, lock)
		}
		rec.Replayed = replay
		if len(ids) > 0 && s.loseAnswer {
			s.loseAnswer = false
			s.replays[key] = ids
			s.fetches = append(s.fetches, rec)
			s.mu.Unlock()
			<-r.Context().Done()
			return nil, refuse(499, "client_gone", "the client gave up")
		}
		if len(ids) > 0 || !time.Now().Before(deadline) {
			if req.RequestID != "" && !replay {
				s.replays[key] = ids
			}
			s.fetches = append(s.fetches, rec)
			out := s.occurrencesLocked(ids)
			s.mu.Unlock()
			return map[string]any{"occurrences": out}, nil
		}
		wake := s.wake
		if first {
			s.waiting++
			defer func() { s.mu.Lock(); s.waiting--; s.mu.Unlock() }()
		}
		s.mu.Unlock()
		// Like the server's fallback poll: expired locks free work
		// without any notification.
		timer := time.NewTimer(min(20*time.Millisecond, time.Until(deadline)))
		select {
		case <-r.Context().Done():
			timer.Stop()
			s.mu.Lock()
			s.aborted++
			s.fetches = append(s.fetches, rec)
			s.mu.Unlock()
			return nil, refuse(499, "client_gone", "the client gave up")
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (s *fakeServer) claimLocked(worker string, subs []subscription, n int, lock time.Duration) []string {
	now := time.Now()
	var ids []string
	for _, id := range s.order {
		if len(ids) == n {
			break
		}
		t := s.tasks[id]
		free := t.status == "available" && !t.availableAt.After(now) ||
			t.status == "reserved" && !t.lockExpires.After(now)
		if !free || t.attempt >= s.maxAttempts || !subscribed(subs, t) {
			continue
		}
		t.status, t.worker, t.consumer, t.lockExpires = "reserved", worker, s.token, now.Add(lock)
		t.attempt++
		ids = append(ids, id)
	}
	return ids
}

func subscribed(subs []subscription, t *fakeTask) bool {
	for _, s := range subs {
		if s.Definition == t.def && (len(s.Revisions) == 0 || slices.Contains(s.Revisions, t.rev)) {
			return true
		}
	}
	return false
}

func (s *fakeServer) occurrencesLocked(ids []string) []map[string]any {
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		t := s.tasks[id]
		out = append(out, map[string]any{"id": t.id, "definition": t.def, "revision": t.rev, "inputs": t.inputs,
			"attempt": t.attempt, "attempts_left": s.maxAttempts - t.attempt, "lock_expires_at": t.lockExpires,
			"deadline_at": nil, "instance_id": "11111111-1111-1111-1111-111111111111", "node": "crm", "priority": 5})
	}
	return out
}

// heldLocked finds the occurrence and checks the worker's lock, with the
// server's refusals.
func (s *fakeServer) heldLocked(id, worker string) (*fakeTask, *protoError) {
	t, ok := s.tasks[id]
	if !ok {
		return nil, refuse(http.StatusNotFound, "not_found", "occurrence %q not found", id)
	}
	if worker == "" {
		return nil, refuse(http.StatusBadRequest, "invalid_request", "worker_id is required")
	}
	switch t.status {
	case "completed", "failed":
		return t, refuse(http.StatusConflict, "already_settled", "occurrence %s is already %s", id, t.status)
	case "cancelled":
		return t, refuse(http.StatusConflict, "occurrence_cancelled", "occurrence %s was cancelled", id)
	case "available":
		return t, refuse(http.StatusConflict, "not_reserved", "occurrence %s is not reserved", id)
	}
	if t.worker != worker {
		return t, refuse(http.StatusConflict, "locked_by_other_worker", "occurrence %s is reserved by another worker", id)
	}
	if !t.lockExpires.After(time.Now()) {
		return t, refuse(http.StatusConflict, "lock_expired", "the lock on occurrence %s expired", id)
	}
	return t, nil
}

func code(pe *protoError) (int, string) {
	if pe == nil {
		return http.StatusOK, ""
	}
	return pe.status, pe.code
}

func (s *fakeServer) complete(r *http.Request) (any, *protoError) {
	var req struct {
		WorkerID string          `json:"worker_id"`
		Attempt  *int            `json:"attempt"` // the SDK names it; this fake does not check it
		Outputs  json.RawMessage `json:"outputs"`
	}
	if pe := decode(r, &req); pe != nil {
		return nil, pe
	}
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := settleRecord{ID: id, WorkerID: req.WorkerID, Outputs: string(req.Outputs)}
	out, pe := s.completeLocked(id, req.WorkerID, req.Outputs)
	rec.Status, rec.Code = code(pe)
	s.completes = append(s.completes, rec)
	return out, pe
}

func (s *fakeServer) completeLocked(id, worker string, outputs json.RawMessage) (any, *protoError) {
	if len(outputs) == 0 {
		return nil, refuse(http.StatusBadRequest, "invalid_request", "outputs are required")
	}
	canonical := canonicalJSON(outputs)
	t, pe := s.heldLocked(id, worker)
	if t != nil && t.status == "completed" && t.worker == worker && t.outputs == canonical {
		return map[string]any{"status": "completed", "route": routeOf(outputs)}, nil
	}
	if pe != nil {
		return nil, pe
	}
	var doc map[string]any
	if json.Unmarshal(outputs, &doc) != nil || doc == nil {
		pe := refuse(http.StatusUnprocessableEntity, "invalid_outputs", "the outputs violate revision %d of %s", t.rev, t.def)
		pe.errors = []FieldError{{Path: "/outputs", Message: "must be an object"}}
		return nil, pe
	}
	if _, ok := doc[s.required]; !ok && s.required != "" {
		pe := refuse(http.StatusUnprocessableEntity, "invalid_outputs", "the outputs violate revision %d of %s", t.rev, t.def)
		pe.errors = []FieldError{{Path: "/outputs/" + s.required, Message: "is required"}}
		return nil, pe
	}
	t.status, t.outputs = "completed", canonical
	return map[string]any{"status": "completed", "route": routeOf(outputs)}, nil
}

func canonicalJSON(b []byte) string {
	var v any
	_ = json.Unmarshal(b, &v)
	c, _ := json.Marshal(v)
	return string(c)
}

func routeOf(outputs json.RawMessage) any {
	var doc struct {
		Result *string `json:"result"`
	}
	_ = json.Unmarshal(outputs, &doc)
	if doc.Result == nil {
		return nil
	}
	return *doc.Result
}

var errorCodeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

func (s *fakeServer) fail(r *http.Request) (any, *protoError) {
	var req struct {
		WorkerID   string  `json:"worker_id"`
		Attempt    *int    `json:"attempt"` // the SDK names it; this fake does not check it
		ErrorCode  string  `json:"error_code"`
		Message    string  `json:"message"`
		Retryable  *bool   `json:"retryable"`
		RetryDelay *string `json:"retry_delay"`
	}
	if pe := decode(r, &req); pe != nil {
		return nil, pe
	}
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := failRecord{ID: id, WorkerID: req.WorkerID, ErrorCode: req.ErrorCode, Message: req.Message, RetryDelay: req.RetryDelay}
	if req.Retryable != nil {
		rec.Retryable = *req.Retryable
	}
	out, pe := s.failLocked(id, req.WorkerID, req.ErrorCode, req.Retryable, req.RetryDelay)
	rec.Status, rec.Code = code(pe)
	s.fails = append(s.fails, rec)
	return out, pe
}

func (s *fakeServer) failLocked(id, worker, errorCode string, retryable *bool, retryDelay *string) (any, *protoError) {
	if !errorCodeRE.MatchString(errorCode) {
		return nil, refuse(http.StatusBadRequest, "invalid_request", "error_code must be 1 to 64 letters, digits or _ . : -")
	}
	if retryable == nil {
		// The worker must always say: an omitted false would read as a
		// decision it never made.
		return nil, refuse(http.StatusBadRequest, "invalid_request", "retryable is expected")
	}
	delay := s.retryDelay
	if retryDelay != nil {
		d, pe := duration("retry_delay", retryDelay, 24*time.Hour)
		if pe != nil {
			return nil, pe
		}
		delay = d
	}
	t, pe := s.heldLocked(id, worker)
	if pe != nil {
		return nil, pe
	}
	left := s.maxAttempts - t.attempt
	if *retryable && left > 0 {
		at := time.Now().Add(delay)
		t.status, t.availableAt = "available", at
		s.notifyLocked()
		return map[string]any{"status": "available", "attempts_left": left, "available_at": at}, nil
	}
	t.status = "failed"
	return map[string]any{"status": "failed", "attempts_left": left, "available_at": nil}, nil
}

func (s *fakeServer) release(r *http.Request) (any, *protoError) {
	var req struct {
		WorkerID string `json:"worker_id"`
		Attempt  *int   `json:"attempt"` // the SDK names it; this fake does not check it
	}
	if pe := decode(r, &req); pe != nil {
		return nil, pe
	}
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noRelease {
		return nil, refuse(http.StatusNotFound, "not_found", "no route for %s", r.URL.Path)
	}
	t, pe := s.heldLocked(id, req.WorkerID)
	rec := settleRecord{ID: id, WorkerID: req.WorkerID}
	rec.Status, rec.Code = code(pe)
	s.releases = append(s.releases, rec)
	if pe != nil {
		return nil, pe
	}
	// The released attempt is given back.
	t.status, t.availableAt, t.attempt = "available", time.Now(), t.attempt-1
	s.notifyLocked()
	return map[string]any{"status": "available", "attempts_left": s.maxAttempts - t.attempt, "available_at": t.availableAt}, nil
}

func (s *fakeServer) extend(r *http.Request) (any, *protoError) {
	var req struct {
		WorkerID     string  `json:"worker_id"`
		Attempt      *int    `json:"attempt"` // the SDK names it; this fake does not check it
		LockDuration *string `json:"lock_duration"`
	}
	if pe := decode(r, &req); pe != nil {
		return nil, pe
	}
	if req.LockDuration == nil {
		return nil, refuse(http.StatusBadRequest, "invalid_request", "lock_duration is expected")
	}
	id := r.PathValue("id")
	d, pe := duration("lock_duration", req.LockDuration, 10*time.Minute)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := extendRecord{ID: id, WorkerID: req.WorkerID, LockDuration: *req.LockDuration}
	var out any
	if pe == nil {
		var t *fakeTask
		if t, pe = s.heldLocked(id, req.WorkerID); pe == nil {
			t.lockExpires = time.Now().Add(d)
			out = map[string]any{"lock_expires_at": t.lockExpires}
		}
	}
	rec.Status, rec.Code = code(pe)
	s.extends = append(s.extends, rec)
	return out, pe
}

// errorsAsAPI is errors.As for *APIError, for brevity in tests.
func errorsAsAPI(err error) (*APIError, bool) {
	var ae *APIError
	ok := errors.As(err, &ae)
	return ae, ok
}
