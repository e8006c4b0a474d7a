package console_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
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
		if _, err := env.Engine.SeeStream(context.Background(), engine.StreamPresence{ID: uuid.Must(uuid.NewV7()), ConsumerID: id,
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
		page := b.mustGet("/console/definitions/"+key, 200)
		if got, want := text(page, "served-revisions"), []string{"It takes revision 1 only.", "Seule la révision 1 est prise en charge."}[i]; got != want {
			t.Errorf("%s: definition page: %q, want %q", lang, got, want)
		}
		// The count's full stop follows it, no space before (a screenshot
		// showed "1 worker . It takes").
		if got, want := strings.Join(strings.Fields(page.doc.Find(`[data-testid=served-by]`).Text()), " "), []string{"Served by 1 worker. It takes revision 1 only.", "Servie par 1 exécutant. Seule la révision 1 est prise en charge."}[i]; got != want {
			t.Errorf("%s: the notice reads %q, want %q", lang, got, want)
		}
	}
	see("crm-all", engine.Subscription{Definition: "*"})
	b := signedIn(t, env.URL, "en", env.Operator)
	if got, want := text(b.mustGet("/console/definitions/"+key, 200), "served-revisions"), "Revisions they take: 1; some take every revision their consumer is granted."; got != want {
		t.Errorf("definition page with a pattern's worker: %q, want %q", got, want)
	}
	// A worker naming no revision: the numbers its grant makes now, so
	// that a new revision shows among them or not (evolution QA).
	env.AddInput(key, "region")
	env.AddInput(key, "segment")
	page := b.mustGet("/console/workers", 200)
	var texts []string
	page.doc.Find(`[data-testid=worker-revisions]`).Each(func(_ int, s *goquery.Selection) { texts = append(texts, strings.Join(strings.Fields(s.Text()), " ")) })
	if !slices.Contains(texts, "(every revision its consumer is granted: 1–3)") {
		t.Errorf("workers page: %q, want the pattern's worker to take revisions 1–3", texts)
	}
}

// TestWorkersDeclaringFieldsTakeRevisionsThatHaveThem: a worker that
// declares the inputs it reads, naming no revision, takes only the
// revisions whose inputs have them (as its fetches resolve): the pages say
// so rather than "every revision", which hid a revision nobody took.
func TestWorkersDeclaringFieldsTakeRevisionsThatHaveThem(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	if rev := env.AddInput(key, "region"); rev != 2 {
		t.Fatalf("revision %d, want 2", rev)
	}
	consumer := env.Consumer("crm-sync", key)
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "regional", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": key, "fields": []string{"/region"}}}})
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		if got, want := text(b.mustGet("/console/workers", 200), "worker-revisions"), []string{"(revision 2)", "(révision 2)"}[i]; got != want {
			t.Errorf("%s: workers page: revisions %q, want %q", lang, got, want)
		}
		if got, want := text(b.mustGet("/console/definitions/"+key, 200), "served-revisions"), []string{"It takes revision 2 only.", "Seule la révision 2 est prise en charge."}[i]; got != want {
			t.Errorf("%s: definition page: %q, want %q", lang, got, want)
		}
	}
}

// TestUnsnapshottedChangesAreShown: a definition page says when its
// Working copy has changes that no revision has yet, and lists them with
// whom they may break.
func TestUnsnapshottedChangesAreShown(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Must(201, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, vaultWorking(100, []string{"ok", "ko"}))
	env.Must(201, "POST", "/api/v1/definitions/console_vault/revisions", env.Designer, nil)
	b := signedIn(t, env.URL, "en", env.Operator)
	if n := count(b.mustGet("/console/definitions/console_vault", 200), "unsnapshotted"); n != 0 {
		t.Errorf("a Working copy equal to its revision shows %d unsnapshotted notices", n)
	}
	env.Must(200, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, vaultWorking(80, []string{"ok", "ko", "later"}))
	for i, lang := range []string{"en", "fr"} {
		page := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/definitions/console_vault", 200)
		if want := []string{"Since revision 1: 2 changes, 2 breaking", "Depuis la révision 1\u202f: 2 changements, 2 incompatibles"}[i]; text(page, "unsnapshotted-summary") != want {
			t.Errorf("%s: unsnapshotted summary %q, want %q", lang, text(page, "unsnapshotted-summary"), want)
		}
		rows := page.doc.Find(`[data-testid=unsnapshotted-changes] [data-testid=change-row][data-breaking=true]`)
		if rows.Length() != 2 {
			t.Errorf("%s: %d breaking unsnapshotted changes listed, want 2", lang, rows.Length())
		}
		if n := count(page, "lowers-protection"); n != 0 {
			t.Errorf("%s: changes that lower no protection said to (%d)", lang, n)
		}
	}
}

// A change that lowers a field's classification is said above the
// changes, naming the field, in the comparison of revisions as in the
// Working copy's changes: a row among others, breaking nobody, hid it
// where relais apply and the API's diff name it (designer QA).
func TestLoweredProtectionIsSaid(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Must(201, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, vaultWorking(100, []string{"ok", "ko"}))
	env.Must(201, "POST", "/api/v1/definitions/console_vault/revisions", env.Designer, nil)
	lowered := vaultWorking(100, []string{"ok", "ko"})
	lowered["inputs"].(map[string]any)["fields"].([]any)[1].(map[string]any)["classification"] = "sensitive"
	env.Must(200, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, lowered)
	want := []string{
		"Lowers protection: /inputs/api_key (secret → sensitive). Under the newer contract these fields’ values are less protected than under the older one.",
		"Abaisse la protection\u202f: /inputs/api_key (secrète → sensible). Avec le contrat le plus récent, les valeurs de ces champs sont moins protégées qu’avec l’ancien.",
	}
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		if got := text(b.mustGet("/console/definitions/console_vault", 200), "lowers-protection"); got != want[i] {
			t.Errorf("%s: the Working copy's changes say %q, want %q", lang, got, want[i])
		}
	}
	env.Must(201, "POST", "/api/v1/definitions/console_vault/revisions", env.Designer, nil)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		if got := text(b.mustGet("/console/definitions/console_vault?from=1&to=2", 200), "lowers-protection"); got != want[i] {
			t.Errorf("%s: the comparison says %q, want %q", lang, got, want[i])
		}
		// Raised back, nothing is lowered.
		if n := count(b.mustGet("/console/definitions/console_vault?from=2&to=1", 200), "lowers-protection"); n != 0 {
			t.Errorf("%s: a comparison raising protection says it lowers it", lang)
		}
	}
}

// TestARevisionNoWorkerTakesIsSaid: a process version pins revision 2
// while the definition's only worker takes revision 1: its occurrences
// wait however "served" the definition is. Health's row and the
// definition page say which revision nobody takes (they said nothing: a
// worker served the definition), and stop once a worker takes it.
func TestARevisionNoWorkerTakesIsSaid(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	if rev := env.AddInput(key, "region"); rev != 2 {
		t.Fatalf("revision %d, want 2", rev)
	}
	process := relaistest.CRMProcess(nil)
	process["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = 2
	env.Process("crm_v2", process)
	consumer := env.Consumer("crm-sync", key)
	fetch := func(worker string, revisions any) {
		t.Helper()
		env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": worker, "max_tasks": 1,
			"subscriptions": []any{map[string]any{"definition": key, "revisions": revisions}}})
	}
	fetch("crm-r1", []int{1})
	// Two: the worker taking revision 2 below claims one, the other waits.
	for _, name := range []string{"Acme", "Globex"} {
		env.Must(201, "POST", "/api/v1/processes/crm_v2/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": name}})
	}
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		health := b.mustGet("/console/health", 200)
		note := health.doc.Find(`[data-testid=health-row][data-key="` + key + `"] [data-testid=no-worker]`)
		if got, want := collapse(note.Text()), []string{"(no worker takes revision 2)", "(aucun exécutant ne prend la révision 2)"}[i]; got != want {
			t.Errorf("%s: health note %q, want %q", lang, got, want)
		}
		if got, want := text(b.mustGet("/console/definitions/"+key, 200), "untaken-revisions"), []string{
			"Occurrences of revision 2 wait, and no live worker takes it: subscribe workers to it, with their consumers granted it (a worker naming no revision takes those its consumer is granted; a process version pins it).",
			"Des occurrences de la révision 2 attendent, et aucun exécutant connecté ne la prend\u202f: abonnez-y des exécutants dont le consommateur y a droit (un exécutant qui ne nomme aucune révision prend celles auxquelles son consommateur a droit\u202f; une version de processus l’épingle).",
		}[i]; got != want {
			t.Errorf("%s: definition page %q, want %q", lang, got, want)
		}
	}
	fetch("crm-all", "all")
	b := signedIn(t, env.URL, "en", env.Operator)
	if n := b.mustGet("/console/health", 200).doc.Find(`[data-testid=health-row][data-key="` + key + `"] [data-testid=health-lag]`).Text(); n == "—" {
		t.Fatal("no occurrence waits any more: the test proves nothing")
	}
	if n := b.mustGet("/console/health", 200).doc.Find(`[data-testid=no-worker]`).Length(); n != 0 {
		t.Errorf("%d no-worker notes once a worker takes revision 2, want none", n)
	}
	if n := b.mustGet("/console/definitions/"+key, 200).doc.Find(`[data-testid=untaken-revisions]`).Length(); n != 0 {
		t.Errorf("the definition page still warns once a worker takes revision 2")
	}
}

// TestWorkersShowTheirLapsedLocks: a worker whose locks lapse (one
// crash-looping under a steady id stays live) is marked on the Workers
// page with how many lapsed in the last hour and when the latest did;
// one without any shows 0, and lapses older than the hour are left out.
func TestWorkersShowTheirLapsedLocks(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	env.Consumer("crm-sync", key)
	id := env.ConsumerID("crm-sync")
	for _, worker := range []string{"crashy", "steady"} {
		env.Engine.SeePoller(context.Background(), engine.PollerSighting{ConsumerID: id, WorkerID: worker,
			Subscriptions: []engine.Subscription{{Definition: key}}, Pairs: engine.Pairs{Keys: []string{key}, Revisions: []int32{1}}, LiveFor: time.Hour})
	}
	latest := time.Now().Add(-5 * time.Minute).UTC().Truncate(time.Second)
	lapse := func(worker string, attempt int, at time.Time) {
		t.Helper()
		if _, err := env.Pool.Exec(context.Background(), `insert into worker_lapses (occurrence_id, attempt, consumer_id, worker_id, definition_key, lapsed_at)
			values ($1, $2, $3, $4, $5, $6)`, uuid.New(), attempt, id, worker, key, at); err != nil {
			t.Fatal(err)
		}
	}
	for i, at := range []time.Time{latest, latest.Add(-10 * time.Minute), latest.Add(-2 * time.Hour)} {
		lapse("crashy", i+1, at)
	}
	// A worker id no longer connected (a restart took a new one).
	for i := range 3 {
		lapse("vm-4242", i+1, latest.Add(-20*time.Minute))
	}
	// One of another definition: counted on the whole page, not on the
	// definition's (the live row said 2 where the table above said 1).
	if _, err := env.Pool.Exec(context.Background(), `insert into worker_lapses (occurrence_id, attempt, consumer_id, worker_id, definition_key, lapsed_at)
		values ($1, 1, $2, 'crashy', 'elsewhere', $3)`, uuid.New(), id, latest.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	for i, lang := range []string{"en", "fr"} {
		page := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/workers?definition="+key, 200)
		rows := map[string]*goquery.Selection{}
		page.doc.Find(`[data-testid=worker-row]`).Each(func(_ int, s *goquery.Selection) { rows[s.AttrOr("data-worker", "")] = s })
		crashy := rows["crashy"].Find(`[data-testid=worker-lapsed]`)
		if got := crashy.Find(`[data-testid=worker-lapsed-count]`).Text(); got != "2" {
			t.Errorf("%s: crashy lapsed %q, want 2 (the one older than an hour left out)", lang, got)
		}
		if got, want := crashy.Find("time").AttrOr("datetime", ""), latest.Format(time.RFC3339); !strings.HasPrefix(got, want[:19]) {
			t.Errorf("%s: crashy's latest lapse %q, want %s", lang, got, want)
		}
		if got, want := strings.Fields(crashy.Text())[1], []string{"last", "dernier"}[i]; got != want {
			t.Errorf("%s: crashy's cell reads %q, want %q after the count", lang, crashy.Text(), want)
		}
		steady := rows["steady"].Find(`[data-testid=worker-lapsed]`)
		if got := strings.TrimSpace(steady.Text()); got != "0" || steady.Find(`[data-testid=worker-lapsed-count]`).Length() != 0 {
			t.Errorf("%s: steady's lapsed cell %q, want a plain 0", lang, got)
		}
		if got, want := page.doc.Find(`[data-testid=workers] th`).Eq(5).Text(), []string{"Lapsed (1\u00a0h)", "Verrous expirés (1\u00a0h)"}[i]; got != want {
			t.Errorf("%s: column heading %q, want %q", lang, got, want)
		}
		if text(page, "lapsed-hint") == "" {
			t.Errorf("%s: no hint says what lapsed means", lang)
		}
		// The ids that let locks lapse, connected or not, the most first
		// (SDK QA: a crash-looping worker's rows come and go, and a new
		// id at each start left the live rows clean).
		var lapses []string
		page.doc.Find(`[data-testid=lapse-row]`).Each(func(_ int, s *goquery.Selection) {
			cell := func(id string) string { return collapse(s.Find(`[data-testid="` + id + `"]`).Text()) }
			lapses = append(lapses, s.AttrOr("data-worker", "")+" "+cell("lapse-count")+" "+cell("lapse-live"))
		})
		if want := [][]string{{"vm-4242 3 no", "crashy 2 yes"}, {"vm-4242 3 non", "crashy 2 oui"}}[i]; !slices.Equal(lapses, want) {
			t.Errorf("%s: lapses table %q, want %q", lang, lapses, want)
		}
	}
	all := signedIn(t, env.URL, "en", env.Operator).mustGet("/console/workers", 200)
	var counts []string
	all.doc.Find(`[data-testid=worker-lapsed-count], [data-testid=lapse-count]`).Each(func(_ int, s *goquery.Selection) {
		counts = append(counts, collapse(s.Text()))
	})
	// A misspelt key is said so, as the API says 404 (verifier QA: "No
	// worker serves this definition").
	if got := text(signedIn(t, env.URL, "fr", env.Operator).mustGet("/console/workers?definition=add_company_to_cmr", 404), "filter-errors"); !strings.Contains(got, "add_company_to_cmr") {
		t.Errorf("an unknown definition's workers: %q, want it said unknown", got)
	}
	if want := []string{"3", "3", "3"}; !slices.Equal(counts, want) {
		t.Errorf("the whole page's counts %q, want %q (crashy's lapse elsewhere counted: the table, then its row)", counts, want)
	}
}
