package server

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/pgfault"
)

// The replica's own metrics (the surfaces register theirs: pull, push).
// Label values are operator-defined names (definition keys, destination
// names) or fixed vocabularies (statuses, results), never ids, worker ids,
// business keys or payload values: cardinality stays bounded and nothing
// protected reaches /metrics (DESIGN §5).

// occurrenceStatuses are the statuses relais_occurrences reports for every
// definition it has seen, zero included, so that a series falls to 0
// rather than vanishing when its last occurrence moves on.
var occurrenceStatuses = []string{engine.StatusAvailable, engine.StatusReserved, engine.StatusDeferred,
	engine.StatusCompleted, engine.StatusFailed, engine.StatusCancelled}

// countsScrapeTimeout bounds how long a scrape waits for the first count of
// a replica; later scrapes answer at once from the cache.
const countsScrapeTimeout = 5 * time.Second

// occurrenceCounts exports the engine's cached counts by definition and
// status (engine.OccurrenceCounts, which the console's counts share): a
// scrape never runs the counting query itself, it starts a background
// refresh when the counts are older than engine.OccurrenceCountsTTL.
type occurrenceCounts struct {
	eng    countsSource
	logger *slog.Logger
	// down says the database probe gets no answer: a scrape then skips
	// its reads of the database, which would hold it until its timeout
	// (Prometheus would drop the whole target, relais_database_up with
	// it, in the very outage that gauge is there to report).
	down     func() bool
	byState  *prometheus.Desc
	at       *prometheus.Desc
	held     *prometheus.Desc
	waiting  *prometheus.Desc
	deferred *prometheus.Desc
	ended    *prometheus.Desc
	retrying *prometheus.Desc
	workers  *prometheus.Desc
	untaken  *prometheus.Desc
	lapsed   *prometheus.Desc
}

// workerProtocols are the protocols relais_workers_live reports for every
// definition, zero included.
var workerProtocols = []string{engine.ProtocolStream, engine.ProtocolLongPoll, engine.ProtocolCamunda}

// countsSource is what occurrenceCounts reads of the engine.
type countsSource interface {
	OccurrenceCounts(ctx context.Context) ([]engine.OccurrenceCount, time.Time, error)
	DefinitionKeys(ctx context.Context) ([]string, error)
	LiveWorkersByDefinition(ctx context.Context) (map[string]map[string]int64, error)
	RevisionsWithoutTaker(ctx context.Context) (map[string][]int, error)
	LapsesByDefinition(ctx context.Context) (map[string]int64, error)
	CachedHealth(ctx context.Context) (engine.Health, time.Time, error)
	Now() time.Time
}

func newOccurrenceCounts(eng countsSource, logger *slog.Logger, down func() bool) *occurrenceCounts {
	return &occurrenceCounts{eng: eng, logger: logger, down: down,
		byState: prometheus.NewDesc("relais_occurrences",
			"Occurrences by definition and status, as counted at relais_occurrences_counted_timestamp_seconds (a reserved pull occurrence whose lock lapsed counts as available).",
			[]string{"definition", "status"}, nil),
		at: prometheus.NewDesc("relais_occurrences_counted_timestamp_seconds",
			"When the counting behind relais_occurrences began (Unix time): the counts show the database as of then or later; they are refreshed in the background when older than 5 s.",
			nil, nil),
		held: prometheus.NewDesc("relais_instances_held",
			"Instances held for an operator (incidents: retry, abandon or stop them), by the definition of the node they are held at; from the health snapshot, refreshed in the background when older than 5 s. Every replica counts the whole database.",
			[]string{"definition"}, nil),
		waiting: prometheus.NewDesc("relais_oldest_claimable_age_seconds",
			"How long the oldest claimable occurrence of a definition has waited (0: none waits), for a worker (pull) or for Relais's call (push), as the console's health page shows its queue lag; from the health snapshot, refreshed in the background when older than 5 s.",
			[]string{"definition"}, nil),
		deferred: prometheus.NewDesc("relais_oldest_deferred_age_seconds",
			"How long the oldest deferred occurrence of a definition (waiting to be settled by id: an approval, a partner's callback) has been deferred (0: none is); its node's policy deadline, if it has one, still applies. From the health snapshot, refreshed in the background when older than 5 s.",
			[]string{"definition"}, nil),
		retrying: prometheus.NewDesc("relais_occurrences_waiting_retry",
			"Occurrences of a definition waiting out a retry delay (an attempt failed, attempts are left): failures under way that neither hold nor fail anything yet, as the console's health page counts them; from the health snapshot, refreshed in the background when older than 5 s. Every replica counts the whole database.",
			[]string{"definition"}, nil),
		ended: prometheus.NewDesc("relais_occurrences_ended_last_hour",
			"Occurrences of a definition that ended completed or failed in the last hour (a failed attempt with attempts left is not counted: relais_occurrences_waiting_retry counts it while it waits), as the console's health page charts them; from the health snapshot, refreshed in the background when older than 5 s. Every replica counts the whole database.",
			[]string{"definition", "status"}, nil),
		workers: prometheus.NewDesc("relais_workers_live",
			"Live workers by subscribed definition and protocol, on every replica (streams connected, pollers seen within their wait and three heartbeats), as GET /api/v1/workers lists them; read from the database at each scrape.",
			[]string{"definition", "protocol"}, nil),
		untaken: prometheus.NewDesc("relais_revisions_untaken",
			"Revisions of a definition whose pull occurrences wait while no live worker takes them, though workers may serve its other revisions (a process version pinned a revision its workers do not subscribe to yet), as the console's health page names them; read from the database at each scrape.",
			[]string{"definition"}, nil),
		lapsed: prometheus.NewDesc("relais_locks_lapsed_last_hour",
			"Locks of a definition's pull occurrences that lapsed in the last hour (expired unsettled, or held by a worker stream that ended), whether or not a claim took the task back since: workers dying, hanging or losing Relais while they hold tasks, as the console's Workers page lists them by worker id; read from the database at each scrape.",
			[]string{"definition"}, nil),
	}
}

func (c *occurrenceCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byState
	ch <- c.at
	ch <- c.held
	ch <- c.waiting
	ch <- c.deferred
	ch <- c.ended
	ch <- c.retrying
	ch <- c.workers
	ch <- c.untaken
	ch <- c.lapsed
}

func (c *occurrenceCounts) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countsScrapeTimeout)
	defer cancel()
	rows, at, err := c.eng.OccurrenceCounts(ctx)
	if err != nil {
		// Nothing counted yet (the database is down since this replica
		// started): no sample is better than a made-up zero.
		c.logger.Debug("metrics: occurrence counts unavailable", "err", err)
		return
	}
	byDefinition := map[string]map[string]int64{}
	for _, r := range rows {
		if byDefinition[r.Definition] == nil {
			byDefinition[r.Definition] = map[string]int64{}
		}
		byDefinition[r.Definition][r.Status] = r.Count
	}
	// A definition without occurrences (new, or its history deleted by
	// retention) has its series too, at zero: an alert on a status must
	// not wait for a first occurrence to have something to watch.
	down := c.down()
	if down {
		c.logger.Debug("metrics: the database does not answer: definitions without occurrences and live workers left out")
	} else if keys, err := c.eng.DefinitionKeys(ctx); err != nil {
		c.logger.Debug("metrics: definition keys unavailable", "err", err)
	} else {
		for _, k := range keys {
			if byDefinition[k] == nil {
				byDefinition[k] = map[string]int64{}
			}
		}
	}
	for def, byStatus := range byDefinition {
		for _, s := range occurrenceStatuses {
			ch <- prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(byStatus[s]), def, s)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.at, prometheus.GaugeValue, float64(at.UnixNano())/1e9)
	// Every definition and protocol, zero included: an alert on a
	// definition nobody serves compares with 0, no absent() needed.
	if down {
		// Workers cannot be told live from a database that does not
		// answer: no sample rather than a made-up zero.
	} else if live, err := c.eng.LiveWorkersByDefinition(ctx); err != nil {
		c.logger.Debug("metrics: live workers unavailable", "err", err)
	} else {
		for def := range byDefinition {
			for _, p := range workerProtocols {
				ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(live[def][p]), def, p)
			}
		}
		if untaken, err := c.eng.RevisionsWithoutTaker(ctx); err != nil {
			c.logger.Debug("metrics: revisions without taker unavailable", "err", err)
		} else {
			for def := range byDefinition {
				ch <- prometheus.MustNewConstMetric(c.untaken, prometheus.GaugeValue, float64(len(untaken[def])), def)
			}
		}
		if lapsed, err := c.eng.LapsesByDefinition(ctx); err != nil {
			c.logger.Debug("metrics: lapsed locks unavailable", "err", err)
		} else {
			for def := range byDefinition {
				ch <- prometheus.MustNewConstMetric(c.lapsed, prometheus.GaugeValue, float64(lapsed[def]), def)
			}
		}
	}
	health, asOf, err := c.eng.CachedHealth(ctx)
	if err != nil {
		c.logger.Debug("metrics: held instances unavailable", "err", err)
		return
	}
	// Every definition counted above, zero included, so that a series
	// falls to 0 when its last incident is resolved rather than vanish.
	for def := range byDefinition {
		var held, completed, failed, retrying int64
		var waited, deferred time.Duration
		if d := health.Definitions[def]; d != nil {
			held, retrying = d.Held, d.Retrying
			for _, b := range d.Buckets {
				completed += b.Completed
				failed += b.Failed
			}
			if d.ClaimableSince != nil {
				// Its age when the snapshot was read, as every figure
				// from it: brought forward to now, an occurrence claimed
				// since would read as waiting longer at each scrape until
				// the next snapshot, an alert on an empty queue.
				waited = max(asOf.Sub(*d.ClaimableSince), 0)
			}
			if d.DeferredSince != nil {
				deferred = max(asOf.Sub(*d.DeferredSince), 0)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(held), def)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, waited.Seconds(), def)
		ch <- prometheus.MustNewConstMetric(c.deferred, prometheus.GaugeValue, deferred.Seconds(), def)
		ch <- prometheus.MustNewConstMetric(c.ended, prometheus.GaugeValue, float64(completed), def, "completed")
		ch <- prometheus.MustNewConstMetric(c.ended, prometheus.GaugeValue, float64(failed), def, "failed")
		ch <- prometheus.MustNewConstMetric(c.retrying, prometheus.GaugeValue, float64(retrying), def)
	}
}

// groupCommits exports what the engine's group commits did (see
// engine.GroupCommitStats): writes ÷ groups is how many requests share a
// transaction, the figure that says whether group commit is doing its job.
type groupCommits struct {
	eng                     *engine.Engine
	groups, writes, gathers *prometheus.Desc
}

func newGroupCommits(eng *engine.Engine) *groupCommits {
	return &groupCommits{eng: eng,
		groups: prometheus.NewDesc("relais_group_commit_groups_total",
			"Groups this replica's group commit ran, by lane: starts, or settlements (settlements and claims); one transaction each, more when a group is run again (a refused write: with a savepoint per write; a rolled-back group: write by write).",
			[]string{"lane"}, nil),
		writes: prometheus.NewDesc("relais_group_commit_writes_total",
			"Single writes (a start, a settlement, a claim) this replica's group commit ran, by lane; divided by relais_group_commit_groups_total, the writes a transaction held.",
			[]string{"lane"}, nil),
		gathers: prometheus.NewDesc("relais_group_commit_gathers_total",
			"Waits of a free group-commit lane for the writers its last group answered, by lane and how they ended: filled (as many writes came as that group held), lapsed (the wait, at most as long as that group took and 2 ms, ran out; the lane ran what came) or idle (nothing came: the load paused or ended). A lane waits only after a group of two writes or more.",
			[]string{"lane", "result"}, nil),
	}
}

func (c *groupCommits) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.groups
	ch <- c.writes
	ch <- c.gathers
}

func (c *groupCommits) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.eng.GroupCommits() {
		ch <- prometheus.MustNewConstMetric(c.groups, prometheus.CounterValue, float64(s.Groups), s.Lane)
		ch <- prometheus.MustNewConstMetric(c.writes, prometheus.CounterValue, float64(s.Writes), s.Lane)
		ch <- prometheus.MustNewConstMetric(c.gathers, prometheus.CounterValue, float64(s.GathersFilled), s.Lane, "filled")
		ch <- prometheus.MustNewConstMetric(c.gathers, prometheus.CounterValue, float64(s.GathersLapsed), s.Lane, "lapsed")
		ch <- prometheus.MustNewConstMetric(c.gathers, prometheus.CounterValue, float64(s.GathersIdle), s.Lane, "idle")
	}
}

// instanceCounts exports the instances this replica's transactions
// started and ended (see engine.InstanceCounts), counted once committed.
type instanceCounts struct {
	eng            *engine.Engine
	started, ended *prometheus.Desc
}

func newInstanceCounts(eng *engine.Engine) *instanceCounts {
	return &instanceCounts{eng: eng,
		started: prometheus.NewDesc("relais_instances_started_total",
			"Instances this replica started, by process (a replayed Idempotency-Key and a refused batch item are not counted); a process's series appears at its first start or end on this replica. Each replica counts its own: sum them.",
			[]string{"process"}, nil),
		ended: prometheus.NewDesc("relais_instances_ended_total",
			"Instances whose end this replica committed, by process and status: completed, failed (an end node's failure, a failure without an error path, a deadline, an operator's abandon) or cancelled (an operator's stop). Each replica counts its own: sum them.",
			[]string{"process", "status"}, nil),
	}
}

func (c *instanceCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.started
	ch <- c.ended
}

func (c *instanceCounts) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.eng.InstanceCounts() {
		if n.Event == engine.InstanceStarted {
			ch <- prometheus.MustNewConstMetric(c.started, prometheus.CounterValue, float64(n.Count), n.Process)
		} else {
			ch <- prometheus.MustNewConstMetric(c.ended, prometheus.CounterValue, float64(n.Count), n.Process, n.Event)
		}
	}
}

// timerMetrics are what the replica's timer passes report.
type timerMetrics struct {
	lag    prometheus.Gauge
	took   prometheus.Histogram
	failed *prometheus.CounterVec
}

func newTimerMetrics(reg prometheus.Registerer) *timerMetrics {
	m := &timerMetrics{
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "relais_timer_lag_seconds",
			Help: "How overdue the longest-overdue deadline or expired lock was when this replica's latest timer pass found it (0: nothing was due)."}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "relais_timer_pass_duration_seconds",
			Help:    "How long one timer pass of this replica took (finding what is due and settling it).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}),
	}
	m.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "relais_timer_failures_total",
		Help: "Occurrences this replica's timers failed, by code: deadline_exceeded, attempts_exhausted (the last attempt's lock expired), outcome_unknown (a push call whose replica recorded no answer: it stopped, or could not reach the database; ask the destination whether it took effect)."},
		[]string{"code"})
	for _, code := range engine.TimerCodes {
		m.failed.WithLabelValues(code) // each series from the start, at 0
	}
	reg.MustRegister(m.lag, m.took, m.failed)
	return m
}

func (m *timerMetrics) observe(p engine.TimerPass) {
	m.lag.Set(p.Lag.Seconds())
	m.took.Observe(p.Took.Seconds())
	for code, n := range p.Failed {
		m.failed.WithLabelValues(code).Add(float64(n))
	}
}

// retentionMetrics count what the retention passes (DESIGN §13) deleted
// and how they went.
type retentionMetrics struct {
	deleted prometheus.Counter
	passes  *prometheus.CounterVec
	took    prometheus.Histogram
	applied prometheus.Gauge
}

// newRetentionMetrics registers the retention metrics of a replica
// configured with retention (zero: forever).
func newRetentionMetrics(reg prometheus.Registerer, retention time.Duration) *retentionMetrics {
	m := &retentionMetrics{
		applied: prometheus.NewGauge(prometheus.GaugeOpts{Name: "relais_retention_applied_seconds",
			Help: "The retention this replica's last pass applied, in seconds (+Inf: nothing is deleted): RELAIS_RETENTION, or a longer setting another replica noted within the last day, which holds this one's deletions back."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "relais_retention_deleted_instances_total",
			Help: "Ended instances this replica's retention passes deleted, with their occurrences and attempts."}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "relais_retention_passes_total",
			Help: "Retention passes of this replica by result: ok, or failed (the error is logged; the next pass goes on)."}, []string{"result"}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "relais_retention_pass_duration_seconds",
			Help:    "How long one retention pass of this replica took (every batch of it).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
	}
	// Both results exist from the start, so a rate of failures is 0, not
	// absent, until one happens.
	m.passes.WithLabelValues("ok")
	m.passes.WithLabelValues("failed")
	m.applied.Set(retentionSeconds(retention))
	reg.MustRegister(m.deleted, m.passes, m.took, m.applied)
	return m
}

// retentionSeconds is a retention as the gauge reads it: +Inf for forever.
func retentionSeconds(d time.Duration) float64 {
	if d <= 0 {
		return math.Inf(1)
	}
	return d.Seconds()
}

// count records one batch's deletions as it commits.
func (m *retentionMetrics) count(deleted int64) { m.deleted.Add(float64(deleted)) }

// observe records a pass; its deletions were counted batch by batch.
func (m *retentionMetrics) observe(p engine.RetentionPass) {
	result := "ok"
	if p.Failed {
		result = "failed"
	}
	m.passes.WithLabelValues(result).Inc()
	m.took.Observe(p.Took.Seconds())
	if !p.Failed {
		m.applied.Set(retentionSeconds(p.Applied))
	}
}

// databaseProbeInterval is how often a replica checks that PostgreSQL
// answers; databaseProbeTimeout bounds one check.
const (
	databaseProbeInterval = 2 * time.Second
	databaseProbeTimeout  = 2 * time.Second
)

// probeDatabase keeps relais_database_up current until ctx ends: 1 while
// PostgreSQL answers a ping, 0 from the first ping it does not answer. It
// pings on a connection of its own rather than through the pool, so a pool
// busy with long requests is not mistaken for a lost database, and a lost
// one is seen even while no request runs.
func probeDatabase(ctx context.Context, pool *pgxpool.Pool, up prometheus.Gauge, logger *slog.Logger, observe func(err error)) {
	cfg := pool.Config().ConnConfig.Copy()
	var conn *pgx.Conn
	closeConn := func() {
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
			conn = nil
		}
	}
	defer closeConn()
	// opening is set while ping could not open its connection.
	opening := false
	// ping pings on the probe's connection, opening one if it has none.
	ping := func() error {
		pctx, cancel := context.WithTimeout(ctx, databaseProbeTimeout)
		defer cancel()
		opening = false
		if conn == nil {
			var err error
			if conn, err = pgx.ConnectConfig(pctx, cfg); err != nil {
				opening = true
				return err
			}
		}
		return conn.Ping(pctx)
	}
	wasUp := true
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reused := conn != nil
		err := ping()
		if err != nil && reused && ctx.Err() == nil {
			// A restarted server ended the probe's old connection: the
			// database is down only if a new one fails too, else the
			// probe would say so for a whole interval after it is back.
			closeConn()
			err = ping()
		}
		if opening && unanswered(err) && ctx.Err() == nil && pool.Stat().IdleConns() > 0 {
			// No connection of its own in time: a server just restarted
			// spends seconds authenticating every replica's reconnecting
			// pool (QA saw a replica refuse 2 s of requests its pool was
			// serving). It is hung only if a connection the pool holds
			// gets no answer either.
			pctx, cancel := context.WithTimeout(ctx, databaseProbeTimeout)
			if pool.Ping(pctx) == nil {
				err = nil
			}
			cancel()
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			closeConn()
			up.Set(0)
			observe(err)
			switch {
			case !wasUp:
			case pgfault.CredentialsRefused(err):
				// It answered: the URL's role is refused (verifier QA:
				// "does not answer" sent an SRE to the network).
				logger.Warn("database probe: PostgreSQL refuses the URL's credentials", "err", pgfault.WithoutTLSAttempt(err))
			default:
				logger.Warn("database probe: PostgreSQL does not answer", "err", pgfault.WithoutTLSAttempt(err))
			}
			wasUp = false
		default:
			up.Set(1)
			observe(nil)
			if !wasUp {
				logger.Info("database probe: PostgreSQL answers again")
			}
			wasUp = true
		}
		t.Reset(databaseProbeInterval)
	}
}
