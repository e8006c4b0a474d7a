package main

import (
	"testing"
	"time"

	"github.com/relais/relais/engine"
)

func TestThousands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"}, {-1000, "-1,000"}} {
		if got := thousands(tc.n); got != tc.want {
			t.Errorf("thousands(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want float64
	}{{50, 50}, {95, 95}, {99, 99}, {100, 100}, {0.1, 1}} {
		if got := percentile(d, tc.p); got != tc.want {
			t.Errorf("percentile(1..100 ms, %v) = %v ms, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestTallySignalsEachTargetOnce(t *testing.T) {
	t.Parallel()
	var tl tally
	three, five := tl.reached(3), tl.reached(5)
	tl.add(2)
	select {
	case <-three:
		t.Fatal("reached(3) closed at 2")
	default:
	}
	tl.add(1)
	<-three
	tl.set(5)
	<-five
	// A target already passed is closed at once.
	<-tl.reached(1)
}

func TestStatementNameReadsTheSqlcName(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- name: OccurrenceClaimPull :many\nwith subs as (select 1)": "OccurrenceClaimPull",
		"commit":                                "commit",
		"commit\n-- hot (HotPlans)":             "commit",
		engine.HotPlans + "\n-- hot (HotPlans)": "HotPlans",
		"select   pg_notify($1,\n $2)":          "select pg_notify($1, $2)",
	} {
		if got := statementName(sql); got != want {
			t.Errorf("statementName(%q) = %q, want %q", sql, got, want)
		}
	}
}
