package embeddedpg

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// RestartPolicy bounds how a Supervisor restarts a server that died.
type RestartPolicy struct {
	// MinDelay is the wait before the first restart, doubled after each
	// failed one up to MaxDelay.
	MinDelay, MaxDelay time.Duration
	// MaxFailures failed restarts in a row, or MaxDown without a running
	// server, make the Supervisor give up.
	MaxFailures int
	MaxDown     time.Duration
}

// DefaultRestartPolicy restarts after 0.5 s, 1 s, 2 s… up to 10 s between
// attempts, and gives up after 10 failed restarts in a row (about 65 s of
// waiting plus the attempts themselves) or 5 minutes without a server,
// whichever comes first.
var DefaultRestartPolicy = RestartPolicy{MinDelay: 500 * time.Millisecond, MaxDelay: 10 * time.Second, MaxFailures: 10, MaxDown: 5 * time.Minute}

// Supervisor keeps an embedded cluster running: when its server exits
// without Stop (it crashed, or someone killed it), the Supervisor starts
// it again on the same port, so that connection pools pointed at it
// reconnect on their own, with backoff between failed attempts. A server
// is expendable; a relais that exits with its HTTP surface because of a
// crash that a restart fixes is not.
type Supervisor struct {
	opts   Options
	policy RestartPolicy

	mu  sync.Mutex
	cur *Cluster

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	failed   chan error
}

// Supervise watches c, which Start returned for opts, and restarts its
// server as policy says whenever it exits unexpectedly. Stop the
// Supervisor, not c.
func Supervise(c *Cluster, opts Options, policy RestartPolicy) *Supervisor {
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	// The same port every time: the URL handed out stays valid.
	opts.Port = c.Port()
	s := &Supervisor{opts: opts, policy: policy, cur: c, stop: make(chan struct{}), done: make(chan struct{}), failed: make(chan error, 1)}
	go s.run()
	return s
}

// Failed receives, once, why the Supervisor gave up restarting the server.
func (s *Supervisor) Failed() <-chan error { return s.failed }

// Port is the server's port, the same across restarts.
func (s *Supervisor) Port() int { return s.opts.Port }

// Stop ends the supervision (a restart in progress is abandoned) and
// stops the server, as Cluster.Stop does.
func (s *Supervisor) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Stop(ctx)
}

func (s *Supervisor) run() {
	defer close(s.done)
	log := s.opts.Logger
	for {
		s.mu.Lock()
		c := s.cur
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-c.Wait():
		}
		if c.stopRequested.Load() {
			return
		}
		down := time.Now()
		delay := s.policy.MinDelay
		var lastErr error
		for failures := 0; ; {
			log.Warn("embedded postgres: restarting the server that exited", "in", delay, "attempt", failures+1, "max_attempts", s.policy.MaxFailures)
			select {
			case <-s.stop:
				s.mu.Lock()
				s.cur = nil
				s.mu.Unlock()
				return
			case <-time.After(delay):
			}
			next, err := s.startOnce()
			if err == nil {
				s.mu.Lock()
				s.cur = next
				s.mu.Unlock()
				log.Info("embedded postgres: server restarted", "port", s.opts.Port, "down_for", time.Since(down).Round(time.Millisecond), "attempts", failures+1)
				break
			}
			if s.stopped() {
				s.mu.Lock()
				s.cur = nil
				s.mu.Unlock()
				return
			}
			failures++
			lastErr = err
			log.Error("embedded postgres: restart failed", "attempt", failures, "err", err)
			if failures >= s.policy.MaxFailures || time.Since(down) >= s.policy.MaxDown {
				s.mu.Lock()
				s.cur = nil
				s.mu.Unlock()
				s.failed <- fmt.Errorf("the embedded PostgreSQL server in %s exited unexpectedly and %d restarts over %v failed (the bound is %d failures in a row or %v down); last error: %w",
					s.opts.Dir, failures, time.Since(down).Round(time.Second), s.policy.MaxFailures, s.policy.MaxDown, lastErr)
				return
			}
			delay = min(2*delay, s.policy.MaxDelay)
		}
	}
}

// startOnce starts the server, abandoning the attempt if Stop is called.
func (s *Supervisor) startOnce() (*Cluster, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return Start(ctx, s.opts)
}

func (s *Supervisor) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}
