package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// phaseProfile profiles one measured phase when --profile is set: a CPU
// profile of this process (Relais phases; goroutines are labelled
// side=relais or side=client), the SQL round trips of the system's pool,
// and, when the server has pg_stat_statements, the server's statements and
// WAL flushes. Its zero value (no --profile) does nothing.
type phaseProfile struct {
	name  string
	dir   string
	cpu   *os.File
	stats *sqlStats
	db    *database
	log   *progress

	statements bool
	commits    int64 // xact_commit of the database before the phase
	pg         *postgres
	began      time.Time
	cpuBefore  cpuSample
}

// beginProfile starts profiling a phase named name (a file name stem).
// stats is the pool's tracer's (nil: not counted); withCPU adds a CPU
// profile.
func (b *bench) beginProfile(ctx context.Context, name string, db *database, stats *sqlStats, withCPU bool) (*phaseProfile, error) {
	p := &phaseProfile{name: name, dir: b.opts.Profile, stats: stats, db: db, log: b.log, pg: b.pg}
	if p.dir == "" {
		return p, nil
	}
	defer func() { p.began, p.cpuBefore = time.Now(), b.pg.cpu() }()
	if stats != nil {
		stats.reset()
	}
	if b.pg.statements {
		if err := p.resetServerStats(ctx); err != nil {
			b.log.printf("profile %s: pg_stat_statements unavailable: %v", name, err)
		} else {
			p.statements = true
		}
	}
	if withCPU {
		f, err := os.Create(filepath.Join(p.dir, name+".cpu.pprof"))
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		p.cpu = f
	}
	return p, nil
}

func (p *phaseProfile) resetServerStats(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.db.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{"create extension if not exists pg_stat_statements", "select pg_stat_statements_reset()", "select pg_stat_reset_shared('wal')"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return conn.QueryRow(ctx, "select xact_commit from pg_stat_database where datname = current_database()").Scan(&p.commits)
}

// end stops the phase's profiles and writes name-sql.txt: round trips per
// route and per unit (units of what unit names), then the server's view.
func (p *phaseProfile) end(ctx context.Context, units int, unit string) {
	if p.dir == "" {
		return
	}
	wall, cpu := time.Since(p.began), p.pg.cpu()
	if p.cpu != nil {
		pprof.StopCPUProfile()
		p.cpu.Close()
		p.log.printf("profile: %s (go tool pprof -tagfocus side=relais %s)", p.cpu.Name(), p.cpu.Name())
	}
	path := filepath.Join(p.dir, p.name+"-sql.txt")
	f, err := os.Create(path)
	if err != nil {
		p.log.printf("profile %s: %v", p.name, err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s: %d %s measured in %s\n\n", p.name, units, unit, wall.Round(time.Millisecond))
	self := cpu.self - p.cpuBefore.self
	if cpu.ok && p.cpuBefore.ok {
		pg := cpu.postgres - p.cpuBefore.postgres
		fmt.Fprintf(f, "CPU: PostgreSQL %.2f s (%.2f ms per %s), this process %.2f s (%.2f ms per %s: the CPU profile splits it by side), of %.2f s available (%d CPUs × wall)\n\n",
			pg.Seconds(), ms(pg)/float64(units), unit, self.Seconds(), ms(self)/float64(units), unit, wall.Seconds()*float64(runtime.NumCPU()), runtime.NumCPU())
		p.log.printf("profile %s: CPU per %s: PostgreSQL %.2f ms, this process %.2f ms", p.name, unit, ms(pg)/float64(units), ms(self)/float64(units))
	} else {
		fmt.Fprintf(f, "CPU: this process %.2f s (%.2f ms per %s)\n\n", self.Seconds(), ms(self)/float64(units), unit)
	}
	if p.stats != nil {
		p.log.printf("profile %s: %.2f SQL round trips per %s", p.name, float64(p.stats.roundTrips())/float64(units), unit)
		fmt.Fprintf(f, "Round trips seen by the pool's tracer (time as the client sees it, queueing for a connection excluded):\n\n")
		p.stats.write(f, units, unit)
	}
	if p.statements {
		if err := p.writeServerStats(ctx, f, units, unit); err != nil {
			fmt.Fprintf(f, "\npg_stat_statements: %v\n", err)
		}
	}
	p.log.printf("profile: %s", path)
}

func (p *phaseProfile) writeServerStats(ctx context.Context, f *os.File, units int, unit string) error {
	conn, err := pgx.Connect(ctx, p.db.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var commits int64
	if err := conn.QueryRow(ctx, "select xact_commit from pg_stat_database where datname = current_database()").Scan(&commits); err != nil {
		return err
	}
	var walRecords, walWrite, walSync int64
	var walBytes float64
	var walSyncTime float64
	if err := conn.QueryRow(ctx, "select wal_records, wal_bytes, wal_write, wal_sync, wal_sync_time from pg_stat_wal").Scan(&walRecords, &walBytes, &walWrite, &walSync, &walSyncTime); err != nil {
		return err
	}
	// The stats collector flushes counters lazily: a second's lag keeps
	// these approximate.
	fmt.Fprintf(f, "\nServer: %d transactions committed in the database (%.2f per %s); WAL: %d records, %.0f bytes, %d writes, %d flushes (fsync) taking %.0f ms (%.2f flushes per %s, %.3f ms each)\n",
		commits-p.commits, float64(commits-p.commits)/float64(units), unit, walRecords, walBytes, walWrite, walSync, walSyncTime,
		float64(walSync)/float64(units), unit, walSyncTime/float64(max(walSync, 1)))
	rows, err := conn.Query(ctx, `
		select calls, total_exec_time, rows, query
		from pg_stat_statements
		where dbid = (select oid from pg_database where datname = current_database())
		order by total_exec_time desc
		limit 25`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Fprintf(f, "\npg_stat_statements (server execution time, no network, no commit flush), top 25 by total time:\n\n")
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "calls/%s\ttotal ms\tmean ms\trows/call\tstatement\t\n", unit)
	for rows.Next() {
		var calls, n int64
		var total float64
		var query string
		if err := rows.Scan(&calls, &total, &n, &query); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%.2f\t%.0f\t%.3f\t%.1f\t%s\t\n", float64(calls)/float64(units), total, total/float64(max(calls, 1)),
			float64(n)/float64(max(calls, 1)), statementName(query))
	}
	tw.Flush()
	return rows.Err()
}
