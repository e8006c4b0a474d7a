package dbtest

import (
	"context"
	"testing"

	"github.com/relais/relais/engine"
)

func TestMain(m *testing.M) { Main(m, engine.SchemaFingerprint(), engine.Migrate) }

func TestDatabasesAreMigratedAndIsolated(t *testing.T) {
	t.Parallel()
	a, b := Pool(t), Pool(t)
	ctx := context.Background()
	v, err := engine.SchemaVersion(ctx, a)
	if err != nil || v != engine.LatestSchemaVersion() {
		t.Fatalf("schema version %d, %v; want %d", v, err, engine.LatestSchemaVersion())
	}
	if _, err := a.Exec(ctx, "insert into tokens (name, role, hash) values ('x', 'admin', decode(repeat('ab', 32), 'hex'))"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "select count(*) from tokens").Scan(&n); err != nil || n != 0 {
		t.Fatalf("second database sees %d tokens (%v); want 0", n, err)
	}
}

// BenchmarkNewDatabase measures what a fresh migrated database costs a test.
func BenchmarkNewDatabase(b *testing.B) {
	for b.Loop() {
		URL(b)
	}
}
