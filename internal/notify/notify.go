// Package notify holds each replica's one LISTEN connection to PostgreSQL
// and hands notifications to in-process subscribers. Notifications are
// hints: after a reconnect (when some may have been missed) subscribers are
// told so they re-check the database.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/outage"
)

// Handler receives one notification's payload. It must not block.
type Handler func(payload string)

// Listener is the replica's LISTEN connection.
type Listener struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu          sync.Mutex
	handlers    map[string][]Handler
	onReconnect []func()
	onListening []func(bool)
	ready       chan struct{}
	readyOnce   sync.Once
	// retryNow cuts a reconnection's backoff short (see RetryNow).
	retryNow chan struct{}
}

// New returns a listener on pool; call Handle for each channel, then Run.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Listener {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{pool: pool, logger: logger, handlers: map[string][]Handler{}, ready: make(chan struct{}),
		retryNow: make(chan struct{}, 1)}
}

// Handle registers h for channel. Handlers registered after Run started
// are used from the next (re)connection on.
func (l *Listener) Handle(channel string, h Handler) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handlers[channel] = append(l.handlers[channel], h)
}

// OnReconnect registers f, called after every reconnection (not the first
// connection): notifications sent while disconnected are lost.
func (l *Listener) OnReconnect(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onReconnect = append(l.onReconnect, f)
}

// OnListening registers f, called with true each time the LISTEN session
// is in place and with false when it ends: in between, notifications may be
// missed, so what relies on them (caches dropped by invalidations) must
// stop relying on them.
func (l *Listener) OnListening(f func(listening bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onListening = append(l.onListening, f)
}

// RetryNow makes a listener waiting to reconnect try at once, for a
// caller that learnt the database answers again: its backoff (up to 5 s)
// is as long again of notifications missed, new work announced to nobody.
func (l *Listener) RetryNow() {
	select {
	case l.retryNow <- struct{}{}:
	default:
	}
}

// Ready is closed once the first LISTEN is in place.
func (l *Listener) Ready() <-chan struct{} { return l.ready }

// Run listens until ctx ends, reconnecting with backoff. The backoff grows
// while reconnecting fails and starts over once a session was in place for
// a second: a long-lived replica's next blip must not wait as long as its
// worst outage did (notifications are missed meanwhile), and a connection
// dropped as soon as it listens (a flapping proxy) still backs off.
func (l *Listener) Run(ctx context.Context) {
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	first := true
	down := outage.New(l.logger, "notification listener")
	for ctx.Err() == nil {
		since, err := l.listen(ctx, !first, down.Succeeded)
		if ctx.Err() != nil {
			return
		}
		first = false
		if !since.IsZero() && time.Since(since) >= time.Second {
			backoff = firstBackoff
		}
		down.Failed(fmt.Errorf("disconnected, reconnecting in %s: %w", backoff, err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		case <-l.retryNow:
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listen runs one LISTEN session until it ends; since is when it was in
// place (zero if it never was), which it tells up as well.
func (l *Listener) listen(ctx context.Context, reconnect bool, up func()) (since time.Time, err error) {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return time.Time{}, err
	}
	// The connection leaves the pool for good: a LISTEN session must not be
	// handed to other work.
	conn := pc.Hijack()
	defer conn.Close(context.Background())

	l.mu.Lock()
	channels := make([]string, 0, len(l.handlers))
	for ch := range l.handlers {
		channels = append(channels, ch)
	}
	callbacks := append([]func(){}, l.onReconnect...)
	listening := append([]func(bool){}, l.onListening...)
	l.mu.Unlock()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "listen "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return time.Time{}, err
		}
	}
	since = time.Now()
	up()
	for _, f := range listening {
		f(true)
	}
	defer func() {
		for _, f := range listening {
			f(false)
		}
	}()
	l.readyOnce.Do(func() { close(l.ready) })
	if reconnect {
		for _, f := range callbacks {
			f()
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return since, nil
			}
			return since, err
		}
		l.mu.Lock()
		hs := l.handlers[n.Channel]
		l.mu.Unlock()
		for _, h := range hs {
			h(n.Payload)
		}
	}
}
