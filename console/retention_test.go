package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/relaistest"
)

// waitRetentionNoted waits for env's replica to note its retention, which
// it does as it starts, apart from serving.
func waitRetentionNoted(t *testing.T, env *relaistest.Env) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := env.Engine.Retention(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica never noted its retention")
		}
	}
}

// The console says how long ended instances are kept (operator QA: it did
// not, so a search finding nothing could not tell a typo from a
// deletion): on the health page, and on an ended instance's page with
// the date retention deletes it; a running instance says nothing of it.
func TestConsoleSaysTheRetention(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	waitRetentionNoted(t, f.env)
	en := signedIn(t, f.env.URL, "en", f.env.Operator)
	if got := text(en.mustGet("/console/health", 200), "retention"); got != "Retention: ended instances are deleted with their occurrences 30 days after they end (RELAIS_RETENTION)." {
		t.Errorf("health page retention %q", got)
	}
	inst := "/console/instances/" + f.pullHeld
	if n := count(en.mustGet(inst, 200), "retention"); n != 0 {
		t.Errorf("a held instance's page says when retention deletes it (%d)", n)
	}
	f.env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/stop", f.env.Operator, map[string]any{"reason": "customer left"})
	endedAt, err := time.Parse(time.RFC3339Nano, f.env.Must(200, "GET", "/api/v1/instances/"+f.pullHeld, f.env.Operator, nil).JSON(t)["ended_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	page := en.mustGet(inst, 200)
	got := text(page, "retention")
	when := endedAt.Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	if iso, _ := page.doc.Find(`[data-testid=retention] time`).Attr("datetime"); iso != when || !strings.Contains(got, "ended instances are kept 30 days (RELAIS_RETENTION)") {
		t.Errorf("an ended instance's retention: %q at %q, want %s and the setting", got, iso, when)
	}
	fr := signedIn(t, f.env.URL, "fr", f.env.Operator)
	if got := text(fr.mustGet(inst, 200), "retention"); !strings.Contains(got, "les instances terminées sont conservées 30 jours (RELAIS_RETENTION)") {
		t.Errorf("in French: %q", got)
	}

	forever := relaistest.New(t, func(c *config.Config) { c.Retention = 0 })
	waitRetentionNoted(t, forever)
	if got := text(signedIn(t, forever.URL, "fr", forever.Operator).mustGet("/console/health", 200), "retention"); got != "Rétention\u202f: les instances terminées sont conservées sans limite (RELAIS_RETENTION)." {
		t.Errorf("health page, retention forever, in French: %q", got)
	}
}
