// Package outage logs the failures of a background loop once per outage:
// the first as a warning, the repeats at debug level only, and the
// recovery with how long it took and how many times it failed. A loop
// that retries every second would otherwise write thousands of identical
// warnings while PostgreSQL restarts.
package outage

import (
	"log/slog"
	"sync"
	"time"
)

// Log follows one loop's outages. Its zero value is not usable: make one
// with New. It is safe for concurrent use.
type Log struct {
	logger *slog.Logger
	what   string
	now    func() time.Time

	mu       sync.Mutex
	failures int
	since    time.Time
}

// New returns the Log of the loop that does what ("timer pass", "push
// claim"), writing to logger.
func New(logger *slog.Logger, what string) *Log {
	return &Log{logger: logger, what: what, now: time.Now}
}

// Failed records a failure: the first of an outage is logged as a warning
// with its error, the next ones at debug level.
func (l *Log) Failed(err error) {
	l.mu.Lock()
	l.failures++
	first := l.failures == 1
	if first {
		l.since = l.now()
	}
	l.mu.Unlock()
	if first {
		l.logger.Warn(l.what+" failed; retrying (repeats are logged at debug level until it succeeds)", "err", err)
		return
	}
	l.logger.Debug(l.what+" failed again", "err", err)
}

// Succeeded ends an outage, if one was under way, saying so.
func (l *Log) Succeeded() {
	l.mu.Lock()
	n, since := l.failures, l.since
	l.failures = 0
	l.mu.Unlock()
	if n > 0 {
		l.logger.Info(l.what+" works again", "failures", n, "after", l.now().Sub(since).Round(time.Millisecond))
	}
}
