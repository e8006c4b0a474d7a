package stream

import (
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
