package notify

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

func TestDeliversAndReconnects(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	l := New(pool, nil)
	got := make(chan string, 10)
	reconnected := make(chan struct{}, 1)
	l.Handle("relais_test", func(p string) { got <- p })
	l.OnReconnect(func() { reconnected <- struct{}{} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case <-l.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("listener not ready")
	}
	notify := func(payload string) {
		if _, err := pool.Exec(ctx, "select pg_notify('relais_test', $1)", payload); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		t.Helper()
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("payload %q, want %q", p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %q", want)
		}
	}
	notify("one")
	expect("one")

	// Kill the LISTEN session: the listener must come back, say so (so
	// waiters re-check what they may have missed), and deliver again.
	if _, err := pool.Exec(ctx, `select pg_terminate_backend(pid) from pg_stat_activity
		where query ilike 'listen%' and pid <> pg_backend_pid() and datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconnected:
	case <-time.After(15 * time.Second):
		t.Fatal("no reconnection")
	}
	notify("two")
	expect("two")
}

// TestBackoffStartsOverOnceListening: a session that was in place and then
// dropped is retried after the first backoff again, not after one that
// grew over earlier drops: a long-lived replica's next blip must not miss
// notifications for as long as its worst outage did.
func TestBackoffStartsOverOnceListening(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	var logs testlog.Buffer
	l := New(pool, slog.New(slog.NewTextHandler(&logs, nil)))
	reconnected := make(chan struct{}, 1)
	l.Handle("relais_test", func(string) {})
	l.OnReconnect(func() { reconnected <- struct{}{} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-l.Ready()
	for range 4 {
		// Each session lives a while, as a healthy replica's does.
		time.Sleep(1100 * time.Millisecond)
		if _, err := pool.Exec(ctx, `select pg_terminate_backend(pid) from pg_stat_activity
			where query ilike 'listen%' and pid <> pg_backend_pid() and datname = current_database()`); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reconnected:
		case <-time.After(15 * time.Second):
			t.Fatal("no reconnection")
		}
	}
	waits := regexp.MustCompile(`reconnecting in (\S+):`).FindAllStringSubmatch(logs.String(), -1)
	if len(waits) != 4 {
		t.Fatalf("%d reconnections logged, want 4:\n%s", len(waits), logs.String())
	}
	for _, w := range waits {
		if w[1] != "100ms" {
			t.Errorf("a reconnection after a session that was in place waited %s, want 100ms:\n%s", w[1], logs.String())
		}
	}
}

// A listener backing off from failed reconnections tries again at once
// when told the database answers (RetryNow), rather than at the end of a
// backoff that can reach 5 s, notifications sent meanwhile lost.
func TestRetryNowCutsTheBackoffShort(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Pool(t).Config()
	// Refused at each connection: the backoff grows.
	cfg.ConnConfig.Database = "relais_no_such_database"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var logs testlog.Buffer
	l := New(pool, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Handle("relais_test", func(string) {})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	logged := func(what string, within time.Duration) {
		t.Helper()
		for end := time.Now().Add(within); !strings.Contains(logs.String(), what); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("not logged within %v: %q\n%s", within, what, logs.String())
			}
		}
	}
	logged("reconnecting in 3.2s", 15*time.Second)
	l.RetryNow()
	asked := time.Now()
	logged("reconnecting in 5s", 10*time.Second)
	if d := time.Since(asked); d > 1500*time.Millisecond {
		t.Errorf("the next attempt came %v after RetryNow, want at once (not after the 3.2s backoff)", d)
	}
}
