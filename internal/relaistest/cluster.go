package relaistest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/embeddedpg"
)

// OwnCluster starts a PostgreSQL cluster of the test's own on a fixed
// port, so that the test may stop it and start it again (embeddedpg.Start
// with the options returned) where its pool looks for it, and opens a pool
// on its migrated postgres database. Stopping the cluster is the test's.
func OwnCluster(t *testing.T) (embeddedpg.Options, *embeddedpg.Cluster, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("/tmp", "relais-own-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := embeddedpg.Options{Dir: filepath.Join(dir, "pg"), Port: port, Fast: true, BinDir: os.Getenv("RELAIS_PG_BIN")}
	c, err := embeddedpg.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := engine.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return opts, c, pool
}
