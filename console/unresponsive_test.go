package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/relais/relais/internal/pgfault"
)

// A page whose request the replica cut short (PostgreSQL stopped
// answering) is the translated 503 page, never a bare 500: templ stops
// rendering at the cancelled context, which the health page, drawn from a
// snapshot, met after its reads.
func TestPagesCutShortAreTemporarilyUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	b.mustGet("/console/health", 200) // the snapshot is taken
	base, _ := url.Parse(f.env.URL + "/console/health")
	for _, path := range []string{"/console/health", "/console/occurrences"} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(pgfault.ErrUnresponsive)
		req := httptest.NewRequest("GET", path, nil).WithContext(ctx)
		req.Header.Set("Accept-Language", "en")
		for _, c := range b.client.Jar.Cookies(base) {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		f.env.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "Temporarily unavailable") {
			t.Errorf("%s cut short: %d %.200q, want the 503 page", path, rec.Code, rec.Body.String())
		}
	}
}
