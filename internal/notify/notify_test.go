package notify

import (
	"context"
	"log/slog"
	"regexp"
	"testing"
	"time"

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
