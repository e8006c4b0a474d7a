package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/internal/longpoll"
	"github.com/relais/relais/stream"
)

// When the probe stops getting answers, a request held by a hung database
// is answered 503 database_unavailable, and so is each one that needs the
// database until the probe gets answers again.
func TestDatabaseGateCutsRequestsShort(t *testing.T) {
	t.Parallel()
	g := newDatabaseGate()
	g.patience = 200 * time.Millisecond
	entered := make(chan struct{}, 1)
	// The handler stands for one whose statement waits on a database that
	// does not answer: it ends only with its context.
	srv := httptest.NewServer(g.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/static" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
			httpjson.WriteError(w, r, nil, r.Context().Err())
		case <-time.After(3 * time.Second):
			w.WriteHeader(http.StatusOK)
		}
	})))
	defer srv.Close()
	get := func(path string) (*http.Response, map[string]any) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var doc map[string]any
		_ = json.NewDecoder(res.Body).Decode(&doc)
		return res, doc
	}
	want503 := func(what string, res *http.Response, doc map[string]any) {
		t.Helper()
		if res.StatusCode != http.StatusServiceUnavailable || doc["code"] != "database_unavailable" || res.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %v (Retry-After %q), want 503 database_unavailable with Retry-After", what, res.StatusCode, doc, res.Header.Get("Retry-After"))
		}
	}

	type answer struct {
		res *http.Response
		doc map[string]any
		at  time.Time
	}
	held := make(chan answer, 1)
	go func() {
		res, doc := get("/held")
		held <- answer{res, doc, time.Now()}
	}()
	<-entered
	// A verdict spares a request younger than the probe's patience (a slow
	// database, maybe), and cuts it at the next one.
	g.set(false)
	select {
	case a := <-held:
		t.Fatalf("a request younger than the patience was cut: %d %v", a.res.StatusCode, a.doc)
	case <-time.After(300 * time.Millisecond):
	}
	down := time.Now()
	g.set(false)
	a := <-held
	want503("a request in flight", a.res, a.doc)
	if d := a.at.Sub(down); d > 2*time.Second {
		t.Errorf("answered %v after the probe's verdict, want at once", d)
	}
	res, doc := get("/later")
	want503("a request while the database is down", res, doc)
	<-entered
	if res, _ := get("/static"); res.StatusCode != http.StatusNoContent {
		t.Errorf("a request needing no database: %d", res.StatusCode)
	}

	g.set(true)
	go func() { <-entered }()
	fast := make(chan int, 1)
	go func() {
		res, err := http.Get(srv.URL + "/up")
		if err == nil {
			res.Body.Close()
			fast <- res.StatusCode
		}
	}()
	select {
	case code := <-fast:
		t.Errorf("a request once the database is back answered %d at once, want it served (held by the handler)", code)
	case <-time.After(300 * time.Millisecond):
	}
}

// Only a probe that got no answer closes the gate: a refusal (a stopped
// server, or max_connections reached while the replica's pool still works)
// leaves requests to fail, or succeed, on their own.
func TestOnlyAnUnansweredProbeClosesTheGate(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tooMany := &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}
	for err, want := range map[error]bool{
		nil:                      false,
		refused:                  false,
		tooMany:                  false,
		context.DeadlineExceeded: true,
		fmt.Errorf("ping: %w", context.DeadlineExceeded): true,
	} {
		if got := unanswered(err); got != want {
			t.Errorf("unanswered(%v) = %v, want %v", err, got, want)
		}
	}
}

// /readyz follows the probe's verdict: while the gate refuses the API's
// requests, the replica is not ready, even if a query of its own would be
// answered (the database just came back, the probe not yet).
func TestReadyzFollowsTheGate(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	// A database nothing listens for: a replica whose gate is closed does
	// not ask it.
	pool, err := pgxpool.New(context.Background(), "postgres://relais@127.0.0.1:1/relais?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys, err := keyring.Parse(keyring.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	readyz(engine.New(pool, engine.Options{Keys: keys}), func() bool { return false }, func() bool { return true }, 0, writesStalledAfter).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var doc map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &doc)
	// Its data keys said all the same (SRE QA: left out, as if none).
	if rec.Code != http.StatusServiceUnavailable || doc["status"] != "database unreachable" || doc["data_keys"] != 1.0 {
		t.Errorf("readyz with the gate closed: %d %v, want 503 database unreachable with data_keys 1", rec.Code, doc)
	}
}

// /readyz says a replica whose database takes no writes (a standby the URL
// still names after a failover) is not ready, rather than taking requests
// it would answer 503 each.
func TestReadyzSaysWhenTheDatabaseIsReadOnly(t *testing.T) {
	t.Parallel()
	for readOnly, want := range map[string]int{"on": http.StatusServiceUnavailable, "off": http.StatusOK} {
		pool := poolWith(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = readOnly })
		rec := httptest.NewRecorder()
		readyz(engine.New(pool, engine.Options{}), func() bool { return false }, func() bool { return false }, 0, writesStalledAfter).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var doc map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &doc)
		if rec.Code != want || want != http.StatusOK && doc["status"] != "database read-only" {
			t.Errorf("default_transaction_read_only %s: %d %v, want %d", readOnly, rec.Code, doc, want)
		}
	}
}

// poolWith is a pool on a database of its own, its configuration changed
// by change; it is closed when the test ends.
func poolWith(t *testing.T, change func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	change(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// /readyz says a database that refuses the URL's role (a password rotated
// under a running replica, a role that may not log in) refused the
// credentials, not that it is unreachable: it answered (SRE QA).
func TestReadyzSaysTheCredentialsWereRefused(t *testing.T) {
	t.Parallel()
	pool := poolWith(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.User = "no_such_role" })
	rec := httptest.NewRecorder()
	readyz(engine.New(pool, engine.Options{}), func() bool { return false }, func() bool { return false }, 0, writesStalledAfter).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var doc map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &doc)
	if rec.Code != http.StatusServiceUnavailable || doc["status"] != "database refused the credentials" {
		t.Errorf("a role the server refuses: %d %v, want 503 database refused the credentials", rec.Code, doc)
	}
}

// A ready replica says how many data keys it has: one on its own
// PostgreSQL given none is ready, yet refuses every sensitive and secret
// value (SRE QA: the fleet looked healthy).
func TestReadyzCountsDataKeys(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	keys, err := keyring.Parse(keyring.NewKeySpec("k2") + "," + keyring.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	for want, eng := range map[float64]*engine.Engine{0: engine.New(pool, engine.Options{}), 2: engine.New(pool, engine.Options{Keys: keys})} {
		rec := httptest.NewRecorder()
		readyz(eng, func() bool { return false }, func() bool { return false }, 0, writesStalledAfter).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var doc map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &doc)
		if rec.Code != http.StatusOK || doc["data_keys"] != want {
			t.Errorf("%d %v, want 200 with data_keys %v", rec.Code, doc, want)
		}
	}
}

// While the gate is closed, the worker protocol's settling calls are
// answered unavailable in their protocol, as REST answers 503: connect
// itself answered a call whose context the gate had cancelled with the
// bare context error (Connect's 499 canceled, gRPC's CANCELLED), which a
// client reads as its own cancellation and the settle metric as an
// internal error.
func TestClosedGateAnswersTheWorkerProtocolUnavailable(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	d := Deps{Logger: logger, Config: config.Default(), Engine: engine.New(dbtest.Pool(t), engine.Options{Logger: logger}), Registry: reg}
	gate := newDatabaseGate()
	srv := httptest.NewServer(newHandler(d, longpoll.NewHub(10, reg), stream.New(logger, d.Config, d.Engine, d.Engine.LookupToken, reg), gate, newEndHub(d)))
	t.Cleanup(srv.Close)
	gate.set(false)
	req, _ := http.NewRequest("POST", srv.URL+"/relais.worker.v1.WorkerService/Complete",
		strings.NewReader(`{"occurrenceId": "0195f0c1-0000-7000-8000-000000000000", "workerId": "w1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer rls_whatever")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"unavailable"`) {
		t.Errorf("Complete with the gate closed: %d %s, want 503 unavailable", res.StatusCode, body)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		if f.GetName() != "relais_pull_settle_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["action"] == "complete" && m.GetHistogram().GetSampleCount() > 0 {
				found = true
				if labels["result"] != "unavailable" {
					t.Errorf("the settle metric counted the call as %q, want unavailable", labels["result"])
				}
			}
		}
	}
	if !found {
		t.Error("the settle metric did not count the call")
	}
}

// A probe that cannot open its own connection in time (a server just
// restarted, authenticating every replica's reconnecting pool) asks a
// connection the pool holds before closing the gate: one that answers
// keeps it open. QA saw a replica refuse 2 s of requests its pool served.
func TestProbeAsksThePoolBeforeClosingTheGate(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Pool(t).Config()
	var hang atomic.Bool
	dialer := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if hang.Load() {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return dialer.DialContext(ctx, network, addr)
	}
	cfg.MinConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	hang.Store(true) // new connections hang; the pool's idle one answers
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	verdict := make(chan error, 1)
	go probeDatabase(ctx, pool, prometheus.NewGauge(prometheus.GaugeOpts{Name: "up"}), slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(err error) {
			select {
			case verdict <- err:
			default:
			}
		})
	if err := <-verdict; err != nil {
		t.Errorf("the probe's verdict with the pool answering: %v, want up", err)
	}
}

// A replica running while a newer release migrates the database learns
// it from its readiness probe, and says so once per schema version: it
// warned only at its own start, before the migration (QA, a rolling
// upgrade: the older replica logged nothing while /readyz showed it).
func TestReadyzWarnsOnceOfANewerSchema(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	var logs bytes.Buffer
	eng := engine.New(pool, engine.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h := readyz(eng, func() bool { return false }, func() bool { return false }, 0, writesStalledAfter)
	probe := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code
	}
	if code := probe(); code != http.StatusOK || strings.Contains(logs.String(), "newer") {
		t.Fatalf("on its own schema: %d, log %q; want 200 and no warning", code, logs.String())
	}
	newer := engine.LatestSchemaVersion() + 1
	if _, err := pool.Exec(context.Background(), "insert into relais_schema_migrations (version, name) values ($1, 'from_a_newer_release')", newer); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if code := probe(); code != http.StatusOK {
			t.Errorf("on a newer schema: %d, want 200 (it keeps serving)", code)
		}
	}
	if n := strings.Count(logs.String(), "the database's schema is newer than this relais"); n != 1 || !strings.Contains(logs.String(), fmt.Sprintf("schema_version=%d", newer)) {
		t.Errorf("%d warnings after three probes, want 1 naming schema_version=%d:\n%s", n, newer, logs.String())
	}
	// A replica that started on that newer schema said so at its start:
	// its probe does not say again that it was migrated while it ran (SRE
	// QA: two contradictory warnings).
	logs.Reset()
	started := readyz(eng, func() bool { return false }, func() bool { return false }, newer, writesStalledAfter)
	started.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/readyz", nil))
	if strings.Contains(logs.String(), "newer") {
		t.Errorf("a replica started on the newer schema warned again: %s", logs.String())
	}
}

// /readyz stays ready on a replica lacking a data key another replica
// seals with, or whose first key a rotation retired, and says so
// (data-lifecycle QA: a roll-out's half-updated replicas looked alike).
func TestReadyzNamesTheDataKeysAReplicaLacks(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	keys, err := keyring.Parse(keyring.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(pool, engine.Options{Keys: keys})
	if err := engine.CheckKeys(t.Context(), pool, keys); err != nil {
		t.Fatal(err)
	}
	probe := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		readyz(eng, func() bool { return false }, func() bool { return false }, 0, writesStalledAfter).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var doc map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &doc)
		return rec.Code, doc
	}
	if code, doc := probe(); code != http.StatusOK || doc["data_keys_missing"] != nil || doc["data_key_retired"] != false {
		t.Fatalf("with every key: %d %v, want 200 without data_keys_missing, data_key_retired false", code, doc)
	}
	// A newer replica recorded k2 (live) and a rotation long ago k0.
	if _, err := pool.Exec(t.Context(), "insert into data_keys (id, probe, retired_at) values ('k2', '\\x00', null), ('k0', '\\x00', now())"); err != nil {
		t.Fatal(err)
	}
	code, doc := probe()
	if missing, _ := doc["data_keys_missing"].([]any); code != http.StatusOK || doc["status"] != "ready" || len(missing) != 1 || missing[0] != "k2" {
		t.Errorf("lacking k2: %d %v, want 200 ready with data_keys_missing [k2] (k0 is retired)", code, doc)
	}
	if _, err := pool.Exec(t.Context(), "update data_keys set retired_at = now() where id = 'k1'"); err != nil {
		t.Fatal(err)
	}
	if err := eng.CheckPrimaryKey(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, doc := probe(); code != http.StatusOK || doc["data_key_retired"] != true {
		t.Errorf("its first key retired: %d %v, want 200 with data_key_retired true", code, doc)
	}
}

// A database that answers reads while a commit hangs (here a lock held by
// hand on the instances table) stalls every start: /readyz says so once a
// grouped write has waited past its bound, and is ready again after (SRE
// QA: it stayed ready, its checks only reading).
func TestReadyzSaysWritesStalled(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := t.Context()
	eng := engine.New(pool, engine.Options{})
	if _, _, err := eng.SaveWorking(ctx, "noop", []byte(`{"name":"noop","inputs":{"fields":[]},"outputs":{"fields":[]}}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := eng.Snapshot(ctx, "noop"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := eng.PublishProcess(ctx, "stalls", []byte(`{"inputs":{"fields":[]},"start":"t","nodes":{"t":{"kind":"pull","definition":"noop","revision":1,"inputs":{},"next":"done"},"done":{"kind":"end"}}}`)); err != nil {
		t.Fatal(err)
	}
	const bound = 300 * time.Millisecond
	probe := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		readyz(eng, func() bool { return false }, func() bool { return false }, 0, bound).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var doc map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &doc)
		return rec.Code, doc
	}
	if code, doc := probe(); code != http.StatusOK {
		t.Fatalf("before: %d %v", code, doc)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "lock table instances in access exclusive mode"); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		_, _, err := eng.StartInstance(context.Background(), engine.StartRequest{ProcessKey: "stalls", Inputs: json.RawMessage(`{}`)})
		started <- err
	}()
	time.Sleep(2 * bound)
	code, doc := probe()
	if code != http.StatusServiceUnavailable || doc["status"] != "database writes stalled" || doc["writes_stalled_seconds"] == nil {
		t.Errorf("with a start stalled: %d %v, want 503 database writes stalled", code, doc)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatalf("the stalled start, once the lock is gone: %v", err)
	}
	if code, doc := probe(); code != http.StatusOK {
		t.Errorf("after: %d %v, want ready again", code, doc)
	}
}
