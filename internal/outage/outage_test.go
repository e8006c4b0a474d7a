package outage

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// An outage is told once at warning level, its repeats at debug level,
// and its end with how long it lasted; the next outage is told again.
func TestAnOutageIsToldOnce(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	clock := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	l := New(logger, "timer pass")
	l.now = func() time.Time { return clock }

	l.Succeeded() // no outage: nothing to say
	for range 5 {
		l.Failed(errors.New("connection refused"))
		clock = clock.Add(time.Second)
	}
	l.Succeeded()
	l.Succeeded()
	l.Failed(errors.New("connection refused"))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (the outage, its end, the next outage):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"level=WARN msg=\"timer pass failed; retrying", "level=INFO msg=\"timer pass works again\" failures=5 after=5s", "level=WARN"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], "connection refused") {
		t.Errorf("the first failure's error is not said: %q", lines[0])
	}
}
