package console_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/console"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/relaistest"
)

// TestPagesDoNotWaitForTheFirstCount: counting reads every entry of an
// index (seconds at ten million occurrences), so the first pages a replica
// serves show their rows at once and say the counts are coming, instead of
// waiting for them; the next page shows them.
func TestPagesDoNotWaitForTheFirstCount(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	release := make(chan struct{})
	c := console.New(slog.New(slog.DiscardHandler), env.Engine)
	console.SetCounts(c, func(ctx context.Context) ([]engine.OccurrenceCount, time.Time, error) {
		select {
		case <-release:
			return env.Engine.OccurrenceCounts(ctx)
		case <-ctx.Done():
			return nil, time.Time{}, ctx.Err()
		}
	})
	r := chi.NewRouter()
	r.Mount("/console", c.Handler())
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	for _, lang := range []string{"en", "fr"} {
		b := signedIn(t, srv.URL, lang, env.Operator)
		want := map[string]string{"en": "Counting the occurrences", "fr": "Décompte des occurrences en cours"}[lang]
		for path, testid := range map[string]string{"/console/occurrences": "counts-missing", "/console/health": "health-missing"} {
			start := time.Now()
			page := b.mustGet(path, 200)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("%s %s took %v while the count was blocked", lang, path, took)
			}
			if got := page.doc.Find(`[data-testid=` + testid + `]`).Text(); !strings.Contains(got, want) {
				t.Errorf("%s %s: %s = %q, want it to say %q", lang, path, testid, got, want)
			}
			if strings.Contains(page.body, "0001") {
				t.Errorf("%s %s dates something at year 1: %.300s", lang, path, page.body)
			}
		}
	}
	close(release)
	b := signedIn(t, srv.URL, "en", env.Operator)
	page := b.mustGet("/console/occurrences", 200)
	if page.doc.Find(`[data-testid=counts-missing]`).Length() != 0 || page.doc.Find(`[data-testid=counts-total]`).Text() == "" {
		t.Errorf("once counted, the page still has no counts: %.500s", page.body)
	}
}
