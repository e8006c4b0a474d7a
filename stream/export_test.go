package stream

import (
	"sync"
	"sync/atomic"

	"github.com/relais/relais/engine"
)

// LoseAnswer makes the next settlement of worker that commits answer as
// if its COMMIT's answer had been lost. Tests using it must not run in
// parallel.
func LoseAnswer(t interface{ Cleanup(func()) }, worker string) {
	var done atomic.Bool
	lose := func(ref engine.WorkerRef) bool { return ref.WorkerID == worker && done.CompareAndSwap(false, true) }
	loseAnswer.Store(&lose)
	t.Cleanup(func() { loseAnswer.Store(nil) })
}

// OnEmptyClaim calls f, once, after a claim of worker's stream found
// nothing, before the stream asks when more is due.
func OnEmptyClaim(t interface{ Cleanup(func()) }, worker string, f func()) {
	var done atomic.Bool
	hook := func(w string) {
		if w == worker && done.CompareAndSwap(false, true) {
			f()
		}
	}
	emptyClaimed.Store(&hook)
	t.Cleanup(func() { emptyClaimed.Store(nil) })
}

// LoseClaimAnswer makes the next claim of worker's stream that reserves
// something answer as if its COMMIT's answer had been lost.
func LoseClaimAnswer(t interface{ Cleanup(func()) }, worker string) {
	var done atomic.Bool
	lose := func(w string) bool { return w == worker && done.CompareAndSwap(false, true) }
	loseClaimAnswer.Store(&lose)
	t.Cleanup(func() { loseClaimAnswer.Store(nil) })
}

// HoldBeforeWait holds worker's stream loop, once, the next time it is
// about to wait for what comes next: held is closed once it is, and the
// loop goes on when release is called.
func HoldBeforeWait(t interface{ Cleanup(func()) }, worker string) (held <-chan struct{}, release func()) {
	var done atomic.Bool
	h, r := make(chan struct{}), make(chan struct{})
	hook := func(w string) {
		if w == worker && done.CompareAndSwap(false, true) {
			close(h)
			<-r
		}
	}
	beforeWait.Store(&hook)
	var once sync.Once
	release = func() { once.Do(func() { close(r) }) }
	t.Cleanup(func() { release(); beforeWait.Store(nil) })
	return h, release
}
