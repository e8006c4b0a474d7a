//go:build linux

package faultsuite

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/keyring"
)

func TestMain(m *testing.M) {
	if os.Getenv(envVictimURL) != "" {
		os.Exit(runVictim())
	}
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

// The suite's definitions, process and destination: a pull node worked by
// the SDK workers, then a push node calling the destination.
const (
	workDefinition = "fault_work"
	pushDefinition = "fault_push"
	processKey     = "fault_flow"
	destName       = "fault-dest"
	bootstrapToken = "faultsuite-bootstrap-token-0123456789"
	// pushTimeout is the push node's budget; a stalled call fails with
	// deadline_exceeded once it has passed.
	pushTimeout = "PT3S"
	// timerInterval is RELAIS_TIMER_INTERVAL of the replicas.
	timerInterval = time.Second
)

// instancesPerScenario makes 7 scenarios of 2 occurrences per instance
// 5,600 occurrences in all.
const instancesPerScenario = 400

// scenario is one fault under load.
type scenario struct {
	fault string
	slug  string
	// stallEvery > 0 makes every stallEvery-th instance's push call hang.
	stallEvery int
	// injectAt is the share of the load that has ended when inject runs:
	// zero means a quarter, a negative value as soon as the load started.
	injectAt float64
	// predicted are the error codes a failed occurrence may carry after
	// this fault; any other failure is a finding.
	predicted []string
	// prepare runs before the load starts; inject once injectAt of the
	// load has ended. inject returns what it did, for the summary.
	prepare func(s *suite) error
	inject  func(s *suite) (string, error)
}

// TestFaults runs every scenario one after the other on one pair of
// replicas, checks each, and logs the summary table.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite starts PostgreSQL and two relais processes")
	}
	began := time.Now()
	s := setup(t)
	t.Logf("setup in %v", time.Since(began).Round(time.Millisecond))
	// Which failures each fault explains: a push call whose result could
	// not be recorded (its replica died, or PostgreSQL went away under
	// the settlement) is failed outcome_unknown by the timers once its
	// budget and engine.PushGrace (35 s) have passed, and never made again (DESIGN §4); a
	// call that hangs past its budget is deadline_exceeded. Pull tasks
	// must all complete: a worker reports a finished task's outcome
	// through an outage for as long as its lock lasts, and a task whose
	// worker died is offered again when the lock lapses.
	scenarios := []scenario{
		{fault: "none (control)", slug: "control"},
		{fault: "kill -9 replica, restart it", slug: "replica-kill", predicted: []string{"outcome_unknown"}, inject: (*suite).killReplica},
		{fault: "PostgreSQL fast shutdown, restart", slug: "pg-fast", predicted: []string{"outcome_unknown"},
			inject: func(s *suite) (string, error) { return s.stopPostgres("fast") }},
		{fault: "PostgreSQL immediate shutdown (crash recovery)", slug: "pg-immediate", predicted: []string{"outcome_unknown"},
			inject: func(s *suite) (string, error) { return s.stopPostgres("immediate") }},
		{fault: "kill -9 postmaster (supervisor restarts it)", slug: "postmaster-kill", predicted: []string{"outcome_unknown"}, inject: (*suite).killPostmaster},
		{fault: "kill -9 worker mid-task", slug: "worker-kill", injectAt: -1, prepare: (*suite).startVictim, inject: (*suite).killVictim},
		{fault: "push destination stalls past the timeout", slug: "push-stall", stallEvery: 10, predicted: []string{"deadline_exceeded"}},
	}
	var rows []row
	for _, sc := range scenarios {
		r := s.run(sc)
		rows = append(rows, r)
		if len(r.problems) > 0 {
			t.Errorf("%s: %s", sc.fault, strings.Join(r.problems, "; "))
		}
	}
	t.Logf("fault suite: %d scenarios in %v\n%s", len(rows), time.Since(began).Round(time.Second), table(rows))
	t.Run("checks catch what they look for", func(t *testing.T) { s.tamper(t, scenarios[0], rows[0].ids) })
}

// tamper shows that the checks are not blind: in a transaction that is
// rolled back (the replicas never see it), it gives the control scenario
// a second completed attempt, an occurrence reserved past its expiry with
// nothing left to retry, a completion acknowledged to a worker the
// database does not name and a second destination call, and expects check
// to count each, and checkMetrics to see the gauges disagree with it.
func (s *suite) tamper(t *testing.T, sc scenario, ids []string) {
	if len(ids) < 4 {
		t.Skip("the control scenario did not run")
	}
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	occurrence := func(instance, node string) string {
		var id string
		if err := tx.QueryRow(ctx, "select id::text from occurrences where instance_id = $1 and node = $2", instance, node).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	twice, stuck, ghost, called := occurrence(ids[0], "work"), occurrence(ids[1], "work"), occurrence(ids[2], "work"), occurrence(ids[3], "score")
	for _, q := range []struct {
		sql string
		arg string
	}{
		{`insert into attempts (occurrence_id, number, consumer_id, worker_id, reserved_at, lock_expires_at, ended_at, outcome)
		  select occurrence_id, number + 1, consumer_id, 'another-worker', now(), now() + interval '1 minute', now(), 'completed'
		  from attempts where occurrence_id = $1 and outcome = 'completed'`, twice},
		{`update occurrences set status = 'reserved', lock_expires_at = now() - interval '1 hour', attempts = max_attempts + attempt_credit
		  where id = $1`, stuck},
	} {
		if tag, err := tx.Exec(ctx, q.sql, q.arg); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("%s: %v (%v)", q.sql, err, tag)
		}
	}
	s.acks.add(ghost, "ghost-worker")
	s.dest.mu.Lock()
	s.dest.calls[called]++
	s.dest.mu.Unlock()
	defer func() {
		s.acks.mu.Lock()
		delete(s.acks.acks[ghost], "ghost-worker")
		s.acks.mu.Unlock()
		s.dest.mu.Lock()
		s.dest.calls[called]--
		s.dest.mu.Unlock()
	}()

	r := row{failed: map[string]int{}}
	s.check(ctx, tx, sc, ids, &r)
	all := strings.Join(r.problems, "\n")
	for _, want := range []string{
		twice + " has 2 completed attempts",
		stuck + " of an ended instance is still reserved",
		"1 reserved occurrences kept a lock",
		ghost + ": completions acknowledged to 2 workers",
		ghost + ": the completion acknowledged to ghost-worker is not what the database holds",
		called + ": the destination was called 2 times",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("check did not report %q; it reported:\n%s", want, all)
		}
	}
	// The gauges count the database the replicas see: against the
	// tampered one (a completed occurrence now reserved) they disagree.
	if err := s.checkMetrics(ctx, tx, time.Now()); err == nil || !strings.Contains(err.Error(), `status="reserved"} = 0, the database counts 1`) {
		t.Errorf("checkMetrics against a database that moved on: %v; want the reserved count to differ", err)
	}
	if r.twice != 3 || r.lost != 2 {
		t.Errorf("check counted %d settled twice and %d lost; want 3 (two completions, two acknowledgements, two calls) and 2 (a stuck occurrence, a lost acknowledgement)", r.twice, r.lost)
	}
}

// suite is what the scenarios share: two replicas on one cluster, SDK
// workers on each, the destination, and a pool of the test's own.
type suite struct {
	t        *testing.T
	dir      string
	a, b     *replica
	pgData   string
	pool     *pgxpool.Pool
	consumer string
	dest     *destination
	acks     *ackBook
	gate     *gate
	workers  []*sdkWorker
	logger   *slog.Logger
	// victim is the worker process of the worker-kill scenario.
	victim   *victimProcess
	victimID string
}

func setup(t *testing.T) *suite {
	t.Helper()
	// Under /tmp and traversable: the cluster runs as an unprivileged user
	// when the suite runs as root.
	dir, err := os.MkdirTemp("/tmp", "relais-faultsuite-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	s := &suite{t: t, dir: dir, acks: newAckBook(), gate: newGate(), victimID: "fault-victim",
		logger: slog.New(slog.NewTextHandler(&lockedFile{path: filepath.Join(dir, "workers.log")}, nil))}
	bin := buildRelais(t, dir)

	keys := keyring.NewKeySpec("fault")
	common := []string{"RELAIS_BOOTSTRAP_TOKEN=" + bootstrapToken, "RELAIS_DATA_KEYS=" + keys,
		"RELAIS_TIMER_INTERVAL=PT1S", "RELAIS_SHUTDOWN_TIMEOUT=PT10S", "RELAIS_LOG_FORMAT=text"}
	// Replica a runs the embedded cluster (and its supervisor); b uses it
	// by URL, as a second replica on an external database would.
	dataDir := filepath.Join(dir, "a-data")
	s.a = newReplica("replica a", bin, filepath.Join(dir, "a.log"), freePort(t), append(common, "RELAIS_DATA_DIR="+dataDir)...)
	t.Cleanup(func() { s.a.stop(syscall.SIGTERM, 60*time.Second) })
	ctx := context.Background()
	if err := s.a.start(ctx); err != nil {
		t.Fatal(err)
	}
	clusterDir := filepath.Join(dataDir, "pg")
	s.pgData = filepath.Join(clusterDir, "data")
	url, err := embeddedpg.RunningURL(clusterDir, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	s.b = newReplica("replica b", bin, filepath.Join(dir, "b.log"), freePort(t), append(common, "RELAIS_DATABASE_URL="+url)...)
	t.Cleanup(func() { s.b.stop(syscall.SIGTERM, 60*time.Second) })
	if err := s.b.start(ctx); err != nil {
		t.Fatal(err)
	}
	if s.pool, err = pgxpool.New(ctx, url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.pool.Close)

	s.dest = newDestination()
	t.Cleanup(s.dest.close)
	if err := s.define(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*replica{s.a, s.b} {
		id := "fault-worker-" + strings.TrimPrefix(r.name, "replica ")
		w, err := startSDKWorker(r.base, s.consumer, id, s.gate, s.acks, s.logger)
		if err != nil {
			t.Fatal(err)
		}
		s.workers = append(s.workers, w)
		t.Cleanup(func() {
			if err := w.stop(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() {
		s.stopVictim()
		s.gate.open()
	})
	return s
}

// define creates the definitions, the destination, the process and the
// workers' consumer through replica a's API.
func (s *suite) define(ctx context.Context) error {
	base := s.a.base + "/api/v1"
	field := func(name, typ string) map[string]any {
		return map[string]any{"name": name, "type": typ, "required": true}
	}
	inputs := map[string]any{"fields": []any{field("n", "integer"), field("stall", "boolean")}}
	for key, outputs := range map[string]map[string]any{
		workDefinition: {"fields": []any{field("echo", "integer")}},
		pushDefinition: {"fields": []any{map[string]any{"name": "score", "type": "integer", "required": true, "minimum": 0, "maximum": 100}}},
	} {
		if err := call(ctx, "PUT", base+"/definitions/"+key+"/working", bootstrapToken,
			map[string]any{"name": key, "inputs": inputs, "outputs": outputs}, 201, nil); err != nil {
			return err
		}
		if err := call(ctx, "POST", base+"/definitions/"+key+"/revisions", bootstrapToken, nil, 201, nil); err != nil {
			return err
		}
	}
	if err := call(ctx, "PUT", base+"/destinations/"+destName, bootstrapToken,
		map[string]any{"url": s.dest.srv.URL + "/score", "max_timeout": "PT5S"}, 201, nil); err != nil {
		return err
	}
	from := func(path string) map[string]any { return map[string]any{"from": path} }
	doc := map[string]any{
		"inputs": inputs,
		"start":  "work",
		"nodes": map[string]any{
			"work": map[string]any{"kind": "pull", "definition": workDefinition, "revision": 1,
				"inputs": map[string]any{"n": from("input.n"), "stall": from("input.stall")},
				"policy": map[string]any{"max_attempts": 3, "retry_delay": "PT1S"}, "next": "score", "on_error": "failed"},
			"score": map[string]any{"kind": "push", "definition": pushDefinition, "revision": 1, "destination": destName, "timeout": pushTimeout,
				"inputs": map[string]any{"n": from("nodes.work.output.echo"), "stall": from("input.stall")}, "next": "done", "on_error": "failed"},
			"done":   map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	}
	if err := call(ctx, "POST", base+"/processes/"+processKey+"/versions", bootstrapToken, doc, 201, nil); err != nil {
		return err
	}
	var consumer struct {
		Token string `json:"token"`
	}
	if err := call(ctx, "POST", base+"/consumers", bootstrapToken, map[string]any{"name": "fault-workers",
		"grants": []any{map[string]any{"definition": workDefinition, "revisions": "all"}}}, 201, &consumer); err != nil {
		return err
	}
	s.consumer = consumer.Token
	return nil
}

// startInstances starts the scenario's instances through replica a, in
// batches, and returns their ids in order (index i is business key
// slug-i).
func (s *suite) startInstances(ctx context.Context, sc scenario) ([]string, error) {
	const batch = 100
	ids := make([]string, 0, instancesPerScenario)
	for from := 0; from < instancesPerScenario; from += batch {
		var items []any
		for i := from; i < min(from+batch, instancesPerScenario); i++ {
			bk := fmt.Sprintf("%s-%04d", sc.slug, i)
			stall := sc.stallEvery > 0 && i%sc.stallEvery == 0
			items = append(items, map[string]any{"business_key": bk, "inputs": map[string]any{"n": i, "stall": stall}})
		}
		var out struct {
			Items []struct {
				Status   int `json:"status"`
				Instance struct {
					ID string `json:"id"`
				} `json:"instance"`
				Problem map[string]any `json:"problem"`
			} `json:"items"`
		}
		if err := call(ctx, "POST", s.a.base+"/api/v1/processes/"+processKey+"/instances/batch", bootstrapToken,
			map[string]any{"items": items}, 200, &out); err != nil {
			return nil, err
		}
		for _, it := range out.Items {
			if it.Status != 201 {
				return nil, fmt.Errorf("start: %d %v", it.Status, it.Problem)
			}
			ids = append(ids, it.Instance.ID)
		}
	}
	return ids, nil
}

// ended counts the instances among ids that left running; while the
// database cannot be reached it answers the error.
func (s *suite) ended(ctx context.Context, ids []string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, "select count(*) from instances where id = any($1::uuid[]) and status <> 'running'", ids).Scan(&n)
	return n, err
}

// waitEnded waits until at least want of ids ended, polling the database
// (and riding out its outages) until within passes; it returns how many
// ended.
func (s *suite) waitEnded(ctx context.Context, ids []string, want int, within time.Duration) int {
	deadline := time.Now().Add(within)
	n := 0
	for {
		if got, err := s.ended(ctx, ids); err == nil {
			n = got
		}
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDatabase waits until the test's pool reaches PostgreSQL again.
func (s *suite) waitDatabase(within time.Duration) (time.Duration, error) {
	began := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.pool.Exec(ctx, "select 1")
		cancel()
		if err == nil {
			return time.Since(began), nil
		}
		if time.Since(began) > within {
			return 0, fmt.Errorf("PostgreSQL unreachable for %v: %w", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killReplica kills replica b with SIGKILL while it has push calls in
// flight (when it gets some within 10 s), then starts it again on its
// port.
func (s *suite) killReplica() (string, error) {
	ctx := context.Background()
	pid := s.b.pid()
	inFlight := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		_ = s.pool.QueryRow(ctx, "select count(*) from occurrences where status = 'reserved' and mode = 'push' and worker_id like $1",
			fmt.Sprintf("relais-push@%%-%d", pid)).Scan(&inFlight)
		if inFlight > 0 {
			break
		}
	}
	s.b.kill9()
	began := time.Now()
	if err := s.b.start(ctx); err != nil {
		return "", err
	}
	calls := "calls"
	if inFlight == 1 {
		calls = "call"
	}
	return fmt.Sprintf("killed with %d push %s in flight, back in %v", inFlight, calls, time.Since(began).Round(100*time.Millisecond)), nil
}

// stopPostgres shuts the cluster down with pg_ctl in mode (fast or
// immediate); replica a's supervisor starts it again.
func (s *suite) stopPostgres(mode string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	if out, err := pgCtl(ctx, s.pgData, "stop", "-m", mode, "-w", "-t", "60"); err != nil {
		return "", fmt.Errorf("pg_ctl stop -m %s: %v: %s", mode, err, out)
	}
	stopped := time.Since(began)
	down, err := s.waitDatabase(time.Minute)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("pg_ctl stop -m %s took %v, answering again %v later", mode, stopped.Round(10*time.Millisecond), down.Round(10*time.Millisecond)), nil
}

// killPostmaster kills the postmaster with SIGKILL; replica a's supervisor
// ends its orphaned backends and starts it again (crash recovery).
func (s *suite) killPostmaster() (string, error) {
	pid, err := postmasterPID(s.pgData)
	if err != nil {
		return "", err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return "", err
	}
	began := time.Now()
	// The backends may still answer a moment before they notice.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if p, err := postmasterPID(s.pgData); err == nil && p != pid {
			break
		}
	}
	if _, err := s.waitDatabase(time.Minute); err != nil {
		return "", err
	}
	return fmt.Sprintf("postmaster %d killed, answering again %v later", pid, time.Since(began).Round(10*time.Millisecond)), nil
}

// victimProcess is the worker process the worker-kill scenario kills.
type victimProcess struct {
	pid  int
	kill func() error
	done chan struct{}
}

// startVictim starts the victim worker on replica a before the load and
// shuts the gate of the suite's own workers, so that however long the
// victim takes to start, the load still waits for it: the others hold at
// most their concurrency (16 tasks) meanwhile.
func (s *suite) startVictim() error {
	cmd, done, err := startVictim(s.a.base, s.consumer, s.victimID, filepath.Join(s.dir, "victim.log"))
	if err != nil {
		return err
	}
	s.gate.shut()
	s.victim = &victimProcess{pid: cmd.Process.Pid, kill: cmd.Process.Kill, done: done}
	return nil
}

// victimHolds is how many tasks the victim must hold mid-handler when it
// is killed: its Concurrency, every slot busy.
const victimHolds = 4

// killVictim waits until the victim holds victimHolds tasks (its handlers
// never return), kills it with SIGKILL and opens the gate of the others.
func (s *suite) killVictim() (string, error) {
	defer s.gate.open()
	ctx := context.Background()
	held := 0
	deadline := time.Now().Add(30 * time.Second)
	for held < victimHolds {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the victim worker holds %d tasks after 30 s, want %d; its log:\n%s", held, victimHolds, tail(filepath.Join(s.dir, "victim.log"), 20))
		}
		time.Sleep(20 * time.Millisecond)
		_ = s.pool.QueryRow(ctx, "select count(*) from attempts where worker_id = $1 and ended_at is null", s.victimID).Scan(&held)
	}
	s.stopVictim()
	return fmt.Sprintf("worker process killed holding %d tasks mid-handler (lock %v)", held, victimLock), nil
}

// stopVictim kills the victim if it runs and waits for its exit.
func (s *suite) stopVictim() {
	if s.victim == nil {
		return
	}
	_ = s.victim.kill()
	<-s.victim.done
	s.victim = nil
}
