package pgutc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the child's zone, whatever the machine has installed

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/pgutc"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

const helperURL = "PGUTC_HELPER_URL"

// TestTimesAreReadInUTC: on a host whose zone is not UTC, times read back
// from PostgreSQL are in UTC, like the ones the engine makes. The zone is
// the process's own from its start, so a child process reads them.
func TestTimesAreReadInUTC(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReadsTimes$")
	cmd.Env = append(os.Environ(), "TZ=Asia/Tokyo", helperURL+"="+dbtest.URL(t))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "local Asia/Tokyo, read UTC UTC") {
		t.Errorf("the child read %s (%v); want times in UTC while its zone is Asia/Tokyo", out, err)
	}
}

// TestHelperReadsTimes is not a test: TestTimesAreReadInUTC runs it in a
// child process set to another zone.
func TestHelperReadsTimes(t *testing.T) {
	url := os.Getenv(helperURL)
	if url == "" {
		t.Skip("helper process for TestTimesAreReadInUTC")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pgutc.Configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var one time.Time
	var many []time.Time
	if err := pool.QueryRow(context.Background(), "select now(), array[now()]").Scan(&one, &many); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("local %s, read %s %s\n", time.Local, one.Location(), many[0].Location())
}
