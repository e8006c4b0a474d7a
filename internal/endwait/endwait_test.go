package endwait

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/relais/relais/internal/fault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// table is a set of instance statuses the hub reads.
type table struct {
	mu    sync.Mutex
	s     map[uuid.UUID]string
	reads int
	fail  bool
}

func (t *table) statuses(_ context.Context, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reads++
	if t.fail {
		return nil, errors.New("database down")
	}
	out := map[uuid.UUID]string{}
	for _, id := range ids {
		if s, ok := t.s[id]; ok {
			out[id] = s
		}
	}
	return out, nil
}

func (t *table) set(id uuid.UUID, s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s[id] = s
}

func start(t *testing.T, tab *table, max int) *Hub {
	t.Helper()
	h := New(tab.statuses, "running", time.Millisecond, max, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// holds is the credentials check of a caller whose token holds.
func holds(context.Context) error { return nil }

// waitFor runs Wait in the background and returns when it returned.
func waitFor(h *Hub, id uuid.UUID, d time.Duration) <-chan error {
	got := make(chan error, 1)
	go func() { got <- h.Wait(context.Background(), id, d, holds) }()
	return got
}

// A read returns once its instance leaves running (ended, held, or gone),
// not before; another instance's end leaves it waiting.
func TestAReadWaitsForItsInstance(t *testing.T) {
	running, other, gone := uuid.New(), uuid.New(), uuid.New()
	tab := &table{s: map[uuid.UUID]string{running: "running", other: "running", gone: "running"}}
	h := start(t, tab, 10)
	a, b := waitFor(h, running, time.Minute), waitFor(h, gone, time.Minute)
	for h.Waiting() != 2 {
		time.Sleep(time.Millisecond)
	}
	tab.set(other, "completed")
	select {
	case <-a:
		t.Fatal("a read returned while its instance runs")
	case <-time.After(50 * time.Millisecond):
	}
	tab.set(running, "held")
	tab.mu.Lock()
	delete(tab.s, gone)
	tab.mu.Unlock()
	for _, c := range []<-chan error{a, b} {
		select {
		case err := <-c:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a read still waits after its instance stopped running")
		}
	}
	if n := h.Waiting(); n != 0 {
		t.Errorf("%d reads still counted as waiting", n)
	}
}

// Past its maximum the hub refuses a read; a failing statement wakes
// nobody (the read waits to its deadline); Close answers every read now,
// and a later one at once.
func TestBoundsFailuresAndClose(t *testing.T) {
	id := uuid.New()
	tab := &table{s: map[uuid.UUID]string{id: "running"}, fail: true}
	h := start(t, tab, 1)
	first := waitFor(h, id, time.Minute)
	for h.Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	if err := h.Wait(context.Background(), id, time.Minute, holds); !fault.HasCode(err, "too_many_waiters") {
		t.Fatalf("a read past the maximum: %v, want too_many_waiters", err)
	}
	tab.set(id, "completed") // unread: every statement fails
	select {
	case <-first:
		t.Fatal("a read returned though no statement answered")
	case <-time.After(50 * time.Millisecond):
	}
	began := time.Now()
	if err := h.Wait(context.Background(), uuid.New(), 20*time.Millisecond, holds); !fault.HasCode(err, "too_many_waiters") {
		t.Fatalf("full: %v", err)
	}
	h.Close()
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("Close left a read waiting")
	}
	if err := h.Wait(context.Background(), id, time.Minute, holds); err != nil || time.Since(began) > 5*time.Second {
		t.Fatalf("a read after Close: %v after %v, want at once", err, time.Since(began))
	}
}

// A read ends with its deadline or its caller's context.
func TestDeadlineAndCancel(t *testing.T) {
	id := uuid.New()
	h := start(t, &table{s: map[uuid.UUID]string{id: "running"}}, 10)
	began := time.Now()
	if err := h.Wait(context.Background(), id, 30*time.Millisecond, holds); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 30*time.Millisecond {
		t.Errorf("returned after %v, before its 30ms", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- h.Wait(ctx, id, time.Minute, holds) }()
	cancel()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled read still waits")
	}
}

// A change of tokens or grants makes a waiting read check its caller's
// credentials: one that holds waits on, one that no longer does ends the
// wait with its error; other changes check nothing.
func TestTokenChangesRecheckTheCaller(t *testing.T) {
	id := uuid.New()
	h := start(t, &table{s: map[uuid.UUID]string{id: "running"}}, 10)
	var mu sync.Mutex
	checks, revoked := 0, false
	still := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		checks++
		if revoked {
			return errors.New("revoked")
		}
		return nil
	}
	got := make(chan error, 1)
	go func() { got <- h.Wait(context.Background(), id, time.Minute, still) }()
	for h.Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	h.Invalidate("definitions:crm")
	h.Invalidate("tokens")
	for {
		mu.Lock()
		n := checks
		mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-got:
		t.Fatalf("the wait ended (%v) though the credentials hold", err)
	case <-time.After(50 * time.Millisecond):
	}
	mu.Lock()
	revoked = true
	mu.Unlock()
	h.Invalidate("tokens")
	select {
	case err := <-got:
		if err == nil || err.Error() != "revoked" {
			t.Fatalf("the wait ended with %v; want the check's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read of a revoked token still waits")
	}
	mu.Lock()
	defer mu.Unlock()
	if checks != 2 {
		t.Errorf("%d checks; want one per change of tokens, none for a definition's", checks)
	}
}
