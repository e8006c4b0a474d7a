package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// TestSignInThrottledPerAddress: ten failed sign-ins within a minute from
// one address get the next attempt a 429 page with Retry-After, even with
// a valid token; successful sign-ins do not count; the minute over, the
// address may try again.
func TestSignInThrottledPerAddress(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	base, clk := ownConsole(t, env)
	attempt := func(token string) response {
		t.Helper()
		b := newBrowser(t, base, "en") // a fresh one: a signed-in browser skips the form
		form := b.mustGet("/console/sign-in", 200)
		return b.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(t, form)}, "token": {token}})
	}
	for i := range 9 {
		if r := attempt("rls_wrong-" + strconv.Itoa(i)); r.status != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d: %d; want 401", i+1, r.status)
		}
	}
	// Successes in between are not failures: they neither count nor
	// reset the count.
	for range 5 {
		if r := attempt(env.Operator); r.status != http.StatusSeeOther {
			t.Fatalf("valid sign-in: %d; want 303", r.status)
		}
	}
	if r := attempt("rls_wrong-10"); r.status != http.StatusUnauthorized {
		t.Fatalf("10th failed sign-in: %d; want 401 (successes must not count)", r.status)
	}
	clk.Add(10 * time.Second)
	for _, token := range []string{"rls_wrong-11", env.Operator} {
		r := attempt(token)
		secs, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != http.StatusTooManyRequests || secs < 1 || secs > 50 {
			t.Fatalf("sign-in after 10 failures: %d Retry-After %q; want 429 with about 50 s", r.status, r.header.Get("Retry-After"))
		}
		if count(r, "sign-in-form") != 1 || text(r, "sign-in-error") == "" {
			t.Errorf("the 429 page shows no form or no explanation: %.400s", r.body)
		}
	}
	clk.Add(51 * time.Second)
	if r := attempt(env.Operator); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in once the minute is over: %d; want 303", r.status)
	}
}
