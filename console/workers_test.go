package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/relaistest"
)

// TestWorkersSayWhichRevisions: the Workers page shows the revisions each
// worker takes of each definition, and a definition page says which
// revisions its workers take, so that "served" does not hide a revision
// with work that nobody takes.
func TestWorkersSayWhichRevisions(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	env.Consumer("crm-sync", key)
	id := env.ConsumerID("crm-sync")
	see := func(worker string, subs ...engine.Subscription) {
		t.Helper()
		if err := env.Engine.SeeStream(context.Background(), engine.StreamPresence{ID: uuid.Must(uuid.NewV7()), ConsumerID: id,
			WorkerID: worker, Subscriptions: subs, Pairs: engine.Pairs{Keys: []string{key}, Revisions: []int32{1}},
			ConnectedAt: time.Now(), LiveFor: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	see("crm-r1", engine.Subscription{Definition: key, Revisions: []int{1}})
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		if got, want := text(b.mustGet("/console/workers", 200), "worker-revisions"), []string{"(revision 1)", "(révision 1)"}[i]; got != want {
			t.Errorf("%s: workers page: revisions %q, want %q", lang, got, want)
		}
		if got, want := text(b.mustGet("/console/definitions/"+key, 200), "served-revisions"), []string{"They take revision 1 only.", "Ils ne prennent que la révision 1."}[i]; got != want {
			t.Errorf("%s: definition page: %q, want %q", lang, got, want)
		}
	}
	see("crm-all", engine.Subscription{Definition: "*"})
	b := signedIn(t, env.URL, "en", env.Operator)
	if got, want := text(b.mustGet("/console/definitions/"+key, 200), "served-revisions"), "Revisions they take: 1; some take every revision their consumer is granted."; got != want {
		t.Errorf("definition page with a pattern's worker: %q, want %q", got, want)
	}
}
