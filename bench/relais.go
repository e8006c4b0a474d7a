package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/apply"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/internal/pgutc"
	"github.com/relais/relais/internal/pguuid"
	"github.com/relais/relais/internal/server"
)

// relais is one Relais replica running in this process on a real HTTP
// listener: the same assembly as relais serve (internal/server on an
// engine with its own pool), so the clients below reach it only through
// the public API, over loopback TCP like an external worker.
type relais struct {
	url   string
	admin string
	api   *client
	db    *database
	pool  *pgxpool.Pool
	stats *sqlStats // nil unless profiling
	claim claimTimes

	replica *server.Replica
	srv     *http.Server
	served  chan struct{}

	probeSeq atomic.Int64
	probes   sync.Map // probe id → *probe
}

// sideRelais and sideClient label the goroutines of a CPU profile
// (go tool pprof -tagfocus side=relais): the replica and its pool on one
// side, the benchmark's producers and workers on the other, since both run
// in this process.
var (
	sideRelais = pprof.Labels("side", "relais")
	sideClient = pprof.Labels("side", "client")
)

// freshRelais starts a replica on a fresh database named name; done stops
// it and drops the database.
func freshRelais(ctx context.Context, b *bench, name string) (r *relais, done func(), err error) {
	db, err := b.pg.freshDatabase(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if r, err = startRelais(ctx, b, db); err != nil {
		db.drop()
		return nil, nil, err
	}
	return r, func() { r.stop(); db.drop() }, nil
}

// freshPullRelais is freshRelais set up for pulling (setupPull): it also
// returns the consumer token.
func freshPullRelais(ctx context.Context, b *bench, name string) (r *relais, token string, done func(), err error) {
	if r, done, err = freshRelais(ctx, b, name); err != nil {
		return nil, "", nil, err
	}
	if token, err = r.setupPull(ctx, b.opts.Examples); err != nil {
		done()
		return nil, "", nil, err
	}
	return r, token, done, nil
}

// startRelais migrates db and starts a replica on it. The admin token is
// the bootstrap token relais serve prints on a first start.
func startRelais(ctx context.Context, b *bench, db *database) (*relais, error) {
	r := &relais{db: db, api: newClient(), served: make(chan struct{})}
	if b.opts.Profile != "" {
		r.stats = newSQLStats()
	}
	var err error
	// Everything the replica starts (pool, LISTEN connection, timers, push
	// runner, HTTP connections) inherits the label.
	pprof.Do(ctx, sideRelais, func(ctx context.Context) { err = r.start(ctx, b) })
	if err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

func (r *relais) start(ctx context.Context, b *bench) error {
	pool, err := r.db.pool(ctx, func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = &sqlTracer{stats: r.stats, claim: &r.claim}
		pguuid.Configure(c) // as relais serve configures its pool
		pgutc.Configure(c)
	})
	if err != nil {
		return err
	}
	r.pool = pool
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := engine.Migrate(ctx, pool, logger); err != nil {
		return err
	}
	cfg := config.Default()
	keys, err := keyring.Parse(keyring.NewKeySpec("bench"))
	if err != nil {
		return err
	}
	eng := engine.New(pool, engine.Options{Logger: logger, Keys: keys, Limits: engine.Limits{
		MaxRetryDelay: cfg.Pull.MaxRetryDelay, DefaultPushTimeout: cfg.Push.DefaultTimeout, MaxPushTimeout: cfg.Push.MaxTimeout}})
	if r.admin, err = eng.Bootstrap(ctx, ""); err != nil {
		return err
	}
	// The replica's background work must outlive the setup context: Stop
	// ends it.
	r.replica = server.Start(context.WithoutCancel(ctx), server.Deps{Logger: logger, Config: cfg, Engine: eng, Registry: prometheus.NewRegistry()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.url = "http://" + ln.Addr().String()
	r.api.base = r.url
	// The server relais serve builds: HTTP/1.1 and h2c, which worker
	// streams need.
	if r.srv, _, err = server.NewHTTPServer(cfg, r.instrument(r.replica.Handler, b.opts.Profile != ""), logger); err != nil {
		return err
	}
	go func() {
		defer close(r.served)
		_ = server.Serve(r.srv, ln)
	}()
	return nil
}

// stop drains long polls, shuts the listener and the replica's background
// work down. The pool is closed when the database is dropped.
func (r *relais) stop() {
	if r.replica != nil {
		r.replica.Drain()
	}
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.srv.Shutdown(ctx); err != nil {
			_ = r.srv.Close()
		}
		cancel()
		<-r.served
	}
	if r.replica != nil {
		r.replica.Stop()
	}
	r.api.http.CloseIdleConnections()
}

// Routes the profile tells apart.
const (
	routeStart    = "start"
	routeFetch    = "fetch"
	routeComplete = "complete"
	routeSettle   = "settle"
	routeStream   = "stream"
	routeOther    = "other"
	// routeBackground is the work no request started: the LISTEN
	// connection, timers, the push runner.
	routeBackground = "background"
)

func routeOf(r *http.Request) string {
	p := r.URL.Path
	switch {
	case r.Method != http.MethodPost:
		return routeOther
	case strings.HasPrefix(p, "/api/v1/processes/") && strings.HasSuffix(p, "/instances"):
		return routeStart
	case p == "/api/v1/pull/fetch-and-lock":
		return routeFetch
	case strings.HasPrefix(p, "/api/v1/pull/occurrences/") && strings.HasSuffix(p, "/complete"):
		return routeComplete
	case p == "/api/v1/pull/settle":
		return routeSettle
	case strings.HasPrefix(p, "/relais.worker.v1."):
		return routeStream
	}
	return routeOther
}

// probeHeader names the probe a start request carries: the latency
// scenario learns the time its transaction committed.
const probeHeader = "X-Bench-Probe"

// probe records when the first transaction of a request committed (the
// tracer sees the COMMIT's answer).
type probe struct{ committed atomic.Int64 }

func (p *probe) committedAt() (time.Time, bool) {
	ns := p.committed.Load()
	return time.Unix(0, ns), ns != 0
}

func (r *relais) newProbe() (string, *probe) {
	id := strconv.FormatInt(r.probeSeq.Add(1), 10)
	p := &probe{}
	r.probes.Store(id, p)
	return id, p
}

// instrument puts the route (and a probe) in each request's context for
// the SQL tracer, times requests when profiling and labels the profile by
// route.
func (r *relais) instrument(next http.Handler, profile bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rt := &requestTrace{route: routeOf(req)}
		if id := req.Header.Get(probeHeader); id != "" {
			if p, ok := r.probes.LoadAndDelete(id); ok {
				rt.probe = p.(*probe)
			}
		}
		ctx := withRequestTrace(req.Context(), rt)
		if !profile {
			next.ServeHTTP(w, req.WithContext(ctx))
			return
		}
		began := time.Now()
		pprof.Do(ctx, pprof.Labels("side", "relais", "route", rt.route), func(ctx context.Context) {
			next.ServeHTTP(w, req.WithContext(ctx))
		})
		r.stats.request(rt.route, time.Since(began))
	})
}

// setupPull applies the add_company_to_crm definition from the examples
// (as relais apply -f does), publishes a one-pull-node process, crm_only,
// and creates a consumer granted the definition; it returns the consumer's
// token.
func (r *relais) setupPull(ctx context.Context, examples string) (string, error) {
	if err := r.applyFile(ctx, filepath.Join(examples, "definitions", "add_company_to_crm.yaml")); err != nil {
		return "", err
	}
	if err := r.publish(ctx, "crm_only", crmProcess); err != nil {
		return "", err
	}
	return r.consumer(ctx, "bench", "add_company_to_crm")
}

// crmProcess is one pull node on add_company_to_crm whose two routes end
// the instance.
var crmProcess = map[string]any{
	"inputs": map[string]any{"fields": []any{map[string]any{"name": "name", "type": "text", "required": true}}},
	"start":  "crm",
	"nodes": map[string]any{
		"crm": map[string]any{
			"kind": "pull", "definition": "add_company_to_crm", "revision": 1,
			"inputs": map[string]any{
				"company_name": map[string]any{"from": "input.name"},
				"country":      map[string]any{"value": "FR"},
				"source":       map[string]any{"value": "web"},
			},
			"routes":   map[string]any{"created": "done", "existing": "known"},
			"on_error": "failed",
		},
		"done":   map[string]any{"kind": "end"},
		"known":  map[string]any{"kind": "end"},
		"failed": map[string]any{"kind": "end", "status": "failed"},
	},
}

// applyFile applies the documents of one examples file through the API.
func (r *relais) applyFile(ctx context.Context, path string) error {
	docs, problems, err := apply.Load(path)
	if err == nil && len(problems) == 0 {
		c := &apply.Client{URL: r.url, Token: r.admin, HTTP: r.api.http}
		problems = c.Apply(ctx, docs, false, func(apply.Result) {})
	}
	if err != nil {
		return fmt.Errorf("apply %s: %w (set --examples to the repository's examples folder)", path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("apply %s: %s", path, problems[0])
	}
	return nil
}

// publish publishes a process version.
func (r *relais) publish(ctx context.Context, key string, doc any) error {
	status, body, err := r.api.do(ctx, "POST", "/api/v1/processes/"+key+"/versions", r.admin, mustJSON(doc))
	if err != nil {
		return err
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return fmt.Errorf("publish %s: %d %s", key, status, body)
	}
	return nil
}

// consumer creates a consumer granted every revision of keys and returns
// its token.
func (r *relais) consumer(ctx context.Context, name string, keys ...string) (string, error) {
	var grants []map[string]any
	for _, k := range keys {
		grants = append(grants, map[string]any{"definition": k, "revisions": "all"})
	}
	var out struct{ Token string }
	err := r.api.expect(ctx, http.StatusCreated, "POST", "/api/v1/consumers", r.admin, mustJSON(map[string]any{"name": name, "grants": grants}), &out)
	return out.Token, err
}

// startInstance starts an instance of process with body and returns its id.
func (r *relais) startInstance(ctx context.Context, process string, body []byte, header ...string) (string, error) {
	var out struct{ ID string }
	err := r.api.expect(ctx, http.StatusCreated, "POST", "/api/v1/processes/"+process+"/instances", r.admin, body, &out, header...)
	return out.ID, err
}

// waiters reads relais_pull_waiters, the long polls the replica holds.
func (r *relais) waiters(ctx context.Context) (int, error) {
	status, body, err := r.api.do(ctx, "GET", "/metrics", "", nil)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d", status)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "relais_pull_waiters "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(n), err
		}
	}
	return 0, errors.New("/metrics has no relais_pull_waiters")
}

// awaitWaiters polls until n long polls wait.
func (r *relais) awaitWaiters(ctx context.Context, n int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := r.waiters(ctx)
		if err != nil {
			return err
		}
		if got == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d long polls waiting after 10s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// fetched is one occurrence as a worker receives it.
type fetched struct {
	ID         string `json:"id"`
	InstanceID string `json:"instance_id"`
}

// pullWorker is one worker of the pull protocol, as an external service
// would write it: fetch-and-lock with a long poll, then complete each
// occurrence in turn.
type pullWorker struct {
	r        *relais
	token    string
	fetch    []byte
	complete []byte
	// received, when set, sees each occurrence and the time its fetch
	// answered, before it is completed.
	received func(o fetched, at time.Time)
	settled  *tally
}

func newPullWorker(r *relais, token, id string, maxTasks int, wait string, settled *tally) *pullWorker {
	return &pullWorker{r: r, token: token, settled: settled,
		fetch: mustJSON(map[string]any{"worker_id": id, "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}},
			"max_tasks": maxTasks, "lock_duration": "PT1M", "wait": wait}),
		complete: mustJSON(map[string]any{"worker_id": id, "outputs": map[string]any{"result": "created", "crm_id": "CRM-0001"}}),
	}
}

// run fetches and completes until ctx ends or stopping is set.
func (w *pullWorker) run(ctx context.Context, stopping *atomic.Bool) error {
	for ctx.Err() == nil && !stopping.Load() {
		var out struct{ Occurrences []fetched }
		status, body, err := w.r.api.do(ctx, "POST", "/api/v1/pull/fetch-and-lock", w.token, w.fetch)
		at := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("fetch-and-lock: %d %s", status, body)
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("fetch-and-lock: %w", err)
		}
		for _, o := range out.Occurrences {
			if w.received != nil {
				w.received(o, at)
			}
			if err := w.r.api.expect(ctx, http.StatusOK, "POST", "/api/v1/pull/occurrences/"+o.ID+"/complete", w.token, w.complete, nil); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			w.settled.add(1)
		}
	}
	return nil
}

// pullWorkers are the workers of a scenario.
type pullWorkers struct {
	wg       sync.WaitGroup
	stopping atomic.Bool
	cancel   context.CancelFunc
	// failed receives the error of a worker that gave up.
	failed chan error
}

// startWorkers starts n workers; configure adjusts each before it starts.
// Their goroutines are labelled as the client side of a CPU profile.
func (r *relais) startWorkers(ctx context.Context, token string, n, maxTasks int, wait string, settled *tally, configure func(*pullWorker)) *pullWorkers {
	ws := &pullWorkers{failed: make(chan error, n)}
	ctx, ws.cancel = context.WithCancel(ctx)
	for i := range n {
		w := newPullWorker(r, token, fmt.Sprint("w", i), maxTasks, wait, settled)
		if configure != nil {
			configure(w)
		}
		ws.wg.Go(func() {
			var err error
			pprof.Do(ctx, sideClient, func(ctx context.Context) { err = w.run(ctx, &ws.stopping) })
			if err != nil {
				ws.failed <- err
			}
		})
	}
	return ws
}

// stop lets the workers finish what they hold: the replica answers their
// long polls at once (Drain) and they fetch no more. Cancelling requests
// in flight instead would make the replica log errors that are no part of
// the measure.
func (ws *pullWorkers) stop(r *relais) {
	ws.stopping.Store(true)
	r.replica.Drain()
	done := make(chan struct{})
	go func() { ws.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		ws.cancel()
		<-done
	}
	ws.cancel()
}

// client calls the HTTP API with keep-alive connections for every worker
// and producer (http.DefaultClient keeps only two idle connections per
// host, and would reconnect for most requests).
type client struct {
	base string
	http *http.Client
}

func newClient() *client {
	return &client{http: &http.Client{Transport: &http.Transport{
		MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}}
}

// do sends a request; body may be nil. header is name, value pairs.
func (c *client) do(ctx context.Context, method, path, token string, body []byte, header ...string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return res.StatusCode, data, err
}

// expect sends a request, fails unless the status is want, and decodes the
// answer into out (when not nil).
func (c *client) expect(ctx context.Context, want int, method, path, token string, body []byte, out any, header ...string) error {
	status, data, err := c.do(ctx, method, path, token, body, header...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
