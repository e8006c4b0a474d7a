package engine

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/relais/relais/internal/dbtest"
)

// A database migrated by a newer relais is said to be so when an older one
// migrates (starts) on it: it ran silently, reporting its own version.
func TestMigrateSaysTheSchemaIsNewer(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	newer := LatestSchemaVersion() + 1
	if _, err := pool.Exec(ctx, "insert into relais_schema_migrations (version, name) values ($1, 'from_the_future')", newer); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if _, err := Migrate(ctx, pool, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "schema is newer than this relais") || !strings.Contains(out, "known_schema_version") {
		t.Errorf("migrating a newer schema logged %q", out)
	}
}
