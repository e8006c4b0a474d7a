// Package relaistest starts a complete Relais HTTP surface on a fresh
// database for black-box tests, and calls it the way a user would.
package relaistest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/internal/server"
	"github.com/relais/relais/internal/testlog"
)

// Env is a running Relais with one token per role.
type Env struct {
	T   testing.TB
	URL string
	// Handler is the replica's HTTP handler, for tests that serve it
	// themselves (over TLS, say).
	Handler http.Handler
	Engine  *engine.Engine
	Pool    *pgxpool.Pool
	Config  config.Config
	Logs    *testlog.Buffer
	// Clock is the engine's clock: tests Advance it past lock expiries and
	// deadlines instead of sleeping.
	Clock    *Clock
	Admin    string
	Designer string
	Operator string
	// Registry is the replica's Prometheus registry.
	Registry *prometheus.Registry

	drain func()
}

// Drain stops the replica as relais serve does on SIGTERM, before the test
// ends: long polls answer, worker streams hand their assignments back and
// end. The HTTP server and the database stay up.
func (e *Env) Drain() { e.drain() }

// replicas numbers the test replicas, which name themselves in the worker
// catalog.
var replicas atomic.Int64

// Option adjusts an Env before it starts.
type Option func(*config.Config)

// New starts Relais on a fresh database.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	return start(t, dbtest.Pool(t), &Clock{}, opts...)
}

// NewOnPool starts Relais on pool, whose database must be migrated: for
// tests that control the PostgreSQL server itself (stop it, restart it).
func NewOnPool(t testing.TB, pool *pgxpool.Pool, opts ...Option) *Env {
	t.Helper()
	return start(t, pool, &Clock{}, opts...)
}

// Replica starts a second Relais replica on e's database, with its own
// engine, LISTEN connection, hub, timers and push runner, and e's tokens.
func (e *Env) Replica(opts ...Option) *Env {
	e.T.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), e.Pool.Config())
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(pool.Close)
	r := start(e.T, pool, e.Clock, opts...)
	r.Admin, r.Designer, r.Operator = e.Admin, e.Designer, e.Operator
	return r
}

func start(t testing.TB, pool *pgxpool.Pool, clock *Clock, opts ...Option) *Env {
	t.Helper()
	cfg := config.Default()
	cfg.TimerInterval = 200 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	spec := TestKeys
	if cfg.DataKeys != "" {
		// A test of replicas whose keys differ.
		spec = cfg.DataKeys
	}
	keys, err := keyring.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(pool, engine.Options{Logger: logger, Keys: keys, Now: clock.Now, Replica: fmt.Sprintf("replica-%d", replicas.Add(1)),
		Limits: engine.Limits{MaxRetryDelay: cfg.Pull.MaxRetryDelay, DefaultPushTimeout: cfg.Push.DefaultTimeout, MaxPushTimeout: cfg.Push.MaxTimeout}})
	reg := prometheus.NewRegistry()
	rep := server.Start(context.Background(), server.Deps{Logger: logger, Config: cfg, Engine: eng, Registry: reg})
	handler, err := recorder(os.Getenv(RecordEnv), rep.Handler)
	if err != nil {
		t.Fatal(err)
	}
	// HTTP/1.1 and cleartext HTTP/2 (h2c), as relais serve listens: gRPC
	// clients need HTTP/2.
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.HTTP2 = server.HTTP2Config(cfg)
	srv.Start()
	t.Cleanup(func() {
		rep.Drain()
		srv.Close()
		rep.Stop()
	})
	e := &Env{T: t, URL: srv.URL, Handler: rep.Handler, Engine: eng, Pool: pool, Config: cfg, Logs: logs, Clock: clock, Registry: reg, drain: rep.Drain}
	ctx := context.Background()
	for _, tok := range []struct {
		dst  *string
		role auth.Role
	}{{&e.Admin, auth.RoleAdmin}, {&e.Designer, auth.RoleDesigner}, {&e.Operator, auth.RoleOperator}} {
		if *tok.dst, _, err = eng.CreateToken(ctx, string(tok.role), tok.role, engine.Expiry{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestKeys is the data key every test replica shares, so replicas on one
// database open each other's sealed values.
var TestKeys = keyring.NewKeySpec("test")

// Response is a finished call.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map, failing the test when it is not one.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

// Code is the problem code of an error response ("" otherwise).
func (r Response) Code() string {
	var m struct{ Code string }
	_ = json.Unmarshal(r.Body, &m)
	return m.Code
}

// Do calls the API. body may be nil, a string, []byte, or any value to
// encode as JSON.
func (e *Env) Do(method, path, token string, body any, headers ...string) Response {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// A header replaces the default of its name; one named again is sent
	// again.
	given := map[string]bool{}
	for i := 0; i+1 < len(headers); i += 2 {
		name := http.CanonicalHeaderKey(headers[i])
		if given[name] {
			req.Header.Add(name, headers[i+1])
		} else {
			req.Header.Set(name, headers[i+1])
		}
		given[name] = true
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return Response{Status: res.StatusCode, Header: res.Header, Body: data}
}

// Must calls the API and fails the test unless the status is want.
func (e *Env) Must(want int, method, path, token string, body any) Response {
	e.T.Helper()
	r := e.Do(method, path, token, body)
	if r.Status != want {
		e.T.Fatalf("%s %s: status %d, want %d; body: %s", method, path, r.Status, want, r.Body)
	}
	return r
}
