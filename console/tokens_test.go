package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/relais/relais/internal/relaistest"
)

// TestTokensPage: admins see the staff tokens (not consumers') in both
// languages and revoke one after a confirmation, by a POST carrying the
// session's CSRF token; the token is refused at once. Operators get no
// such page, and the last usable admin token is kept.
func TestTokensPage(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	env.Consumer("crm-sync", key)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Admin)
		page := b.mustGet("/console/tokens", 200)
		if got, want := text(page, "page-title"), []string{"Tokens", "Jetons"}[i]; got != want {
			t.Errorf("%s: title %q, want %q", lang, got, want)
		}
		if n := count(page, "token-row"); n != 3 {
			t.Errorf("%s: %d token rows, want 3 (admin, designer, operator; no consumer token)", lang, n)
		}
		// A cursor the console did not make lists nothing rather than
		// the first page under a second page's links.
		if bad := b.mustGet("/console/tokens?after=-1", 400); count(bad, "token-row") != 0 || text(bad, "filter-errors") == "" {
			t.Errorf("%s: after=-1 listed %d tokens, errors %q", lang, count(bad, "token-row"), text(bad, "filter-errors"))
		} else {
			// Said first in the title and focused, so that a screen
			// reader reads why the list is empty (a11y QA).
			if _, ok := bad.doc.Find(`[data-testid=filter-errors]`).Attr("autofocus"); !ok {
				t.Errorf("%s: the filter's error does not take the focus", lang)
			}
			if title, plain := bad.doc.Find("title").Text(), page.doc.Find("title").Text(); !strings.Contains(title, plain) || title == plain || strings.HasPrefix(plain, "Err") {
				t.Errorf("%s: title %q of the refusal, %q of the list: want the refusal's to say the error before the list's", lang, title, plain)
			}
		}
		// A list like the others: a caption, a name over every column
		// (the revoke buttons' too), each value labelled for the cards
		// it becomes on a phone.
		table := page.doc.Find(`table[data-testid=tokens]`)
		if !table.HasClass("cards") || strings.TrimSpace(table.Find("caption").Text()) == "" {
			t.Errorf("%s: the tokens table is not a captioned list of cards", lang)
		}
		table.Find("thead th").Each(func(i int, th *goquery.Selection) {
			if strings.TrimSpace(th.Text()) == "" {
				t.Errorf("%s: the tokens table's column %d has no header", lang, i+1)
			}
		})
		if n := table.Find("tbody td:not([data-label])").Length(); n != 0 {
			t.Errorf("%s: %d token cells without a data-label", lang, n)
		}
		if count(page, "nav-tokens") != 1 {
			t.Errorf("%s: no Tokens entry in an admin's navigation", lang)
		}
		forbidden := []string{"Created", "Last used", "Expires", "Revoke", "never", "Tokens"}
		if lang == "en" {
			forbidden = []string{"Jetons", "Créé", "Dernière utilisation", "Révoquer", "jamais"}
		}
		for _, w := range forbidden {
			if containsWord(visibleText(page.doc), w) {
				t.Errorf("%s tokens page shows %q", lang, w)
			}
		}
	}

	op := signedIn(t, env.URL, "en", env.Operator)
	if r := op.get("/console/tokens"); r.status != http.StatusForbidden {
		t.Errorf("an operator opening the tokens page: %d, want 403", r.status)
	}
	if count(op.mustGet("/console/definitions", 200), "nav-tokens") != 0 {
		t.Error("an operator's navigation offers tokens")
	}

	b := signedIn(t, env.URL, "en", env.Admin)
	revokeHref := func(name string) string {
		t.Helper()
		href := ""
		b.mustGet("/console/tokens", 200).doc.Find(`[data-testid=token-row]`).Each(func(_ int, s *goquery.Selection) {
			if strings.Fields(s.Find(`[data-testid=token-name]`).Text())[0] == name {
				href, _ = s.Find(`[data-testid=revoke-token]`).Attr("href")
			}
		})
		if href == "" {
			t.Fatalf("no revoke link for token %s", name)
		}
		return href
	}
	href := revokeHref("designer")
	confirm := b.mustGet(href, 200)
	if count(confirm, "revoke-form") != 1 || !strings.Contains(text(confirm, "revoke-question"), "designer") {
		t.Fatalf("confirmation page: %.500s", confirm.body)
	}
	env.Must(200, "GET", "/api/v1/whoami", env.Designer, nil)
	if r := b.do("POST", href, url.Values{"csrf": {"forged"}}); r.status != http.StatusForbidden {
		t.Errorf("revoke without the session's CSRF token: %d, want 403", r.status)
	}
	env.Must(200, "GET", "/api/v1/whoami", env.Designer, nil)
	r := b.do("POST", href, url.Values{"csrf": {csrfOf(t, confirm)}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/tokens" {
		t.Fatalf("revoke: %d Location %q", r.status, r.header.Get("Location"))
	}
	if res := env.Do("GET", "/api/v1/whoami", env.Designer, nil); res.Status != 401 {
		t.Errorf("the revoked token's next request: %d, want 401", res.Status)
	}
	after := b.mustGet("/console/tokens", 200)
	if count(after, "token-row") != 2 || !strings.Contains(text(after, "flash"), "designer") {
		t.Errorf("after revoking: %d rows, notice %q; want 2 and a notice naming the token", count(after, "token-row"), text(after, "flash"))
	}
	if again := b.mustGet("/console/tokens", 200); text(again, "flash") != "" {
		t.Errorf("the notice shows again on reload: %q", text(again, "flash"))
	}

	own := revokeHref("admin")
	confirm = b.mustGet(own, 200)
	// Said before anyone confirms, and not offered.
	if text(confirm, "revoke-error") == "" || count(confirm, "confirm-revoke") != 0 {
		t.Errorf("the last admin token's confirmation: %q, %d buttons; want it said and no button", text(confirm, "revoke-error"), count(confirm, "confirm-revoke"))
	}
	r = b.do("POST", own, url.Values{"csrf": {csrfOf(t, confirm)}})
	if r.status != http.StatusConflict || text(r, "revoke-error") == "" || count(r, "confirm-revoke") != 0 {
		t.Errorf("revoking the last admin token: %d %q, want 409 with an explanation and no button", r.status, text(r, "revoke-error"))
	}
	env.Must(200, "GET", "/api/v1/whoami", env.Admin, nil)

	// Another admin token, revoking itself: signed out, and told so.
	second := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "second", "role": "admin"}).JSON(t)["token"].(string)
	b2 := signedIn(t, env.URL, "en", second)
	b = b2
	self := revokeHref("second")
	confirm = b2.mustGet(self, 200)
	r = b2.do("POST", self, url.Values{"csrf": {csrfOf(t, confirm)}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/sign-in?revoked=1" {
		t.Fatalf("revoking one's own token: %d to %q, want 303 to the sign-in page", r.status, r.header.Get("Location"))
	}
	if got := text(b2.mustGet("/console/sign-in?revoked=1", 200), "signed-out"); got != "The token you signed in with is revoked, and you are signed out: sign in with another one." {
		t.Errorf("after revoking one's own token, the sign-in page says %q", got)
	}
	if res := env.Do("GET", "/api/v1/whoami", second, nil); res.Status != 401 {
		t.Errorf("the revoked token: %d, want 401", res.Status)
	}
}
