package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// Canary values stored as a secret and a sensitive value: no console page
// may ever contain them, nor a prefix of the secret.
const (
	canarySecret    = "CANARY-SECRET-7q3z"
	canarySensitive = "CANARY-SENSITIVE-91wx"
)

// vaultWorking is a test-only definition with a secret input, a sensitive
// object input, a sensitive output and a secret nested output.
func vaultWorking(companyMax int, results []string) map[string]any {
	return map[string]any{
		"name": "Vault check", "description": "Verifies an API key with the vault service.",
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "company", "type": "text", "required": true, "max_length": companyMax, "description": "Legal name"},
			map[string]any{"name": "api_key", "type": "text", "required": true, "classification": "secret"},
			map[string]any{"name": "contact", "type": "object", "classification": "sensitive", "fields": []any{
				map[string]any{"name": "name", "type": "text", "required": true}}},
			map[string]any{"name": "tags", "type": "list", "items": map[string]any{"type": "text"}, "max_items": 5},
		}},
		"outputs": map[string]any{"fields": []any{
			map[string]any{"name": "result", "type": "choice", "required": true, "values": results},
			map[string]any{"name": "ref", "type": "text", "required": true},
			map[string]any{"name": "note", "type": "text", "classification": "sensitive"},
			map[string]any{"name": "receipt", "type": "object", "fields": []any{
				map[string]any{"name": "number", "type": "integer"},
				map[string]any{"name": "signature", "type": "text", "classification": "secret"}}},
		}},
		"routing_output": "result",
	}
}

// vaultProcess pins revision 1 of console_vault; its secret and sensitive
// process inputs feed the definition's secret and sensitive fields.
func vaultProcess() map[string]any {
	return map[string]any{
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "company", "type": "text", "required": true},
			map[string]any{"name": "api_key", "type": "text", "required": true, "classification": "secret"},
			map[string]any{"name": "contact", "type": "object", "classification": "sensitive", "fields": []any{
				map[string]any{"name": "name", "type": "text", "required": true}}},
		}},
		"start": "sync",
		"nodes": map[string]any{
			"sync": map[string]any{"kind": "pull", "definition": "console_vault", "revision": 1,
				"inputs": map[string]any{
					"company": map[string]any{"from": "input.company"},
					"api_key": map[string]any{"from": "input.api_key"},
					"contact": map[string]any{"from": "input.contact"},
					"tags":    map[string]any{"value": []any{"alpha", "beta"}},
				},
				"policy":   map[string]any{"max_attempts": 3, "retry_delay": "PT1M30S", "deadline": "P1D", "priority": 7},
				"routes":   map[string]any{"ok": "end_ok", "ko": "end_refused"},
				"on_error": "end_error"},
			"end_ok":      map[string]any{"kind": "end"},
			"end_refused": map[string]any{"kind": "end"},
			"end_error":   map[string]any{"kind": "end", "status": "failed"},
		},
	}
}

// longBusinessKey is the longest business key an instance may have
// (engine.MaxBusinessKey), without a place to break a line.
var longBusinessKey = "globex-" + strings.Repeat("x", engine.MaxBusinessKey-len("globex-"))

// fixture is a Relais with data in every state the console shows.
type fixture struct {
	env *relaistest.Env
	// Occurrences (and their instances) of console_vault: completed with
	// protected outputs, failed after two attempts whose messages echoed
	// the secret, and available.
	completed, failed, available       string
	completedInst, failedInst, runInst string
	// crmOcc is an available occurrence of add_company_to_crm.
	crmOcc, crmInst string
	consumerID      int64

	// Set by addIncidents (empty otherwise).
	pullHeld, pullHeldOcc string
	pushHeld              []string
	pushHeldOcc, stopped  string
	scorer                string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := relaistest.New(t)
	f := &fixture{env: env}
	env.Must(201, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, vaultWorking(100, []string{"ok", "ko"}))
	env.Must(201, "POST", "/api/v1/definitions/console_vault/revisions", env.Designer, nil)
	env.Must(201, "POST", "/api/v1/definitions/console_vault/releases", env.Designer, map[string]any{"name": "2026.11", "revision": 1, "notes": "First."})
	// Revision 2 tightens an input and adds an output value: both break
	// someone, which the diff must mark.
	env.Must(200, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, vaultWorking(80, []string{"ok", "ko", "later"}))
	env.Must(201, "POST", "/api/v1/definitions/console_vault/revisions", env.Designer, nil)
	env.Process("vault_flow", vaultProcess())
	res := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "vault-sync",
		"grants": []any{map[string]any{"definition": "console_vault", "revisions": "all"}}}).JSON(t)
	consumer := res["token"].(string)
	f.consumerID = int64(res["id"].(float64))

	inputs := map[string]any{"inputs": map[string]any{"company": "Acme SA", "api_key": canarySecret,
		"contact": map[string]any{"name": canarySensitive}}}
	start := func() string {
		return env.Must(201, "POST", "/api/v1/processes/vault_flow/instances", env.Operator, inputs).JSON(t)["id"].(string)
	}
	fetch := func(worker string) string {
		t.Helper()
		occs := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": worker,
			"subscriptions": []any{map[string]any{"definition": "console_vault"}}, "max_tasks": 1, "lock_duration": "PT1M"}).JSON(t)["occurrences"].([]any)
		if len(occs) != 1 {
			t.Fatalf("fetch by %s: %v", worker, occs)
		}
		return occs[0].(map[string]any)["id"].(string)
	}

	f.completedInst = start()
	f.completed = fetch("w-ok")
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+f.completed+"/complete", consumer, map[string]any{"worker_id": "w-ok",
		"outputs": map[string]any{"result": "ok", "ref": "REF-42", "note": canarySensitive,
			"receipt": map[string]any{"number": 7, "signature": canarySecret}}})

	f.failedInst = start()
	f.failed = fetch("w-1")
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+f.failed+"/fail", consumer, map[string]any{"worker_id": "w-1",
		"error_code": "VAULT_DOWN", "message": "HTTP 503: " + canarySecret + " / " + canarySensitive, "retryable": true, "retry_delay": "PT0S"})
	if again := fetch("w-2"); again != f.failed {
		t.Fatalf("second fetch got %s, want the retried %s", again, f.failed)
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+f.failed+"/fail", consumer, map[string]any{"worker_id": "w-2",
		"error_code": "KEY_REFUSED", "message": "HTTP 403: " + canarySecret, "retryable": false})

	f.runInst = start()
	occs := env.Must(200, "GET", "/api/v1/occurrences?instance="+f.runInst, env.Operator, nil).JSON(t)["items"].([]any)
	f.available = occs[0].(map[string]any)["id"].(string)

	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	// No process uses it yet: its page must not call it push.
	env.Must(201, "PUT", "/api/v1/definitions/console_unused/working", env.Designer, vaultWorking(100, []string{"ok"}))
	// Its business key is as long as allowed, one word: the lists must
	// still fit a laptop's screen.
	f.crmInst = env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"business_key": longBusinessKey,
		"inputs": map[string]any{"name": "Globex"}}).JSON(t)["id"].(string)
	occs = env.Must(200, "GET", "/api/v1/occurrences?instance="+f.crmInst, env.Operator, nil).JSON(t)["items"].([]any)
	f.crmOcc = occs[0].(map[string]any)["id"].(string)

	// A worker stream of console_vault, in the catalog for the whole test
	// (the fetches above list their pollers too, for a while).
	if _, err := env.Engine.SeeStream(context.Background(), engine.StreamPresence{ID: uuid.Must(uuid.NewV7()), ConsumerID: f.consumerID,
		WorkerID: "stream-7", Subscriptions: []engine.Subscription{{Definition: "console_vault"}},
		Pairs: engine.Pairs{Keys: []string{"console_vault"}, Revisions: []int32{2}}, ConnectedAt: time.Now(), LiveFor: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return f
}

// page is one console page every language must render.
type page struct {
	name, path string
}

// pages lists every page of the console with the fixture's data.
func (f *fixture) pages() []page {
	return []page{
		{"occurrences", "/console/occurrences"},
		{"occurrences-filtered", "/console/occurrences?definition=console_vault&status=failed"},
		{"occurrences-more-filters", "/console/occurrences?instance=xyz&created_from=2026-01-01"},
		{"occurrence-completed", "/console/occurrences/" + f.completed},
		{"occurrence-failed", "/console/occurrences/" + f.failed},
		{"occurrence-available", "/console/occurrences/" + f.available},
		{"instance-completed", "/console/instances/" + f.completedInst},
		{"instance-failed", "/console/instances/" + f.failedInst},
		{"instance-running", "/console/instances/" + f.runInst},
		{"instance-stop", "/console/instances/" + f.runInst + "/stop"},
		{"definitions", "/console/definitions"},
		{"definition", "/console/definitions/console_vault?from=1&to=2"},
		{"definition-unserved", "/console/definitions/add_company_to_crm"},
		{"definition-push-only", "/console/definitions/charge_card"},
		{"definition-unused", "/console/definitions/console_unused"},
		{"workers", "/console/workers"},
		{"workers-of-definition", "/console/workers?definition=console_vault"},
		{"not-found", "/console/occurrences/00000000-0000-7000-8000-000000000000"},
	}
}

// incidentPages are the pages that need addIncidents' data.
func (f *fixture) incidentPages() []page {
	return []page{
		{"health", "/console/health"},
		{"health-scoped", "/console/health?definition=charge_card"},
		{"occurrences-triage", "/console/occurrences?process=checkout&error_code=destination_http_503"},
		{"occurrence-push-held", "/console/occurrences/" + f.pushHeldOcc},
		{"occurrence-pull-held", "/console/occurrences/" + f.pullHeldOcc},
		{"instances", "/console/instances"},
		{"instances-held", "/console/instances?status=held&process=checkout"},
		{"instance-held", "/console/instances/" + f.pullHeld},
		{"instance-stopped", "/console/instances/" + f.stopped},
		{"instance-retry", "/console/instances/" + f.pullHeld + "/retry"},
		{"instance-abandon", "/console/instances/" + f.pullHeld + "/abandon"},
		{"bulk-retry", "/console/instances/bulk?action=retry&process=checkout&status=held"},
		{"audit", "/console/audit"},
		{"processes", "/console/processes"},
		{"process-version", "/console/processes/checkout/versions/1"},
		{"search-nothing", "/console/search?q=no-such-key"},
		{"preferences", "/console/preferences"},
	}
}

// allPages is every page the fixture has data for.
func (f *fixture) allPages() []page {
	if f.pullHeld == "" {
		return f.pages()
	}
	return append(f.pages(), f.incidentPages()...)
}

// browser calls the console like a browser without JavaScript: a cookie
// jar, forms, and redirects it follows only when asked.
type browser struct {
	t      testing.TB
	base   string
	client *http.Client
	lang   string
	// referer, when set, is the console page requests say they come from.
	referer string
}

func newBrowser(t testing.TB, base, lang string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, base: base, lang: lang, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if lang == "fr" {
		// French through the switcher's cookie; English through
		// Accept-Language, so both ways are exercised.
		u, _ := url.Parse(base + "/console/")
		jar.SetCookies(u, []*http.Cookie{{Name: "lang", Value: "fr", Path: "/console"}})
	}
	return b
}

// response is a fetched page.
type response struct {
	status int
	header http.Header
	body   string
	doc    *goquery.Document
}

func (b *browser) do(method, path string, form url.Values) response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.lang == "en" {
		req.Header.Set("Accept-Language", "en-GB,en;q=0.9,fr;q=0.5")
	}
	if b.referer != "" {
		req.Header.Set("Referer", b.base+b.referer)
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	out := response{status: res.StatusCode, header: res.Header, body: string(data)}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		out.doc, err = goquery.NewDocumentFromReader(strings.NewReader(out.body))
		if err != nil {
			b.t.Fatalf("%s %s: HTML: %v", method, path, err)
		}
	}
	return out
}

func (b *browser) get(path string) response { b.t.Helper(); return b.do("GET", path, nil) }

// mustGet fetches a page and fails unless it answers want.
func (b *browser) mustGet(path string, want int) response {
	b.t.Helper()
	r := b.get(path)
	if r.status != want {
		b.t.Fatalf("GET %s: status %d, want %d; body: %.500s", path, r.status, want, r.body)
	}
	return r
}

// signIn fills the sign-in form with token and returns where it redirects.
func (b *browser) signIn(token string) response {
	b.t.Helper()
	form := b.mustGet("/console/sign-in", 200)
	csrf, _ := form.doc.Find(`[data-testid=sign-in-form] input[name=csrf]`).Attr("value")
	if csrf == "" {
		b.t.Fatal("sign-in form without CSRF token")
	}
	return b.do("POST", "/console/sign-in", url.Values{"csrf": {csrf}, "token": {token}})
}

// signedIn returns a browser signed in with token.
func signedIn(t testing.TB, base, lang, token string) *browser {
	t.Helper()
	b := newBrowser(t, base, lang)
	if r := b.signIn(token); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/occurrences" {
		t.Fatalf("sign-in: status %d, Location %q; body %.300s", r.status, r.header.Get("Location"), r.body)
	}
	return b
}

// csrfOf returns the CSRF token of the first form of a page.
func csrfOf(t testing.TB, r response) string {
	t.Helper()
	v, ok := r.doc.Find(`input[name=csrf]`).First().Attr("value")
	if !ok || v == "" {
		t.Fatal("no CSRF field on the page")
	}
	return v
}

// text is the trimmed text of the elements a data-testid selects, its
// runs of ASCII white space made one space. No-break spaces stay: French
// typography puts them before : ; ? ! and tests check it.
func text(r response, testid string) string {
	if r.doc == nil {
		// Not an HTML answer (a redirect, say): the caller reports the
		// status; a panic would hide it.
		return ""
	}
	return collapse(r.doc.Find(`[data-testid="` + testid + `"]`).Text())
}

// collapse reads s as a person does: runs of spaces and line breaks as
// one space, a no-break space (a duration's, which never wraps) as a
// space. A narrow no-break space (French typography's) is kept, for the
// tests that check it.
func collapse(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '\u00a0' || r == '\t' || r == '\n' || r == '\r' || r == '\f'
	}), " ")
}

func count(r response, testid string) int {
	return r.doc.Find(`[data-testid="` + testid + `"]`).Length()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
