package pgutc_test

import (
	"context"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// TestTimesAreReadInUTC: on a host whose zone is not UTC, times read back
// from PostgreSQL are in UTC, like the ones the engine makes.
func TestTimesAreReadInUTC(t *testing.T) {
	was := time.Local
	time.Local = time.FixedZone("far", 5*3600)
	defer func() { time.Local = was }()
	pool := dbtest.Pool(t) // configured as relais serve configures its pool
	var one time.Time
	var many []time.Time
	if err := pool.QueryRow(context.Background(), "select now(), array[now(), now()]").Scan(&one, &many); err != nil {
		t.Fatal(err)
	}
	if one.Location() != time.UTC || len(many) != 2 || many[0].Location() != time.UTC {
		t.Errorf("read %v and %v; want UTC", one, many)
	}
}
