package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/forwarded"
)

// signInView is the sign-in form.
type signInView struct {
	Chrome     chrome
	Intro      string
	TokenLabel string
	TokenHint  string
	Submit     string
	Error      string
	Action     string
	CSRF       string
	Next       string
	SignedOut  string
}

// addressTokenParam tells sign-in that the page it comes from had a token
// in its address, left out of next.
const addressTokenParam = "address-token"

// addressToken reports whether the sign-in page's address holds a token,
// or says the page it comes from had one.
func addressToken(r *http.Request) bool {
	q := r.URL.Query()
	return q.Get("token") != "" || q.Get(addressTokenParam) == "1"
}

// addressTokenNotice says the token in the address was not used, and
// where the address put it.
func addressTokenNotice(ctx context.Context, signedIn bool) string {
	if signedIn {
		return T(ctx, "A token in the address is not used: you are signed in already. The address has put it in your browser’s history, and perhaps in a proxy’s logs: if others may read them, have the token revoked and use a new one.")
	}
	return T(ctx, "A token in the address is not used: paste it in the field below. The address has put it in your browser’s history, and perhaps in a proxy’s logs: if others may read them, have the token revoked and use a new one.")
}

// signInPage shows the form. A browser that is already signed in goes on.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if _, ok, _ := c.sessions.get(r.Context(), ck.Value, c.now()); ok {
			next := safeNext(r.URL.Query().Get("next"))
			if addressToken(r) {
				// Signed in, it goes on, but says so too (verifier QA).
				// (This page has no session in its context: the cookie's.)
				path, _, _ := strings.Cut(next, "?")
				c.sessions.setFlash(r.Context(), ck.Value, path, nil, flash{Text: addressTokenNotice(r.Context(), true), Warning: true})
			}
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	v := c.signInView(w, r)
	switch {
	case r.URL.Query().Get("signed-out") == "1":
		v.SignedOut = T(r.Context(), "You are signed out.")
	case r.URL.Query().Get("revoked") == "1":
		v.SignedOut = T(r.Context(), "The token you signed in with is revoked, and you are signed out: sign in with another one.")
	case r.URL.Query().Get("ended") == "action":
		v.SignedOut = T(r.Context(), "Your session had ended (inactivity, 12 hours since sign-in, a sign-out elsewhere, or a token revoked or expired), so your last action was not applied. Sign in again, then repeat it.")
	case r.URL.Query().Get("ended") == "1":
		v.SignedOut = T(r.Context(), "Your session has ended (inactivity, 12 hours since sign-in, a sign-out elsewhere, or a token revoked or expired). Sign in again.")
	}
	if addressToken(r) {
		// Not used, and said so: a bookmark holding it keeps a token in
		// the browser's history and the proxies' logs (security QA).
		v.Error = addressTokenNotice(r.Context(), false)
	}
	c.render(w, r, http.StatusOK, signInPage(v))
}

// signInView builds the form, issuing the double-submit CSRF cookie when
// the browser has none yet.
func (c *Console) signInView(w http.ResponseWriter, r *http.Request) signInView {
	ctx := r.Context()
	token := ""
	if ck, err := r.Cookie(signInCookie); err == nil && len(ck.Value) == 43 {
		token = ck.Value
	} else {
		token = randomToken()
		http.SetCookie(w, cookie(r, signInCookie, token, 0))
	}
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		next = r.PostFormValue("next")
	}
	return signInView{
		Chrome:     c.chrome(r, T(ctx, "Sign in"), ""),
		Intro:      T(ctx, "Sign in with an operator, designer or administrator token."),
		TokenLabel: T(ctx, "Token"),
		TokenHint:  T(ctx, "The token is checked once and never stored in your browser; a session cookie stands for it for up to 8 hours of inactivity, and 12 hours at most."),
		Submit:     T(ctx, "Sign in"),
		Action:     basePath + "/sign-in",
		CSRF:       token,
		Next:       safeNext(next),
	}
}

// signIn checks the token and opens a session (Post/Redirect/Get).
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !c.readForm(w, r) {
		return
	}
	want := ""
	if ck, err := r.Cookie(signInCookie); err == nil {
		want = ck.Value
	}
	if !sameToken(r.PostFormValue(csrfField), want) {
		c.forbiddenForm(w, r)
		return
	}
	client := forwarded.Of(r).Addr
	if wait, blocked := c.throttle.blocked(client, c.now()); blocked {
		secs := int(wait.Seconds() + 0.999)
		c.logger.Warn("console: sign-in throttled", "client", client, "retry_after", secs)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		v := c.signInView(w, r)
		v.Error = T(ctx, "Too many failed sign-ins from your address. Try again in %d seconds.", secs)
		c.render(w, r, http.StatusTooManyRequests, signInPage(v))
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if scheme, rest, ok := strings.Cut(token, " "); ok && strings.EqualFold(scheme, "Bearer") {
		// Pasted from a curl command or a header (newcomer QA: refused
		// as unknown).
		token = strings.TrimSpace(rest)
	}
	if token == "" {
		// Nothing to guess with: no failure counted (console QA).
		v := c.signInView(w, r)
		v.Error = T(ctx, "Paste your token in the field: it is empty.")
		c.render(w, r, http.StatusBadRequest, signInPage(v))
		return
	}
	p, err := auth.Authenticate(ctx, c.eng.LookupToken, token)
	if err != nil {
		if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized {
			c.throttle.fail(client, c.now())
			c.logger.Info("console: sign-in refused", "client", client)
			v := c.signInView(w, r)
			// Expired is said with the rest: an operator whose token
			// expired asks for a new one rather than suspect a typo.
			v.Error = T(ctx, "This token is unknown, revoked or expired.")
			c.render(w, r, http.StatusUnauthorized, signInPage(v))
			return
		}
		c.serverError(w, r, err)
		return
	}
	if !canOpenConsole(p.Role) {
		v := c.signInView(w, r)
		v.Error = T(ctx, "A %s token cannot open the console: it is a worker’s token, for the API.", roleLabel(ctx, p.Role))
		c.render(w, r, http.StatusForbidden, signInPage(v))
		return
	}
	// A fresh id on every sign-in: an id planted before sign-in is never
	// promoted (no session fixation).
	id, err := c.sessions.create(ctx, auth.Hash(token), c.now())
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	http.SetCookie(w, cookie(r, sessionCookie, id, 0))
	http.SetCookie(w, cookie(r, signInCookie, "", -1))
	c.logger.Info("console: signed in", "name", p.Name, "role", p.Role)
	next := safeNext(r.PostFormValue("next"))
	if next == homePath {
		next = homeFor(p.Role)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends the session (its CSRF token was checked by requireSession).
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	// Not said signed out while the session lives on (the cookie gone
	// from this browser, but not the session from the database).
	if err := c.sessions.delete(r.Context(), currentOf(r.Context()).id); err != nil {
		c.serverError(w, r, err)
		return
	}
	http.SetCookie(w, cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, basePath+"/sign-in?signed-out=1", http.StatusSeeOther)
}
