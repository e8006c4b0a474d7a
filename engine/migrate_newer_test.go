package engine

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

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

// A role that may only read and write rows can serve a database someone
// else migrated: starting (Migrate) on it creates nothing. Where a
// migration is due, the refusal says what the role lacks.
func TestMigrateNeedsNoCreateRightOnceMigrated(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	role := "relais_rows_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")[:8]
	for _, stmt := range []string{
		"create role " + role + " login password 'rows-only-password'",
		"grant select on relais_schema_migrations to " + role,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "revoke all on relais_schema_migrations from "+role)
		_, _ = pool.Exec(context.Background(), "drop role if exists "+role)
	})
	cfg := pool.Config().Copy()
	cfg.ConnConfig.User, cfg.ConnConfig.Password = role, "rows-only-password"
	limited, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	if applied, err := Migrate(ctx, limited, nil); err != nil || len(applied) != 0 {
		t.Fatalf("Migrate as a role without CREATE on a migrated database: %v, %v; want nothing to do", applied, err)
	}
	// One migration due: refused, saying why.
	if _, err := pool.Exec(ctx, "delete from relais_schema_migrations where version = $1", LatestSchemaVersion()); err != nil {
		t.Fatal(err)
	}
	_, err = Migrate(ctx, limited, nil)
	if err == nil || !strings.Contains(err.Error(), "run relais migrate once as the schema's owner") {
		t.Errorf("a due migration as a role without CREATE: %v; want the privilege explained", err)
	}
}
