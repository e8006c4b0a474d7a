package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// tally counts settled units (occurrences completed, jobs completed) and
// signals when a count is reached. Counts are cumulative across the
// warm-up and the measured phase.
type tally struct {
	mu      sync.Mutex
	n       int
	waiting []tallyWait
}

type tallyWait struct {
	target int
	ch     chan struct{}
}

// add counts k more settled units.
func (t *tally) add(k int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += k
	t.notify()
}

// set sets the count (for systems whose count is polled).
func (t *tally) set(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n = n
	t.notify()
}

func (t *tally) notify() {
	t.waiting = slices.DeleteFunc(t.waiting, func(w tallyWait) bool {
		if t.n >= w.target {
			close(w.ch)
			return true
		}
		return false
	})
}

func (t *tally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// reached is closed once the count is at least target.
func (t *tally) reached(target int) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := make(chan struct{})
	if t.n >= target {
		close(ch)
		return ch
	}
	t.waiting = append(t.waiting, tallyWait{target, ch})
	return ch
}

// load is a throughput run: units [from, from+n) are started by producers
// goroutines calling start, one unit per call, while the system's workers
// (started by the caller) settle them and count each settlement in settled.
// A unit is whatever the scenario starts in one call: one instance or job
// in cycle; a batch scenario starts a batch per call and sets perUnit.
type load struct {
	label     string
	from, n   int
	producers int
	start     func(ctx context.Context, i int) error
	settled   *tally
	// perUnit is the settlements one unit leads to (0 means 1).
	perUnit int
	// failed reports an error of the workers, which ends the run.
	failed <-chan error
}

// run starts every unit and waits until all are settled. It returns the
// time from the first start to the last settlement.
func (l load) run(ctx context.Context, log *progress) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	units := make(chan int)
	errs := make(chan error, l.producers+1)
	var wg sync.WaitGroup
	for range l.producers {
		wg.Go(func() {
			for i := range units {
				if err := l.start(ctx, i); err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("start %d: %w", i, err)
					}
					cancel()
					return
				}
			}
		})
	}
	per := max(l.perUnit, 1)
	done := l.settled.reached((l.from + l.n) * per)
	began := time.Now()
	go func() {
		defer close(units)
		for i := l.from; i < l.from+l.n; i++ {
			select {
			case units <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer wg.Wait()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return time.Since(began), nil
		case err := <-errs:
			return 0, err
		case err := <-l.failed:
			return 0, fmt.Errorf("worker: %w", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
			got := l.settled.count() - l.from*per
			elapsed := time.Since(began)
			log.printf("%s: %d/%d settled (%.0f/s)", l.label, got, l.n*per, float64(got)/elapsed.Seconds())
		}
	}
}

// warmup is how many units run before a measured phase: enough for every
// connection to prepare its statements and every cache to fill.
func warmup(n int) int { return min(200, max(n/10, 10)) }

// percentile returns the nearest-rank percentile p (0 < p ≤ 100) of sorted
// durations, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return ms(sorted[i])
}
