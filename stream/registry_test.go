package stream

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
)

func newTestSession(worker string) *session {
	return &session{id: uuid.Must(uuid.NewV7()), consumerID: 1, workerID: worker, held: map[uuid.UUID]int{}, signal: make(chan struct{}, 1),
		subs: []engine.Subscription{{Definition: "crm.*"}}}
}

// A cancellation that arrives between a claim's commit and the claim being
// indexed is not lost: hold passes it on.
func TestCancellationBeforeHoldIsPassedOn(t *testing.T) {
	t.Parallel()
	r := newRegistry(10, nil)
	s := newTestSession("w")
	if _, err := r.admit(s); err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	r.cancel(engine.CancelPayload(id, engine.CancelInstanceStopped))
	if got := s.take(); len(got) != 0 {
		t.Fatalf("events before hold: %v", got)
	}
	r.hold(s, id)
	got := s.take()
	if len(got) != 1 || got[0].kind != eventCancel || got[0].occurrence != id || got[0].reason != engine.CancelInstanceStopped {
		t.Fatalf("events after hold: %+v, want the cancellation", got)
	}
	r.hold(s, id)
	if again := s.take(); len(again) != 0 {
		t.Errorf("the cancellation was passed on twice: %+v", again)
	}
}

// Only open subscriptions that lack a notified pair are made to resolve
// again.
func TestNotificationsOfNewPairsResolveOpenStreams(t *testing.T) {
	t.Parallel()
	r := newRegistry(10, nil)
	pattern, fixed := newTestSession("a"), newTestSession("b")
	fixed.subs = []engine.Subscription{{Definition: "crm.add", Revisions: []int{1}}}
	fixed.pairs = engine.Pairs{Keys: []string{"crm.add"}, Revisions: []int32{1}}
	fixed.pairsSeen = fixed.pairs
	for _, s := range []*session{pattern, fixed} {
		if _, err := r.admit(s); err != nil {
			t.Fatal(err)
		}
	}
	r.notify(engine.AvailabilityPayload(engine.ModePull, "crm.add", 2, testNow))
	if got := pattern.take(); len(got) != 1 || got[0].kind != eventResolve {
		t.Errorf("pattern stream events %+v, want a resolve", got)
	}
	if got := fixed.take(); len(got) != 0 {
		t.Errorf("a stream with fixed revisions got %+v", got)
	}
	r.notify(engine.AvailabilityPayload(engine.ModePull, "billing.charge", 1, testNow))
	if got := pattern.take(); len(got) != 0 {
		t.Errorf("crm.* resolved for billing.charge: %+v", got)
	}
}

var testNow = time.Now()

// Cancellations nobody held are forgotten after recentFor, oldest first,
// each once: one taken by a claim and noted again since is not forgotten
// when its first note expires.
func TestRecentCancellationsAreForgottenInOrder(t *testing.T) {
	t.Parallel()
	r := newRegistry(10, nil)
	old, again, fresh := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	r.cancel(engine.CancelPayload(old, engine.CancelInstanceStopped))
	r.cancel(engine.CancelPayload(again, engine.CancelInstanceStopped))
	// again is taken by a claim, then noted anew.
	s := newTestSession("w")
	if _, err := r.admit(s); err != nil {
		t.Fatal(err)
	}
	r.hold(s, again)
	r.drop(s, again)
	r.cancel(engine.CancelPayload(again, engine.CancelInstanceStopped))
	// The first two notes are now recentFor old.
	past := time.Now().Add(-recentFor - time.Second)
	r.mu.Lock()
	if len(r.recentOrder) != 3 {
		r.mu.Unlock()
		t.Fatalf("%d entries in arrival order, want 3", len(r.recentOrder))
	}
	r.recentOrder[0].at, r.recentOrder[1].at = past, past
	r.recent[old] = recentCancel{reason: engine.CancelInstanceStopped, at: past}
	r.mu.Unlock()

	r.cancel(engine.CancelPayload(fresh, engine.CancelInstanceStopped))
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.recent[old]; ok {
		t.Error("a cancellation older than recentFor is still remembered")
	}
	if _, ok := r.recent[again]; !ok {
		t.Error("a cancellation noted again was forgotten with its first note")
	}
	if _, ok := r.recent[fresh]; !ok {
		t.Error("a cancellation noted just now was forgotten")
	}
	if len(r.recentOrder) != 2 {
		t.Errorf("%d entries in arrival order, want the 2 recent ones", len(r.recentOrder))
	}
}

// BenchmarkCancelNobodyHeld is a bulk stop's cancellations arriving at a
// replica whose streams hold none of them: each is noted, and the cost of
// one must not grow with those noted before it.
func BenchmarkCancelNobodyHeld(b *testing.B) {
	r := newRegistry(10, nil)
	payloads := make([]string, b.N)
	for i := range payloads {
		payloads[i] = engine.CancelPayload(uuid.Must(uuid.NewV7()), engine.CancelInstanceStopped)
	}
	b.ResetTimer()
	for i := range b.N {
		r.cancel(payloads[i])
	}
}

// TestCloseWaitsOnceForTheFirstTimeout: a replica drains its streams, then
// stops (each closes the registry); the stop must not wait a second full
// timeout for a stream the drain already gave up on, or a shutdown takes
// twice the time an operator configured.
func TestCloseWaitsOnceForTheFirstTimeout(t *testing.T) {
	t.Parallel()
	r := newRegistry(10, nil)
	r.running.Add(1) // a stream that never ends
	defer r.running.Done()
	if r.close(50 * time.Millisecond) {
		t.Fatal("close reported every stream ended")
	}
	done := make(chan bool)
	go func() { done <- r.close(time.Hour) }()
	select {
	case ended := <-done:
		if ended {
			t.Error("the second close reported every stream ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second close waits its own timeout after the first one's passed")
	}
}
