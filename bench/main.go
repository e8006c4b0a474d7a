// Command bench measures Relais against River (github.com/riverqueue/river)
// on the same PostgreSQL server, with the same worker and producer counts,
// in one run: full-cycle throughput, idle pickup latency, fetch cost under
// a large backlog, and push throughput (Relais alone).
//
// It is its own module so that River never enters Relais's go.mod; it
// builds against the working tree (replace directive) and runs Relais in
// process, through its public HTTP API. See README.md.
//
//	cd bench && go run .                      # every scenario, embedded PostgreSQL
//	go run . --scenarios cycle --n 200        # a smoke run
//	go run . --json > results.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	DatabaseURL string   `json:"-"`
	Workers     int      `json:"workers"`
	Producers   int      `json:"producers"`
	N           int      `json:"n"`
	MaxTasks    int      `json:"max_tasks"`
	BatchSize   int      `json:"batch_size"`
	Pickups     int      `json:"pickups"`
	BacklogRows int      `json:"backlog_rows"`
	Fetches     int      `json:"backlog_fetches"`
	Scenarios   []string `json:"scenarios"`
	JSON        bool     `json:"-"`
	Profile     string   `json:"-"`
	Examples    string   `json:"-"`
	PGBin       string   `json:"-"`
	// Rounds is how many times cycle and cycle-batch measure each system,
	// alternately.
	Rounds int `json:"rounds"`
	// RiverDefaults runs River with its defaults in cycle too.
	RiverDefaults bool `json:"river_defaults"`
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run . [flags]\n\nscenarios:\n")
		for _, s := range scenarios {
			fmt.Fprintf(stderr, "  %-8s %s\n", s.name, s.about)
		}
		fmt.Fprintf(stderr, "\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.DatabaseURL, "database-url", "", "PostgreSQL server to use (a role allowed to CREATE DATABASE); empty starts an embedded, durable cluster (fsync and synchronous_commit on)")
	fs.IntVar(&o.Workers, "workers", 8, "workers: Relais fetch loops, River MaxWorkers")
	fs.IntVar(&o.Producers, "producers", 4, "producers starting instances (Relais) or inserting jobs (River), one per request or transaction")
	fs.IntVar(&o.N, "n", 5000, "starts measured in the cycle and push scenarios")
	fs.IntVar(&o.MaxTasks, "max-tasks", 50, "max_tasks of a Relais fetch-and-lock")
	fs.IntVar(&o.BatchSize, "batch-size", 100, "starts per batch request (Relais) or InsertMany call (River) in cycle-batch")
	fs.IntVar(&o.Pickups, "pickups", 1000, "pickups measured in the latency scenario")
	fs.IntVar(&o.BacklogRows, "backlog-rows", 1_000_000, "other rows in the table for the backlog scenario's large case (the small case has 1,000)")
	fs.IntVar(&o.Fetches, "backlog-fetches", 300, "fetches timed per case in the backlog scenario")
	list := fs.String("scenarios", strings.Join(scenarioNames(), ","), "comma-separated scenarios to run")
	fs.BoolVar(&o.JSON, "json", false, "print the results as JSON on stdout instead of a table")
	fs.StringVar(&o.Profile, "profile", "", "folder for profiles of the Relais runs: CPU (pprof, labelled side=relais|client), SQL round trips per route, pg_stat_statements and WAL flushes (slows the runs a little)")
	fs.StringVar(&o.Examples, "examples", "../examples", "the repository's examples folder (definitions are applied from it)")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds of the cycle and cycle-batch scenarios, the systems alternating within each; the table shows each figure's median (River's defaults run once)")
	fs.BoolVar(&o.RiverDefaults, "river-defaults", true, "also run River with its defaults in cycle (about 80 jobs/s: a minute at --n 5000)")
	fs.StringVar(&o.PGBin, "pg-bin", os.Getenv("RELAIS_PG_BIN"), "folder with initdb and postgres for the embedded cluster; empty searches as relais serve does")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, name := range strings.Split(*list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(scenarioNames(), name) {
			return o, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(scenarioNames(), ", "))
		}
		o.Scenarios = append(o.Scenarios, name)
	}
	switch {
	case len(o.Scenarios) == 0:
		return o, errors.New("--scenarios names none")
	case o.Workers < 1 || o.Producers < 1 || o.N < 1 || o.MaxTasks < 1 || o.Pickups < 1 || o.Fetches < 1 || o.Rounds < 1 || o.BatchSize < 1 || o.BatchSize > 1000:
		return o, errors.New("--workers, --producers, --n, --max-tasks, --pickups, --backlog-fetches and --rounds must be at least 1, --batch-size 1 to 1000")
	case o.BacklogRows < smallBacklog:
		return o, fmt.Errorf("--backlog-rows must be at least %d (the small case)", smallBacklog)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	b := &bench{opts: o, log: newProgress(stderr)}
	if o.Profile != "" {
		if err := os.MkdirAll(o.Profile, 0o755); err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
	}
	began := time.Now()
	pg, err := startPostgres(ctx, o.DatabaseURL, o.PGBin, o.Profile != "", b.log)
	if err != nil {
		return err
	}
	defer pg.close()
	b.pg = pg
	env, err := pg.describe(ctx)
	if err != nil {
		return err
	}
	env.GoVersion, env.CPUs = runtime.Version(), runtime.NumCPU()
	env.River = riverVersion
	env.RiverTuned = fmt.Sprintf("FetchCooldown %s, FetchPollInterval %s", riverTuned.fetchCooldown, riverTuned.fetchPoll)
	b.log.printf("PostgreSQL %s (fsync %s, synchronous_commit %s); Go %s on %d CPUs; %d workers, %d producers",
		env.Postgres, env.Fsync, env.SynchronousCommit, env.GoVersion, env.CPUs, o.Workers, o.Producers)
	if env.Fsync != "on" || env.SynchronousCommit != "on" {
		b.log.printf("warning: the server is not durable (fsync %s, synchronous_commit %s): figures are not comparable with durable runs", env.Fsync, env.SynchronousCommit)
	}

	rep := report{Options: o, Environment: env}
	for _, s := range scenarios {
		if !slices.Contains(o.Scenarios, s.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		b.log.printf("== %s: %s", s.name, s.about)
		ms, err := s.run(ctx, b)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		rep.Measurements = append(rep.Measurements, ms...)
	}
	rep.Seconds = time.Since(began).Seconds()
	b.log.printf("done in %s", time.Since(began).Round(time.Second))
	if o.JSON {
		return rep.writeJSON(stdout)
	}
	rep.writeTable(stdout)
	return nil
}

// bench is what every scenario runs with.
type bench struct {
	opts options
	pg   *postgres
	log  *progress
}
