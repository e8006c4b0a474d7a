package worker

import "sync"

// goroutines runs tasks' handling on goroutines kept between tasks. A
// goroutine's stack starts small and grows by copying as a settlement goes
// down through Connect and net/http: a fresh goroutine per task paid that
// growth every time (a twentieth of the bench process's CPU in the cycle
// with the Go SDK). Idle goroutines are at most as many as tasks ever ran
// at once, and leave when the run ends.
type goroutines struct {
	idle chan func()
	quit chan struct{}
	wg   sync.WaitGroup
}

func newGoroutines() *goroutines {
	return &goroutines{idle: make(chan func()), quit: make(chan struct{})}
}

// run runs f on an idle goroutine, or on a new one when none is idle.
func (g *goroutines) run(f func()) {
	select {
	case g.idle <- f:
		return
	default:
	}
	g.wg.Add(1)
	go g.loop(f)
}

func (g *goroutines) loop(f func()) {
	defer g.wg.Done()
	for {
		f()
		select {
		case f = <-g.idle:
		case <-g.quit:
			return
		}
	}
}

// stop sends the idle goroutines away, and waits for them and for the busy
// ones when wait is set (not when handlers that ignored their cancellation
// were abandoned).
func (g *goroutines) stop(wait bool) {
	close(g.quit)
	if wait {
		g.wg.Wait()
	}
}
