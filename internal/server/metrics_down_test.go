package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/relais/relais/engine"
)

// hungCounts serves the cached counts at once and stands for a database
// that does not answer in the reads a scrape makes of it.
type hungCounts struct{ reads atomic.Int32 }

func (h *hungCounts) OccurrenceCounts(context.Context) ([]engine.OccurrenceCount, time.Time, error) {
	return []engine.OccurrenceCount{{Definition: "crm", Status: engine.StatusAvailable, Count: 3}}, time.Now(), nil
}

func (h *hungCounts) DefinitionKeys(ctx context.Context) ([]string, error) {
	h.reads.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hungCounts) LiveWorkersByDefinition(ctx context.Context) (map[string]map[string]int64, error) {
	h.reads.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hungCounts) RevisionsWithoutTaker(ctx context.Context) (map[string][]int, error) {
	h.reads.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hungCounts) LapsesByDefinition(ctx context.Context) (map[string]int64, error) {
	h.reads.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hungCounts) CachedHealth(context.Context) (engine.Health, time.Time, error) {
	return engine.Health{Definitions: map[string]*engine.DefinitionHealth{}}, time.Now(), nil
}

func (h *hungCounts) Now() time.Time { return time.Now() }

// While the probe says the database does not answer, a scrape reads
// nothing from it: it answers from the cached counts at once, without the
// series it would have to read (relais_workers_live), instead of holding
// the scrape until its timeout.
func TestScrapeSkipsTheDatabaseWhileItDoesNotAnswer(t *testing.T) {
	t.Parallel()
	src := &hungCounts{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newOccurrenceCounts(src, slog.New(slog.DiscardHandler), func() bool { return true }))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if n := src.reads.Load(); n != 0 {
		t.Errorf("a scrape while the database is down made %d reads of it, want none", n)
	}
	names := map[string]*dto.MetricFamily{}
	for _, f := range families {
		names[f.GetName()] = f
	}
	if f := names["relais_occurrences"]; f == nil || len(f.GetMetric()) != 6 {
		t.Errorf("relais_occurrences = %v, want the cached counts of crm by status", f)
	}
	if f := names["relais_workers_live"]; f != nil {
		t.Errorf("relais_workers_live = %v, want no sample while the database is down", f)
	}
}
