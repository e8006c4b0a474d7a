package console_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/console"
	"github.com/relais/relais/internal/relaistest"
)

func TestUnauthenticatedPagesRedirectToSignIn(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	b := newBrowser(t, env.URL, "en")
	for path, next := range map[string]string{
		"/console":                               "",
		"/console/":                              "",
		"/console/occurrences?status=failed":     "/console/occurrences?status=failed",
		"/console/definitions":                   "/console/definitions",
		"/console/instances/" + zeroID + "/stop": "/console/instances/" + zeroID + "/stop",
	} {
		r := b.get(path)
		want := "/console/sign-in"
		if next != "" {
			want += "?next=" + url.QueryEscape(next)
		}
		if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Errorf("GET %s: %d Location %q, want 303 %q", path, r.status, r.header.Get("Location"), want)
		}
	}
	if r := b.do("POST", "/console/instances/"+zeroID+"/stop", url.Values{"csrf": {"x"}}); r.status != http.StatusSeeOther {
		t.Errorf("POST without a session: %d, want 303 to sign-in", r.status)
	}
}

const zeroID = "00000000-0000-7000-8000-000000000000"

func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	// A token pasted with its header's scheme signs in too (newcomer QA).
	for _, token := range []string{env.Operator, env.Admin, "Bearer " + env.Operator} {
		b := newBrowser(t, env.URL, "en")
		// Sign-in goes back to the page first asked for.
		first := b.get("/console/definitions")
		loc := first.header.Get("Location")
		form := b.mustGet(loc, 200)
		csrf, _ := form.doc.Find(`[data-testid=sign-in-form] input[name=csrf]`).Attr("value")
		next, _ := form.doc.Find(`[data-testid=sign-in-form] input[name=next]`).Attr("value")
		r := b.do("POST", "/console/sign-in", url.Values{"csrf": {csrf}, "next": {next}, "token": {token}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/definitions" {
			t.Fatalf("sign-in: %d Location %q", r.status, r.header.Get("Location"))
		}
		var session *http.Cookie
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			if c.Name == "relais_session" {
				session = c
			}
		}
		if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/console" || session.Secure {
			t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/console, not Secure over plain HTTP", session)
		}
		if strings.Contains(session.Value, token) || len(session.Value) < 40 {
			t.Errorf("session id %q is not an independent random value", session.Value)
		}
		page := b.mustGet("/console/definitions", 200)
		// Signing out deletes the session on the server, not just the
		// cookie: replaying the old cookie gets sign-in again.
		out := b.do("POST", "/console/sign-out", url.Values{"csrf": {csrfOf(t, page)}})
		if out.status != http.StatusSeeOther || out.header.Get("Location") != "/console/sign-in?signed-out=1" {
			t.Fatalf("sign-out: %d %q", out.status, out.header.Get("Location"))
		}
		replay := newBrowser(t, env.URL, "en")
		u, _ := url.Parse(env.URL + "/console/")
		replay.client.Jar.SetCookies(u, []*http.Cookie{{Name: "relais_session", Value: session.Value, Path: "/console"}})
		if r := replay.get("/console/definitions"); r.status != http.StatusSeeOther {
			t.Errorf("the signed-out session still opens pages: %d", r.status)
		}
		out = b.mustGet("/console/sign-in?signed-out=1", 200)
		if text(out, "signed-out") != "You are signed out." {
			t.Errorf("signed-out notice = %q", text(out, "signed-out"))
		}
		// Taken focus, so that a screen reader reads it (a status there
		// when the page loads is not announced).
		if _, focused := out.doc.Find(`[data-testid=signed-out]`).Attr("autofocus"); !focused {
			t.Error("the signed-out notice does not take the focus")
		}
	}
}

// TestSignedInAsElidesInFrench: the header names who is signed in; in
// French « que » elides before a name starting with a vowel, accented
// or not, and only then.
func TestSignedInAsElidesInFrench(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for name, want := range map[string][2]string{
		"Éloïse": {"Signed in as Éloïse (operator)", "Connecté en tant qu’Éloïse (opérateur)"},
		"Bruno":  {"Signed in as Bruno (operator)", "Connecté en tant que Bruno (opérateur)"},
	} {
		token := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": name, "role": "operator"}).JSON(t)["token"].(string)
		for i, lang := range []string{"en", "fr"} {
			r := signedIn(t, env.URL, lang, token).mustGet("/console/occurrences", 200)
			if got := text(r, "signed-in-as"); got != want[i] {
				t.Errorf("%s, %s: %q, want %q", name, lang, got, want[i])
			}
		}
	}
}

func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, tc := range []struct {
		name, token, lang, message string
		status                     int
	}{
		{"unknown", "rls_not-a-token", "en", "This token is unknown, revoked or expired.", http.StatusUnauthorized},
		// Not counted as a guess, and said as it is (console QA).
		{"empty", "  ", "fr", "Collez votre jeton dans le champ\u202f: il est vide.", http.StatusBadRequest},
	} {
		b := newBrowser(t, env.URL, tc.lang)
		r := b.signIn(tc.token)
		if r.status != tc.status || !strings.Contains(text(r, "sign-in-error"), tc.message) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, text(r, "sign-in-error"), tc.status, tc.message)
		}
		if strings.Contains(r.header.Get("Set-Cookie"), "relais_session=") {
			t.Errorf("%s: a session cookie was set", tc.name)
		}
		if r := b.get("/console/occurrences"); r.status != http.StatusSeeOther {
			t.Errorf("%s: pages open after a refused sign-in: %d", tc.name, r.status)
		}
	}
	// A consumer token cannot open the console, in either language.
	consumer := env.Consumer("c1")
	for lang, message := range map[string]string{
		"en": "A consumer token cannot open the console: it is a worker’s token, for the API.",
		"fr": "Un jeton de rôle consommateur ne peut pas ouvrir la console\u202f: c’est un jeton d’exécutant, pour l’API.",
	} {
		r := newBrowser(t, env.URL, lang).signIn(consumer)
		if r.status != http.StatusForbidden || !strings.Contains(text(r, "sign-in-error"), message) {
			t.Errorf("consumer sign-in (%s): %d %q, want 403 %q", lang, r.status, text(r, "sign-in-error"), message)
		}
		// What to sign in with is said once, by the page's introduction
		// (console QA: twice in a row).
		if n := strings.Count(r.doc.Text(), map[string]string{"en": "administrator token", "fr": "jeton d’opérateur"}[lang]); n != 1 {
			t.Errorf("consumer sign-in (%s): the tokens to use are said %d times", lang, n)
		}
	}
}

// Designers read the console's definitions and the processes they publish
// (DESIGN: "console (read)"); the operations pages stay for operators and
// administrators, as in the API.
func TestDesignersReadDefinitionsAndProcessesOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, lang := range []string{"en", "fr"} {
		b := newBrowser(t, f.env.URL, lang)
		if r := b.signIn(f.env.Designer); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/definitions" {
			t.Fatalf("%s designer sign-in: %d to %q, want 303 to /console/definitions", lang, r.status, r.header.Get("Location"))
		}
		if r := b.get("/console/"); r.header.Get("Location") != "/console/definitions" {
			t.Errorf("%s: /console/ sends a designer to %q, want /console/definitions", lang, r.header.Get("Location"))
		}
		r := b.mustGet("/console/definitions", http.StatusOK)
		if r.doc.Find(`[data-testid="nav-occurrences"]`).Length() != 0 || r.doc.Find(`[data-testid="nav-definitions"]`).Length() != 1 ||
			r.doc.Find(`[data-testid="nav-processes"]`).Length() != 1 || r.doc.Find(`[data-testid="nav-instances"]`).Length() != 0 {
			t.Errorf("%s: a designer's navigation must offer definitions and processes only", lang)
		}
		b.mustGet("/console/definitions/console_vault", http.StatusOK)
		b.mustGet("/console/processes", http.StatusOK)
		// The version's graph and nodes, without the way to its instances.
		v := b.mustGet("/console/processes/vault_flow/versions/1", http.StatusOK)
		if v.doc.Find(`[data-testid="graph-node"]`).Length() == 0 || v.doc.Find(`[data-testid="process-instances"]`).Length() != 0 ||
			v.doc.Find(`[data-testid="node-counts"]`).Length() != 0 || v.doc.Find(`[data-testid="node-counts-as-of"]`).Length() != 0 {
			t.Errorf("%s: a designer's process page must show the graph, and neither the way to its instances nor their counts", lang)
		}
		// Nor say there are counts to see.
		for _, page := range []response{v, b.mustGet("/console/processes", http.StatusOK)} {
			if strings.Contains(page.body, "counts") || strings.Contains(page.body, "décomptes") || strings.Contains(page.body, "occurrences are now") {
				t.Errorf("%s: a designer's process pages speak of counts they do not show", lang)
			}
		}
		for _, p := range f.pages() {
			if !strings.HasPrefix(p.path, "/console/occurrences") && !strings.HasPrefix(p.path, "/console/instances") {
				continue
			}
			r := b.get(p.path)
			if r.status != http.StatusForbidden {
				t.Errorf("%s: designer GET %s = %d, want 403", lang, p.path, r.status)
				continue
			}
			if strings.Contains(r.body, canarySensitive) || r.doc.Find(`a[href="/console/definitions"]`).Length() == 0 {
				t.Errorf("%s: the refusal of %s must show nothing of the page and lead back to definitions", lang, p.path)
			}
		}
		// Nor may a designer stop an instance, with a valid CSRF token.
		csrf := csrfOf(t, b.mustGet("/console/definitions", http.StatusOK))
		if r := b.do("POST", "/console/instances/"+f.runInst+"/stop", url.Values{"csrf": {csrf}}); r.status != http.StatusForbidden {
			t.Errorf("%s: designer POST stop = %d, want 403", lang, r.status)
		}
	}
	if got := f.env.Must(200, "GET", "/api/v1/instances/"+f.runInst, f.env.Operator, nil).JSON(t)["status"]; got != "running" {
		t.Errorf("instance status %v after designers tried to stop it, want running", got)
	}
}

// clock is a settable clock safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// ownConsole serves a console with a test clock on env's engine.
func ownConsole(t *testing.T, env *relaistest.Env) (string, *clock) {
	t.Helper()
	clk := &clock{now: time.Now()}
	c := console.New(slog.New(slog.DiscardHandler), env.Engine)
	console.SetClock(c, clk.Now)
	r := chi.NewRouter()
	r.Mount("/console", c.Handler())
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL, clk
}

func TestSessionsExpireAfterEightIdleHours(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	base, clk := ownConsole(t, env)
	b := signedIn(t, base, "en", env.Operator)
	// Activity keeps the session alive: the timeout counts idleness.
	for range 3 {
		clk.Add(3*time.Hour + 50*time.Minute)
		b.mustGet("/console/definitions", 200)
	}
	clk.Add(8*time.Hour + time.Second)
	r := b.get("/console/definitions")
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/console/sign-in") {
		t.Fatalf("after 8 idle hours: %d %q, want a redirect to sign-in", r.status, r.header.Get("Location"))
	}
	if !strings.Contains(r.header.Get("Set-Cookie"), "relais_session=;") {
		t.Errorf("the expired session cookie was not cleared: %q", r.header.Get("Set-Cookie"))
	}
	// Sign-in says the session ended, and brings the operator back.
	if want := "/console/sign-in?ended=1&next=%2Fconsole%2Fdefinitions"; r.header.Get("Location") != want {
		t.Errorf("after 8 idle hours: Location %q, want %q", r.header.Get("Location"), want)
	}
	if got := text(b.mustGet(r.header.Get("Location"), 200), "signed-out"); !strings.Contains(got, "Your session has ended") {
		t.Errorf("sign-in after the session ended says %q", got)
	}

	// An action posted once the session ended: sign-in says it was not
	// applied, and leads back to the page whose form was posted.
	late := signedIn(t, base, "fr", env.Operator)
	late.referer = "/console/instances/" + zeroID
	clk.Add(8*time.Hour + time.Second)
	r = late.do("POST", "/console/instances/"+zeroID+"/stop", url.Values{"csrf": {"x"}, "reason": {"typed at 3am"}})
	// The reason typed comes back with the page (see
	// TestAReasonTypedAsTheSessionEndedIsKept).
	if want := "/console/sign-in?ended=action&next=%2Fconsole%2Finstances%2F" + zeroID + "%3Freason%3Dtyped%2Bat%2B3am"; r.status != http.StatusSeeOther || r.header.Get("Location") != want {
		t.Fatalf("an action after the session ended: %d %q, want 303 %q", r.status, r.header.Get("Location"), want)
	}
	if got := text(late.mustGet(r.header.Get("Location"), 200), "signed-out"); !strings.Contains(got, "n’a pas été appliquée") {
		t.Errorf("sign-in (French) after an action on an ended session says %q", got)
	}
	// Signed out in another tab, the browser posts without the cookie:
	// the action is lost just the same, and sign-in says so (console QA).
	other := signedIn(t, base, "en", env.Operator)
	other.referer = "/console/instances/" + zeroID
	csrf := csrfOf(t, other.mustGet("/console/definitions", 200))
	other.do("POST", "/console/sign-out", url.Values{"csrf": {csrf}})
	r = other.do("POST", "/console/instances/"+zeroID+"/stop", url.Values{"csrf": {csrf}, "reason": {" "}})
	if want := "/console/sign-in?ended=action&next=%2Fconsole%2Finstances%2F" + zeroID; r.status != http.StatusSeeOther || r.header.Get("Location") != want {
		t.Errorf("an action after a sign-out in another tab: %d %q, want 303 %q", r.status, r.header.Get("Location"), want)
	}
	// Signing out of an ended session is not an action lost.
	gone := signedIn(t, base, "en", env.Operator)
	clk.Add(8*time.Hour + time.Second)
	if r := gone.do("POST", "/console/sign-out", url.Values{"csrf": {"x"}}); r.header.Get("Location") != "/console/sign-in?signed-out=1" {
		t.Errorf("sign-out after the session ended: Location %q, want the signed-out sign-in", r.header.Get("Location"))
	}
	signedIn(t, base, "en", env.Operator).mustGet("/console/definitions", 200)
}

// A reason typed in an action's confirmation posted once the session
// ended is shown again in that confirmation after sign-in: typing a long
// incident note again was the price of an expired session (console QA).
func TestAReasonTypedAsTheSessionEndedIsKept(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.CRMOnly()
	id := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	base, clk := ownConsole(t, env)
	b := signedIn(t, base, "fr", env.Operator)
	page := "/console/instances/" + id + "/stop"
	csrf := csrfOf(t, b.mustGet(page, 200))
	clk.Add(8*time.Hour + time.Second)
	b.referer = page
	reason := "Client « Acme » : arrêt demandé\nticket INC-42 & suivi"
	r := b.do("POST", page, url.Values{"csrf": {csrf}, "reason": {strings.ReplaceAll(reason, "\n", "\r\n")}})
	loc, err := url.Parse(r.header.Get("Location"))
	if r.status != http.StatusSeeOther || err != nil || loc.Path != "/console/sign-in" {
		t.Fatalf("the action after the session ended: %d %q", r.status, r.header.Get("Location"))
	}
	next := loc.Query().Get("next")
	again := signedIn(t, base, "fr", env.Operator).mustGet(next, 200)
	if got := again.doc.Find(`[data-testid=stop-reason]`).Text(); got != reason {
		t.Errorf("the confirmation after sign-in (%s) holds %q, want the reason typed, %q", next, got, reason)
	}
	// A bulk confirmation takes it back the same way.
	bulk := signedIn(t, base, "en", env.Operator).mustGet("/console/instances/bulk?action=stop&process=crm_only&"+url.Values{"reason": {reason}}.Encode(), 200)
	if got := bulk.doc.Find(`[data-testid=bulk-reason]`).Text(); got != reason {
		t.Errorf("the bulk confirmation holds %q, want %q", got, reason)
	}
}

// TestSessionsEndTwelveHoursAfterSignIn: a live page reloads itself every
// few seconds, each reload a use: a console left open on an unattended
// screen stayed signed in for ever (security QA). Twelve hours after its
// sign-in a session ends however used.
func TestSessionsEndTwelveHoursAfterSignIn(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	base, clk := ownConsole(t, env)
	b := signedIn(t, base, "en", env.Operator)
	for range 11 {
		clk.Add(time.Hour)
		b.mustGet("/console/health", 200)
	}
	clk.Add(59 * time.Minute)
	b.mustGet("/console/health", 200)
	clk.Add(time.Minute)
	if r := b.get("/console/health"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/console/sign-in?ended=1") {
		t.Fatalf("12 hours after sign-in, used every hour: %d %q, want the session ended", r.status, r.header.Get("Location"))
	}
	signedIn(t, base, "en", env.Operator).mustGet("/console/health", 200)
}

// TestRevokingTheTokenEndsItsSessions: the session stands for the token, so
// a revoked token stops opening pages at once, not eight hours later, and
// its sessions are deleted with it.
// (A revocation by SQL is followed within the notification's delay: see
// TestTokenRevokedBySQLIsForgotten.)
func TestRevokingTheTokenEndsItsSessions(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	b := signedIn(t, env.URL, "en", env.Operator)
	b.mustGet("/console/definitions", 200)
	signedIn(t, env.URL, "fr", env.Admin) // a session of another token
	sessions := func() (n int) {
		if err := env.Pool.QueryRow(t.Context(), "select count(*) from console_sessions").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := sessions(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	for _, tok := range env.Must(200, "GET", "/api/v1/tokens", env.Admin, nil).JSON(t)["items"].([]any) {
		if tok := tok.(map[string]any); tok["role"] == "operator" {
			env.Must(204, "DELETE", fmt.Sprintf("/api/v1/tokens/%v", tok["id"]), env.Admin, nil)
		}
	}
	// Its sessions go with it, in the revocation's transaction; the
	// other token's stays.
	if n := sessions(); n != 1 {
		t.Errorf("%d sessions after the revocation, want the admin's alone", n)
	}
	if r := b.get("/console/definitions"); r.status != http.StatusSeeOther {
		t.Fatalf("revoked token: %d, want a redirect to sign-in", r.status)
	}
	if r := b.signIn(env.Operator); r.status != http.StatusUnauthorized {
		t.Errorf("sign-in with the revoked token: %d, want 401", r.status)
	}
}

func TestFormsRequireTheirCSRFToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	env := f.env
	b := signedIn(t, env.URL, "en", env.Operator)
	stop := "/console/instances/" + f.runInst + "/stop"
	for name, form := range map[string]url.Values{"missing": {}, "wrong": {"csrf": {"forged"}}} {
		r := b.do("POST", stop, form)
		if r.status != http.StatusForbidden || text(r, "page-title") != "Form refused" {
			t.Errorf("stop with %s token: %d %q, want 403", name, r.status, text(r, "page-title"))
		}
		if r := b.do("POST", "/console/sign-out", form); r.status != http.StatusForbidden {
			t.Errorf("sign-out with %s token: %d, want 403", name, r.status)
		}
	}
	if got := env.Must(200, "GET", "/api/v1/instances/"+f.runInst, env.Operator, nil).JSON(t)["status"]; got != "running" {
		t.Fatalf("a refused form stopped the instance: %v", got)
	}
	// Another session's token is no better than a forged one.
	other := signedIn(t, env.URL, "en", env.Admin)
	if r := b.do("POST", stop, url.Values{"csrf": {csrfOf(t, other.mustGet(stop, 200))}}); r.status != http.StatusForbidden {
		t.Errorf("stop with another session's token: %d, want 403", r.status)
	}

	// Sign-in: the form's token must match the double-submit cookie.
	fresh := newBrowser(t, env.URL, "fr")
	form := fresh.mustGet("/console/sign-in", 200)
	// The wrong token differs from the right one in its first character
	// (a fixed "x" was the right one for one token in 64).
	right := csrfOf(t, form)
	wrong := "x" + right[1:]
	if right[0] == 'x' {
		wrong = "y" + right[1:]
	}
	for name, csrf := range map[string]string{"missing": "", "wrong": wrong} {
		r := fresh.do("POST", "/console/sign-in", url.Values{"csrf": {csrf}, "token": {env.Operator}})
		if r.status != http.StatusForbidden || text(r, "page-title") != "Formulaire refusé" {
			t.Errorf("sign-in with %s token: %d %q, want 403", name, r.status, text(r, "page-title"))
		}
	}
	noCookie := newBrowser(t, env.URL, "en")
	if r := noCookie.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(t, form)}, "token": {env.Operator}}); r.status != http.StatusForbidden {
		t.Errorf("sign-in without the CSRF cookie: %d, want 403", r.status)
	}
}

// A sign-in a browser posts from another origin is refused even with a
// matching cookie and token: a host of the same site can plant the
// cookie, and sign its victim into the attacker's session.
// TestOversizedFormsAreTooLarge: a form above the console's limit is 413
// saying so, nothing done; unread, its CSRF token read as missing and the
// operator was told the form came from another session (security QA).
func TestOversizedFormsAreTooLarge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	env := f.env
	b := signedIn(t, env.URL, "fr", env.Operator)
	stop := "/console/instances/" + f.runInst + "/stop"
	csrf := csrfOf(t, b.mustGet(stop, 200))
	r := b.do("POST", stop, url.Values{"csrf": {csrf}, "reason": {strings.Repeat("x", 70<<10)}})
	if r.status != http.StatusRequestEntityTooLarge || text(r, "page-title") != "Formulaire trop volumineux" || !strings.Contains(text(r, "error-message"), "dépasse 64 Kio") {
		t.Errorf("a 70 KiB stop form: %d %q %q, want 413 saying the form is larger than 64 KiB", r.status, text(r, "page-title"), text(r, "error-message"))
	}
	if got := env.Must(200, "GET", "/api/v1/instances/"+f.runInst, env.Operator, nil).JSON(t)["status"]; got != "running" {
		t.Fatalf("an oversized form stopped the instance: %v", got)
	}
	// Multipart, which the console's forms never send, is bounded and
	// told alike (it read as a form from another session).
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("csrf", csrf)
	_ = mw.WriteField("reason", strings.Repeat("x", 70<<10))
	_ = mw.Close()
	req, err := http.NewRequest("POST", env.URL+stop, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 70 KiB multipart stop form: %d, want 413", res.StatusCode)
	}
	// A small multipart form is read as any other. In a buffer of its
	// own: the transport may still be sending the refused body, the
	// server having answered before reading it all.
	var small bytes.Buffer
	mw = multipart.NewWriter(&small)
	_ = mw.WriteField("csrf", csrf)
	_ = mw.WriteField("reason", "multipart")
	_ = mw.Close()
	if req, err = http.NewRequest("POST", env.URL+stop, &small); err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if res, err = b.client.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := env.Must(200, "GET", "/api/v1/instances/"+f.runInst, env.Operator, nil).JSON(t)["status"]; got == "running" {
		t.Errorf("a multipart stop form with its token: %d, instance still running", res.StatusCode)
	}
	fresh := newBrowser(t, env.URL, "en")
	form := fresh.mustGet("/console/sign-in", 200)
	r = fresh.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(t, form)}, "token": {strings.Repeat("x", 70<<10)}})
	if r.status != http.StatusRequestEntityTooLarge || text(r, "page-title") != "Form too large" {
		t.Errorf("a 70 KiB sign-in: %d %q, want 413", r.status, text(r, "page-title"))
	}
	// Not signed in, the page leads back to the sign-in form, not to the
	// lists (which would only redirect there).
	if back, _ := r.doc.Find("main a").Last().Attr("href"); back != "/console/sign-in" {
		t.Errorf("the 413 sign-in page links back to %q, want /console/sign-in", back)
	}
}

func TestCrossOriginSignInIsRefused(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, c := range []struct {
		name, origin, site string
		want               int
	}{
		{"another origin", "https://evil.example", "", http.StatusForbidden},
		{"another site, said by the browser", "", "cross-site", http.StatusForbidden},
		{"the console's own origin", env.URL, "same-origin", http.StatusSeeOther},
	} {
		b := newBrowser(t, env.URL, "en")
		csrf := csrfOf(t, b.mustGet("/console/sign-in", 200))
		req, err := http.NewRequest("POST", env.URL+"/console/sign-in", strings.NewReader(url.Values{"csrf": {csrf}, "token": {env.Operator}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		res, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		signedIn := slices.ContainsFunc(res.Cookies(), func(ck *http.Cookie) bool { return ck.Name == "relais_session" && ck.Value != "" })
		if res.StatusCode != c.want || signedIn != (c.want == http.StatusSeeOther) {
			t.Errorf("%s: %d (session cookie %v), want %d", c.name, res.StatusCode, signedIn, c.want)
		}
	}
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	b := signedIn(t, env.URL, "en", env.Operator)
	anon := newBrowser(t, env.URL, "en")
	b.mustGet("/console/sign-in", 303) // signed in already: goes on
	page := anon.mustGet("/console/sign-in", 200)
	href, _ := page.doc.Find(`link[rel=stylesheet]`).Attr("href")
	responses := map[string]response{
		"sign-in":    page,
		"page":       b.get("/console/occurrences"),
		"stylesheet": anon.get(href),
		"redirect":   anon.get("/console/occurrences"),
		"not found":  b.get("/console/nowhere"),
		"forbidden":  b.do("POST", "/console/sign-out", url.Values{}),
		"language":   anon.get("/console/lang/fr?next=/console/sign-in"),
	}
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
	}
	for name, r := range responses {
		for h, v := range want {
			if got := r.header.Get(h); got != v {
				t.Errorf("%s: %s = %q, want %q", name, h, got, v)
			}
		}
	}
	if r := responses["stylesheet"]; r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/css") || !strings.Contains(r.body, ".table-wrap") {
		t.Errorf("stylesheet: %d %q", r.status, r.header.Get("Content-Type"))
	}
	if r := responses["page"]; r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("pages may be cached: Cache-Control %q", r.header.Get("Cache-Control"))
	}
	// No inline script or style anywhere, and nothing fetched from
	// another origin: the policy would block them anyway.
	for name, r := range responses {
		if r.doc == nil {
			continue
		}
		if n := r.doc.Find("script, style, [style]").Length(); n > 0 {
			t.Errorf("%s: %d inline scripts or styles", name, n)
		}
		r.doc.Find("[src], link[href]").Each(func(_ int, s *goquery.Selection) {
			for _, a := range []string{"src", "href"} {
				if v, ok := s.Attr(a); ok && !strings.HasPrefix(v, "/console/") {
					t.Errorf("%s: %s=%q is not served by the console", name, a, v)
				}
			}
		})
	}
	if r := responses["language"]; r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/sign-in" ||
		!strings.Contains(r.header.Get("Set-Cookie"), "lang=fr") {
		t.Errorf("language switch: %d %q %q", r.status, r.header.Get("Location"), r.header.Get("Set-Cookie"))
	}
	if r := anon.get("/console/lang/fr?next=https://evil.example/"); r.header.Get("Location") != "/console/occurrences" {
		t.Errorf("the language switch redirects off the console: %q", r.header.Get("Location"))
	}
	// A token in the sign-in page's address is not used, and said so.
	for lang, want := range map[string]string{"en": "A token in the address is not used", "fr": "Un jeton dans l’adresse n’est pas utilisé"} {
		if r := newBrowser(t, env.URL, lang).mustGet("/console/sign-in?token=rls_x", 200); !strings.HasPrefix(text(r, "sign-in-error"), want) {
			t.Errorf("sign-in with a token in its address (%s): %q, want %q…", lang, text(r, "sign-in-error"), want)
		}
	}
	// Nor is one carried from another page's address into sign-in's next.
	r := newBrowser(t, env.URL, "en").get("/console/instances?status=held&token=rls_x")
	if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || strings.Contains(loc, "rls_x") || !strings.Contains(loc, "address-token=1") {
		t.Errorf("a page with a token in its address: %d %q, want sign-in without the token, saying so", r.status, loc)
	}
	// Signed in already, the page goes on, saying so too.
	in := signedIn(t, env.URL, "en", env.Operator)
	if r := in.get("/console/sign-in?token=rls_x"); r.status != http.StatusSeeOther {
		t.Errorf("signed in, a sign-in with a token in its address: %d, want to go on", r.status)
	} else if got := text(in.get(r.header.Get("Location")), "flash"); !strings.HasPrefix(got, "A token in the address is not used: you are signed in already.") {
		t.Errorf("signed in, a sign-in with a token in its address then says %q", got)
	}
	if r := newBrowser(t, env.URL, "en").mustGet("/console/sign-in?token=", 200); text(r, "sign-in-error") != "" {
		t.Errorf("an empty token parameter: %q, want no notice", text(r, "sign-in-error"))
	}
	// A link shared in a language (?lang=fr) switches as the switcher
	// does, and serves the page again without the parameter, which no
	// filter takes; one in a language the console lacks is served as is.
	if r := b.get("/console/instances?lang=fr&status=held"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/instances?status=held" ||
		!strings.Contains(r.header.Get("Set-Cookie"), "lang=fr") {
		t.Errorf("?lang=fr: %d %q %q", r.status, r.header.Get("Location"), r.header.Get("Set-Cookie"))
	}
	if r := b.mustGet("/console/instances?status=held", 200); text(r, "page-title") != "Instances de processus" {
		t.Errorf("after ?lang=fr the page is in %q", text(r, "page-title"))
	}
	if r := b.get("/console/instances?lang=EN"); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Set-Cookie"), "lang=en") {
		t.Errorf("?lang=EN: %d %q", r.status, r.header.Get("Set-Cookie"))
	}
	if r := b.get("/console/instances?lang=xx"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/instances" || r.header.Get("Set-Cookie") != "" {
		t.Errorf("?lang=xx: %d %q %q", r.status, r.header.Get("Location"), r.header.Get("Set-Cookie"))
	}
}

func TestStopInstanceAfterConfirmation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	inst := b.mustGet("/console/instances/"+f.runInst, 200)
	href, _ := inst.doc.Find(`[data-testid=stop-instance]`).Attr("href")
	confirm := b.mustGet(href, 200)
	action, _ := confirm.doc.Find(`[data-testid=stop-form]`).Attr("action")
	method, _ := confirm.doc.Find(`[data-testid=stop-form]`).Attr("method")
	if method != "post" || action != "/console/instances/"+f.runInst+"/stop" {
		t.Fatalf("stop form: %s %s", method, action)
	}
	if got := f.env.Must(200, "GET", "/api/v1/instances/"+f.runInst, f.env.Operator, nil).JSON(t)["status"]; got != "running" {
		t.Fatalf("showing the confirmation stopped the instance: %v", got)
	}
	r := b.do("POST", action, url.Values{"csrf": {csrfOf(t, confirm)}, "reason": {"customer asked"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/instances/"+f.runInst {
		t.Fatalf("stop: %d %q %.300s", r.status, r.header.Get("Location"), r.body)
	}
	after := b.mustGet(r.header.Get("Location"), 200)
	if got := text(after, "instance-status"); got != "annulée" {
		t.Errorf("status after stop = %q", got)
	}
	if !strings.HasPrefix(text(after, "flash"), "Arrêt\u202f: l’instance") || count(after, "stop-instance") != 0 {
		t.Errorf("after stop: notice %q, stop link %d", text(after, "flash"), count(after, "stop-instance"))
	}
	if got := text(after, "attribution"); !strings.HasPrefix(got, "Arrêtée par operator le ") || !strings.HasSuffix(got, "«\u202fcustomer asked\u202f»") {
		t.Errorf("attribution %q, want who stopped it and why", got)
	}
	// The notice is shown once: a reload does not repeat it.
	if again := b.mustGet(r.header.Get("Location"), 200); count(again, "flash") != 0 {
		t.Errorf("the notice came back on reload: %q", text(again, "flash"))
	}
	if got := text(b.mustGet("/console/occurrences/"+f.available, 200), "status"); got != "annulée" {
		t.Errorf("open occurrence after stop = %q, want annulée", got)
	}
	// Stopping is offered only while running; a late POST is answered.
	if r := b.get(href); r.status != http.StatusSeeOther {
		t.Errorf("confirmation of a stopped instance: %d, want a redirect", r.status)
	}
	b.mustGet("/console/instances/"+f.completedInst+"/stop", 303)
	ended := b.do("POST", "/console/instances/"+f.completedInst+"/stop", url.Values{"csrf": {csrfOf(t, confirm)}, "reason": {"customer asked"}})
	if ended.status != http.StatusConflict || text(ended, "stop-error") == "" {
		t.Errorf("stopping a completed instance: %d %q", ended.status, text(ended, "stop-error"))
	}
}

// TestNoControlCompletesAnything checks every form of every page: the
// console can sign in and out, filter, compare, stop an instance, and (for
// an admin) reveal a sensitive value; no form may settle an occurrence.
func TestNoControlCompletesAnything(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Admin)
	allowed := regexp.MustCompile(`^/console/(sign-out|preferences(/reload)?|instances/bulk|instances/[0-9a-f-]{36}/(retry|abandon|stop)|occurrences/[0-9a-f-]{36}/reveal(#value-(inputs|outputs)-[0-9]+)?)$`)
	forms := 0
	for _, p := range f.allPages() {
		r := b.get(p.path)
		r.doc.Find("form").Each(func(_ int, s *goquery.Selection) {
			method, _ := s.Attr("method")
			action, _ := s.Attr("action")
			if strings.EqualFold(method, "post") {
				forms++
				if !allowed.MatchString(action) {
					t.Errorf("%s: a form posts to %s", p.name, action)
				}
			}
		})
		if strings.Contains(strings.ToLower(r.body), "/complete") {
			t.Errorf("%s links to a completion", p.name)
		}
	}
	if forms == 0 {
		t.Fatal("no form was checked")
	}
}

// An instance or occurrence page that finds nothing says where an ended
// one goes (retention), in both languages; other pages do not.
func TestMissingInstancePagesMentionRetention(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		for _, path := range []string{"/console/instances/" + zeroID, "/console/occurrences/" + zeroID} {
			if got := text(b.mustGet(path, 404), "error-message"); !strings.Contains(got, "RELAIS_RETENTION") || !strings.Contains(got, []string{"deleted", "supprimée"}[i]) {
				t.Errorf("%s %s: %q, want the retention mentioned", lang, path, got)
			}
		}
		if got := text(b.mustGet("/console/nowhere", 404), "error-message"); strings.Contains(got, "RELAIS_RETENTION") {
			t.Errorf("%s: an unknown page mentions retention: %q", lang, got)
		}
		// The short id a list shows, or a mangled link: never an id, so
		// nothing was deleted; told what an id is instead.
		for _, path := range []string{"/console/occurrences/f65131ab", "/console/instances/f65131ab"} {
			if got := text(b.mustGet(path, 404), "error-message"); strings.Contains(got, "RELAIS_RETENTION") || !strings.Contains(got, []string{"is not a whole id", "n’est pas un identifiant complet"}[i]) {
				t.Errorf("%s %s: %q, want it told it is no whole id", lang, path, got)
			}
		}
	}
}

// TestSessionsAreEveryReplicas: console sessions live in the database. A
// second console on it (another replica, or the first restarted) serves a
// session the first opened, shows the notice of a form posted to the
// first, keeps its paused reloads, and a sign-out on one ends the session
// on both (evaluator QA: a restart signed everyone out, and replicas
// behind a load balancer needed sticky routing).
func TestSessionsAreEveryReplicas(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	first := signedIn(t, env.URL, "en", env.Operator)
	secondURL, _ := ownConsole(t, env)
	// The cookie jar keys cookies by host, not port: the same browser.
	second := *first
	second.base = secondURL
	second.mustGet("/console/definitions", 200)

	page := first.mustGet("/console/health", 200)
	r := first.do("POST", "/console/preferences/reload", url.Values{"csrf": {csrfOf(t, page)}, "pause": {"1"}, "next": {"/console/health"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/health" {
		t.Fatalf("pause reloading: %d %q", r.status, r.header.Get("Location"))
	}
	shown := second.mustGet("/console/health", 200)
	if got := text(shown, "flash"); !strings.HasPrefix(got, "Reloading paused") {
		t.Errorf("the other replica shows the notice %q, want the pause's", got)
	}
	if n := shown.doc.Find(`meta[http-equiv=refresh]`).Length(); n != 0 {
		t.Error("the other replica reloads a page its session paused")
	}
	if got := text(first.mustGet("/console/health", 200), "flash"); got != "" {
		t.Errorf("the notice shown again on a reload: %q", got)
	}
	// The CSRF token is the session's, whichever replica gave the form.
	u, _ := url.Parse(env.URL + "/console/")
	kept := first.client.Jar.Cookies(u)
	r = second.do("POST", "/console/sign-out", url.Values{"csrf": {csrfOf(t, page)}})
	if r.header.Get("Location") != "/console/sign-in?signed-out=1" {
		t.Fatalf("sign-out on the other replica: %d %q", r.status, r.header.Get("Location"))
	}
	// The session itself is gone, not only this browser's cookie.
	first.client.Jar.SetCookies(u, kept)
	if r := first.get("/console/definitions"); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "ended=1") {
		t.Errorf("after a sign-out on the other replica, its cookie presented to the first: %d %q, want the sign-in of an ended session", r.status, r.header.Get("Location"))
	}
}
