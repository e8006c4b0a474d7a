package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relais/relais/internal/testlog"
)

// fakeClock is a settable clock for the cache.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestCacheSharesOneLoadAndServesStaleValues(t *testing.T) {
	t.Parallel()
	var loads atomic.Int64
	// Load n returns once gates[n-1] is closed.
	gates := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	release := gates[0]
	clk := &fakeClock{t: time.Unix(0, 0)}
	c := New("test", func(ctx context.Context) (int64, error) {
		n := loads.Add(1)
		<-gates[min(n, 3)-1]
		return n, nil
	}, slog.New(slog.DiscardHandler), 5*time.Second)
	c.now = clk.now

	// Concurrent first requests wait for one shared load.
	var wg sync.WaitGroup
	got := make([]int64, 20)
	for i := range got {
		wg.Go(func() {
			v, _, err := c.Get(context.Background())
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	// Not needed for correctness, only to make the pile-up likely.
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	for _, v := range got {
		if v != 1 {
			t.Fatalf("values %v: want every request to get the one load", got)
		}
	}

	// Fresh: no load. Stale: the old value at once, one refresh behind it.
	clk.add(4 * time.Second)
	if v, _, _ := c.Get(context.Background()); v != 1 || loads.Load() != 1 {
		t.Fatalf("fresh value: %d after %d loads", v, loads.Load())
	}
	clk.add(2 * time.Second)
	// The refresh is held until every stale read has answered.
	stale := make(chan int64, 10)
	go func() {
		for range 10 {
			v, _, _ := c.Get(context.Background())
			stale <- v
		}
	}()
	for range 10 {
		select {
		case v := <-stale:
			if v != 1 {
				t.Fatalf("a stale read got %d, want the old value", v)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a stale read waited for the refresh")
		}
	}
	close(gates[1])
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, _, _ := c.Get(context.Background()); v == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background refresh never landed")
		}
		time.Sleep(time.Millisecond)
	}
	if n := loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2: stale reads must share one refresh", n)
	}
}

func TestCacheKeepsTheLastValueWhenARefreshFails(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	var loads atomic.Int64
	clk := &fakeClock{t: time.Unix(0, 0)}
	var logs testlog.Buffer
	c := New("test", func(ctx context.Context) (int64, error) {
		loads.Add(1)
		if fail.Load() {
			return 0, errors.New("database down")
		}
		return 7, nil
	}, slog.New(slog.NewTextHandler(&logs, nil)), time.Second)
	c.now = clk.now
	if v, _, err := c.Get(context.Background()); v != 7 || err != nil {
		t.Fatalf("first get: %d %v", v, err)
	}
	fail.Store(true)
	clk.add(2 * time.Second)
	for range 100 {
		if v, _, err := c.Get(context.Background()); v != 7 || err != nil {
			t.Fatalf("after a failed refresh: %d %v, want the last value", v, err)
		}
		time.Sleep(time.Millisecond)
	}
	if loads.Load() < 3 {
		t.Error("no refresh was attempted again")
	}
	// Said once for the run of failures (an outage logged three lines
	// every few seconds: SRE QA), its repeats at debug level.
	if n := strings.Count(logs.String(), "refreshing a cached snapshot failed"); n != 1 {
		t.Errorf("the failed refreshes were warned of %d times, want once:\n%s", n, logs.String())
	}

	cold := New("cold", func(ctx context.Context) (int, error) { return 0, errors.New("down") },
		slog.New(slog.DiscardHandler), time.Second)
	if _, _, err := cold.Get(context.Background()); err == nil {
		t.Error("a cold cache whose load fails returned no error")
	}
}

func TestQuietWhenLogsARefreshFailingOnAStoppedSourceAtDebug(t *testing.T) {
	t.Parallel()
	closed := errors.New("closed pool")
	var stopping atomic.Bool
	clk := &fakeClock{t: time.Unix(0, 0)}
	var logs testlog.Buffer
	c := New("test", func(ctx context.Context) (int, error) {
		if stopping.Load() {
			return 0, fmt.Errorf("engine: health: %w", closed)
		}
		return 7, nil
	}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), time.Second).
		QuietWhen(func(err error) bool { return errors.Is(err, closed) })
	c.now = clk.now
	if _, _, err := c.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The process stops: its pool closes under a refresh.
	stopping.Store(true)
	clk.add(2 * time.Second)
	c.Get(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "refreshing a cached snapshot failed") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := logs.String(); !strings.Contains(got, "level=DEBUG msg=\"refreshing a cached snapshot failed") {
		t.Errorf("a refresh failing on a closed source was logged\n%s\nwant at debug level", got)
	}
}

func TestStampWithDatesValuesByItsClockAndAgesThemByTheWallClock(t *testing.T) {
	t.Parallel()
	wall := &fakeClock{t: time.Unix(0, 0)}
	engine := &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	var loads atomic.Int64
	c := New("test", func(ctx context.Context) (int64, error) { return loads.Add(1), nil },
		slog.New(slog.DiscardHandler), time.Second).StampWith(engine.now)
	c.now = wall.now
	_, at, err := c.Get(context.Background())
	if err != nil || !at.Equal(engine.now()) {
		t.Fatalf("Get dated its value %v (%v), want the stamp clock's %v", at, err, engine.now())
	}
	// Moving the stamp clock does not age the value; moving the wall clock does.
	engine.add(time.Hour)
	c.Get(context.Background())
	if loads.Load() != 1 {
		t.Fatalf("%d loads: the stamp clock aged the value", loads.Load())
	}
	wall.add(2 * time.Second)
	c.Get(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, at, _ := c.Get(context.Background()); v == 2 {
			if !at.Equal(engine.now()) {
				t.Fatalf("the refreshed value is dated %v, want %v", at, engine.now())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wall clock's age never started a refresh")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFreshWaitsBrieflyAfterAQuietSpell: after a quiet spell (nobody asked
// for several ttls) Fresh refreshes the value before answering when the
// refresh is quick, and answers the old one when the refresh is slow; a
// watched value, and Get, answer at once.
func TestFreshWaitsBrieflyAfterAQuietSpell(t *testing.T) {
	t.Parallel()
	var loads atomic.Int64
	slow := make(chan struct{})
	defer close(slow)
	clk := &fakeClock{t: time.Unix(0, 0)}
	c := New("test", func(ctx context.Context) (int64, error) {
		n := loads.Add(1)
		if n >= 3 {
			<-slow
		}
		return n, nil
	}, slog.New(slog.DiscardHandler), 5*time.Second)
	c.now = clk.now
	c.idleWait = time.Minute
	if v, _, _ := c.Fresh(context.Background()); v != 1 {
		t.Fatalf("first value %d", v)
	}
	clk.add(time.Hour)
	if v, _, _ := c.Fresh(context.Background()); v != 2 {
		t.Fatalf("after an idle hour Fresh answered %d, want the refreshed 2", v)
	}
	// Watched (asked a few seconds ago) and stale: the old value at once,
	// though the refresh it starts never ends.
	clk.add(6 * time.Second)
	began := time.Now()
	if v, _, _ := c.Fresh(context.Background()); v != 2 || time.Since(began) > 10*time.Second {
		t.Fatalf("a watched value: %d after %v, want the old 2 at once", v, time.Since(began))
	}
	// Get never waits, quiet spell or not.
	clk.add(time.Hour)
	began = time.Now()
	if v, _, _ := c.Get(context.Background()); v != 2 || time.Since(began) > 10*time.Second {
		t.Fatalf("Get after a quiet spell: %d after %v, want the old 2 at once", v, time.Since(began))
	}
	// A slow refresh after a quiet spell: the old value once the wait is up.
	clk.add(time.Hour)
	c.idleWait = 20 * time.Millisecond
	if v, _, _ := c.Fresh(context.Background()); v != 2 {
		t.Fatalf("a slow refresh: %d, want the old 2 after the wait", v)
	}
}

// An expired value is refreshed before Fresh answers, however young it
// is (an operator's action just changed what it counts); Get answers it
// at once and starts the refresh; a load begun before Expire does not
// count as after it.
func TestExpireMakesFreshWaitForARefresh(t *testing.T) {
	t.Parallel()
	var loads atomic.Int64
	gate := make(chan struct{}, 1)
	c := New("test", func(ctx context.Context) (int64, error) {
		n := loads.Add(1)
		if n == 3 {
			<-gate // the third load waits, begun before a second Expire
		}
		return n, nil
	}, slog.New(slog.DiscardHandler), time.Hour)
	c.idleWait = 10 * time.Second
	if v, _, _ := c.Fresh(context.Background()); v != 1 {
		t.Fatalf("first value %d", v)
	}
	if v, _, _ := c.Fresh(context.Background()); v != 1 || loads.Load() != 1 {
		t.Fatalf("a young value: %d after %d loads, want 1 from the cache", v, loads.Load())
	}
	c.Expire()
	if v, _, _ := c.Fresh(context.Background()); v != 2 {
		t.Fatalf("Fresh after Expire: %d, want the refreshed 2", v)
	}
	if v, _, _ := c.Fresh(context.Background()); v != 2 || loads.Load() != 2 {
		t.Fatalf("after the refresh: %d after %d loads, want 2 from the cache", v, loads.Load())
	}
	c.Expire()
	if v, _, _ := c.Get(context.Background()); v != 2 {
		t.Fatalf("Get after Expire: %d, want the stale 2 at once", v)
	}
	// The refresh Get started (load 3) is held; expired again meanwhile,
	// its value is stale when it lands.
	c.Expire()
	gate <- struct{}{}
	if v, _, _ := c.Fresh(context.Background()); v != 4 {
		t.Fatalf("Fresh after an Expire during a load: %d, want 4, loaded after it", v)
	}
}
