//go:build linux

package faultsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/relais/relais/worker"
)

// ackBook records, per occurrence, which workers Relais answered 200 to a
// completion: two workers told "completed" for one occurrence is a task
// settled twice from the workers' side, and an acknowledged completion the
// database does not hold is a completion lost.
type ackBook struct {
	mu   sync.Mutex
	acks map[string]map[string]bool // occurrence id → worker ids
}

func newAckBook() *ackBook { return &ackBook{acks: map[string]map[string]bool{}} }

func (b *ackBook) add(occurrence, workerID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acks[occurrence] == nil {
		b.acks[occurrence] = map[string]bool{}
	}
	b.acks[occurrence][workerID] = true
}

// workers returns the workers a completion of occurrence was acknowledged to.
func (b *ackBook) workers(occurrence string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for w := range b.acks[occurrence] {
		out = append(out, w)
	}
	return out
}

// ackTransport notes every 200 answer to a completion.
type ackTransport struct {
	base     http.RoundTripper
	workerID string
	book     *ackBook
}

func (t *ackTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/pull/settle") && req.Body != nil {
		// A batch: which item is which occurrence is in the request.
		sent, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(sent))
	}
	res, err := t.base.RoundTrip(req)
	if err != nil || res.StatusCode != http.StatusOK || req.Method != http.MethodPost {
		return res, err
	}
	// /api/v1/pull/occurrences/{id}/complete
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if n := len(parts); n >= 2 && parts[n-1] == "complete" {
		t.book.add(parts[n-2], t.workerID)
	}
	if sent != nil {
		// /api/v1/pull/settle: each completion answered 200 is an
		// acknowledgement.
		body, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			return res, err
		}
		var batch struct {
			Items []struct {
				ID      string          `json:"id"`
				Outputs json.RawMessage `json:"outputs"`
			} `json:"items"`
		}
		var answer struct {
			Items []struct {
				Index  int `json:"index"`
				Status int `json:"status"`
			} `json:"items"`
		}
		if json.Unmarshal(sent, &batch) == nil && json.Unmarshal(body, &answer) == nil {
			for _, a := range answer.Items {
				if a.Status == http.StatusOK && a.Index >= 0 && a.Index < len(batch.Items) && batch.Items[a.Index].Outputs != nil {
					t.book.add(batch.Items[a.Index].ID, t.workerID)
				}
			}
		}
	}
	return res, err
}

// sdkWorker is one in-process Go SDK worker.
type sdkWorker struct {
	id        string
	transport *http.Transport
	cancel    context.CancelFunc
	done      chan error
}

// workerWait is the long poll of the suite's workers: short enough that a
// worker whose replica was killed is back to polling soon after it returns.
const workerWait = 5 * time.Second

// workerLock is the suite's workers' lock: long enough that a finished
// task's outcome is retried through a PostgreSQL restart (a second or two
// here) and reported, short enough that a reservation stranded by a killed
// replica (its fetch answer lost) is offered again soon.
const workerLock = 10 * time.Second

// gate holds the suite's workers' handlers while it is shut: they keep
// their tasks (and extend their locks) without finishing them.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // closed while the gate is open
}

func newGate() *gate {
	g := &gate{ch: make(chan struct{})}
	close(g.ch)
	return g
}

// shut makes handlers wait from now on.
func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
		g.ch = make(chan struct{})
	default:
	}
}

// open lets every waiting handler go on.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
	default:
		close(g.ch)
	}
}

// pass waits until the gate is open or ctx ends.
func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// startSDKWorker runs a worker on base that completes fault_work tasks as
// soon as g lets it, echoing their n; book hears of every acknowledged
// completion.
func startSDKWorker(base, token, id string, g *gate, book *ackBook, logger *slog.Logger) (*sdkWorker, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	// Long polling: the acknowledgements the checks compare are read off
	// the REST answers (ackTransport); streams have their own tests.
	w, err := worker.New(worker.Config{URL: base, Token: token, WorkerID: id, Concurrency: 8, Protocol: worker.ProtocolLongPoll,
		LockDuration: workerLock, Wait: workerWait, ShutdownTimeout: 20 * time.Second, Logger: logger,
		HTTPClient: &http.Client{Transport: &ackTransport{base: tr, workerID: id, book: book}, Timeout: workerWait + 30*time.Second}})
	if err != nil {
		return nil, err
	}
	w.Handle(workDefinition, []int{1}, func(ctx context.Context, t *worker.Task) (any, error) {
		var in struct {
			N int `json:"n"`
		}
		if err := t.Decode(&in); err != nil {
			return nil, worker.Fail("BAD_INPUT", "cannot read inputs")
		}
		if err := g.pass(ctx); err != nil {
			return nil, err
		}
		return map[string]any{"echo": in.N}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	sw := &sdkWorker{id: id, transport: tr, cancel: cancel, done: make(chan error, 1)}
	go func() { sw.done <- w.Run(ctx) }()
	return sw, nil
}

// stop shuts the worker down gracefully and waits for Run to return.
func (w *sdkWorker) stop() error {
	w.cancel()
	defer w.transport.CloseIdleConnections()
	select {
	case err := <-w.done:
		return err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("worker %s did not stop within 60 s", w.id)
	}
}

// The victim worker runs in a child process (this test binary, re-executed
// with these variables set) so that it can be killed with kill -9.
const (
	envVictimURL   = "RELAIS_FAULTSUITE_VICTIM_URL"
	envVictimToken = "RELAIS_FAULTSUITE_VICTIM_TOKEN"
	envVictimID    = "RELAIS_FAULTSUITE_VICTIM_ID"
)

// victimLock is the victim's lock: once it is killed, its tasks are
// offered again that long after its last extension at most.
const victimLock = 3 * time.Second

// runVictim is the victim process: an SDK worker whose handlers never
// finish (they wait for their context, which only a lost lock ends), so
// that a kill -9 finds every task it holds mid-handler.
func runVictim() int {
	w, err := worker.New(worker.Config{URL: os.Getenv(envVictimURL), Token: os.Getenv(envVictimToken), WorkerID: os.Getenv(envVictimID),
		Concurrency: 4, LockDuration: victimLock, Wait: workerWait, Protocol: worker.ProtocolLongPoll})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w.Handle(workDefinition, []int{1}, func(ctx context.Context, t *worker.Task) (any, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startVictim starts the victim process; the caller kills it.
func startVictim(base, token, id, logPath string) (*exec.Cmd, chan struct{}, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envVictimURL+"="+base, envVictimToken+"="+token, envVictimID+"="+id)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return cmd, done, nil
}

// destination is the push destination: it answers fault_push calls after
// a short delay (so that calls are in flight when a replica dies), except
// the calls whose inputs say stall, which it leaves hanging past the
// node's timeout. It counts the calls each occurrence received.
type destination struct {
	srv *httptest.Server

	mu    sync.Mutex
	calls map[string]int // Idempotency-Key (the occurrence id) → calls
}

// destinationDelay is how long an answered call takes.
const destinationDelay = 20 * time.Millisecond

// stallCap bounds a hanging call should the caller never give up.
const stallCap = 30 * time.Second

func newDestination() *destination {
	d := &destination{calls: map[string]int{}}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Inputs struct {
				N     int  `json:"n"`
				Stall bool `json:"stall"`
			} `json:"inputs"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.calls[r.Header.Get("Idempotency-Key")]++
		d.mu.Unlock()
		wait := destinationDelay
		if body.Inputs.Stall {
			wait = stallCap
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(wait):
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"outputs":{"score":%d}}`, body.Inputs.N%101)
	}))
	return d
}

func (d *destination) callsOf(occurrence string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[occurrence]
}

func (d *destination) close() {
	d.srv.CloseClientConnections()
	d.srv.Close()
}
