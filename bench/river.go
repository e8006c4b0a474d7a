package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverVersion is the River release bench/go.mod requires.
const riverVersion = "v0.51.2"

// riverVariant is a River client configuration. Zero durations keep
// River's defaults (FetchCooldown 100 ms, FetchPollInterval 1 s).
type riverVariant struct {
	system        string
	fetchCooldown time.Duration
	fetchPoll     time.Duration
}

var (
	// riverTuned fetches as often as River allows (FetchCooldown's
	// minimum, 1 ms) and polls every 20 ms as River's own benchmark does.
	riverTuned    = riverVariant{system: sysRiverTuned, fetchCooldown: time.Millisecond, fetchPoll: 20 * time.Millisecond}
	riverDefaults = riverVariant{system: sysRiverDefault}
)

// benchArgs is the job: the same business data a Relais occurrence of
// add_company_to_crm carries.
type benchArgs struct {
	Seq         int    `json:"seq"`
	CompanyName string `json:"company_name"`
	Country     string `json:"country"`
	Source      string `json:"source"`
}

func (benchArgs) Kind() string { return "add_company_to_crm" }

func newBenchArgs(i int) benchArgs {
	return benchArgs{Seq: i, CompanyName: fmt.Sprint("c", i), Country: "FR", Source: "web"}
}

// benchWorker does nothing but report the job it received (the Relais
// worker completes with fixed outputs, which is as little).
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	received func(seq int, at time.Time)
}

func (w *benchWorker) Work(ctx context.Context, job *river.Job[benchArgs]) error {
	if w.received != nil {
		w.received(job.Args.Seq, time.Now())
	}
	return nil
}

// riverSystem is a River client working the default queue with the
// benchmark's worker count, on its own pool.
type riverSystem struct {
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	stats   *sqlStats
	settled *tally
	failed  chan error
	stopSub func()
}

// migrateRiver installs River's schema in db and returns a pool on it.
func migrateRiver(ctx context.Context, db *database, stats *sqlStats) (*pgxpool.Pool, error) {
	pool, err := db.pool(ctx, func(c *pgxpool.Config) { c.ConnConfig.Tracer = &sqlTracer{stats: stats} })
	if err != nil {
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	return pool, nil
}

// startRiver migrates db and starts a client with v's fetch settings and
// MaxWorkers = --workers. Completed jobs are counted in settled (River's
// completion events come after the completion is committed); received, when
// set, sees each job as its worker starts.
func startRiver(ctx context.Context, b *bench, db *database, v riverVariant, expected int, received func(seq int, at time.Time)) (*riverSystem, error) {
	s := &riverSystem{settled: &tally{}, failed: make(chan error, 1)}
	if b.opts.Profile != "" {
		s.stats = newSQLStats()
	}
	var err error
	if s.pool, err = migrateRiver(ctx, db, s.stats); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{received: received})
	s.client, err = river.NewClient(riverpgxv5.New(s.pool), &river.Config{
		FetchCooldown:     v.fetchCooldown,
		FetchPollInterval: v.fetchPoll,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: b.opts.Workers}},
		Workers:           workers,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	events, stopSub := s.client.SubscribeConfig(&river.SubscribeConfig{
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}, ChanSize: expected + 1000})
	s.stopSub = stopSub
	go func() {
		for ev := range events {
			if ev.Kind != river.EventKindJobCompleted {
				select {
				case s.failed <- fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind):
				default:
				}
				continue
			}
			s.settled.add(1)
		}
	}()
	if err := s.client.Start(ctx); err != nil {
		stopSub()
		return nil, err
	}
	return s, nil
}

// insert inserts one job in a transaction of its own, as a producer that
// starts one unit of work per request would.
func (s *riverSystem) insert(ctx context.Context, i int) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := s.client.InsertTx(ctx, tx, newBenchArgs(i), nil); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (s *riverSystem) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.client.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(os.Stderr, "river stop:", err)
	}
	s.stopSub()
}
