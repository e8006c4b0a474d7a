package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

// TestUnreachableDatabaseReportsProgress: a start against a database that
// refuses connections, or accepts them and never answers, says within 5 s
// where it waits and why, then exits naming the cause after
// RELAIS_DATABASE_CONNECT_TIMEOUT; the password appears nowhere.
func TestUnreachableDatabaseReportsProgress(t *testing.T) {
	t.Parallel()
	const password = "s3cret-canary-pass"
	refusing := closedPort(t)
	silent := silentServer(t)
	for _, c := range []struct {
		name, addr, cause string
	}{
		{"refused", refusing, "connection refused"},
		{"silent", silent, "timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr := &testlog.Buffer{}, &testlog.Buffer{}
			env := map[string]string{
				"RELAIS_DATABASE_URL":             "postgres://relais:" + password + "@" + c.addr + "/relais?sslmode=disable",
				"RELAIS_DATABASE_CONNECT_TIMEOUT": "PT6S",
				"RELAIS_LISTEN":                   "127.0.0.1:0",
			}
			began := time.Now()
			done := make(chan error, 1)
			go func() {
				done <- run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, stdout, stderr)
			}()

			want := "waiting for PostgreSQL at " + c.addr + ": "
			for !strings.Contains(stderr.String(), want) {
				if time.Since(began) > 5*time.Second {
					t.Fatalf("no progress report within 5s; stderr:\n%s", stderr)
				}
				time.Sleep(20 * time.Millisecond)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not give up")
			}
			if took := time.Since(began); took < 5*time.Second || took > 10*time.Second {
				t.Errorf("serve gave up after %v; want about the 6 s of RELAIS_DATABASE_CONNECT_TIMEOUT", took)
			}
			if err == nil || !strings.Contains(err.Error(), c.addr) || !strings.Contains(err.Error(), "RELAIS_DATABASE_CONNECT_TIMEOUT") || !strings.Contains(err.Error(), c.cause) {
				t.Errorf("err = %v; want one naming %s, the timeout setting and %q", err, c.addr, c.cause)
			}
			if line := firstLineWith(stderr.String(), want); !strings.Contains(line, c.cause) {
				t.Errorf("progress line %q does not give the cause %q", line, c.cause)
			}
			for where, text := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "error": err.Error()} {
				if strings.Contains(text, password) {
					t.Errorf("the password appears in %s:\n%s", where, text)
				}
			}
		})
	}
}

func firstLineWith(text, sub string) string {
	for line := range strings.Lines(text) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentServer accepts connections and never says a word, like a server
// behind a stalled network path.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestMalformedDatabaseURLSaysWhatAURLLooksLike: a misspelt scheme or a
// bare host:port is refused before anything starts, with the shape of a
// URL rather than pgx's "invalid keyword/value" alone, and without the
// password.
func TestMalformedDatabaseURLSaysWhatAURLLooksLike(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"postgress://relais:s3cret-canary@127.0.0.1:5432/relais", "127.0.0.1:5432/relais"} {
		env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_LISTEN": "127.0.0.1:0"}
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &testlog.Buffer{}, &testlog.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "RELAIS_DATABASE_URL") || !strings.Contains(err.Error(), "starts with postgres://") || strings.Contains(err.Error(), "s3cret-canary") {
			t.Errorf("%s: err = %v; want RELAIS_DATABASE_URL refused with the shape of a URL, no password", url, err)
		}
	}
}

// TestPoolSizeDefaultsTo20UnlessTheURLSetsIt: pgx's own default (the
// cores) is too small for a replica, but a pool_max_conns in the URL is
// the operator's and is kept.
func TestPoolSizeDefaultsTo20UnlessTheURLSetsIt(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for given, want := range map[string]int32{url: 20, url + sep + "pool_max_conns=3": 3, url + sep + "pool_max_conns=40": 40} {
		cfg := config.Default()
		cfg.DatabaseURL = given
		db, err := openDatabase(context.Background(), cfg, slog.New(slog.DiscardHandler), false)
		if err != nil {
			t.Fatal(err)
		}
		if got := db.pool.Config().MaxConns; got != want {
			t.Errorf("%s: pool of %d connections, want %d", given, got, want)
		}
		db.close()
	}
}
