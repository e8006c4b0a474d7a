package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/forwarded"
)

const (
	// sessionCookie carries the random session id.
	sessionCookie = "relais_session"
	// signInCookie carries the sign-in form's CSRF token (double submit):
	// before sign-in there is no session to keep a token in.
	signInCookie = "relais_sign_in"
	// csrfField is the hidden form field every POST carries.
	csrfField = "csrf"
	// idleTimeout ends a session nobody used for that long.
	idleTimeout = 8 * time.Hour
	// maxSessionAge ends a session that long after its sign-in, however
	// used: a live page reloads itself every few seconds, and each reload
	// is a use, so a console left open on an unattended screen would
	// otherwise stay signed in for ever.
	maxSessionAge = 12 * time.Hour
)

// session is one signed-in browser.
type session struct {
	// tokenHash is the stored form of the token signed in with (not the
	// token): every request looks it up again so that revoking the token
	// ends its console sessions at once.
	tokenHash []byte
	csrf      string
	// reloadPaused keeps live pages from reloading themselves until the
	// operator resumes (or saves the display settings): a reload empties
	// what was typed but not applied, and no script can tell that someone
	// is typing.
	reloadPaused bool
	// hasFlash: a notice waits for a page (see flash).
	hasFlash bool
}

// flash is what a form did, for the page its redirect opens. The zero
// flash shows nothing.
type flash struct {
	// Text says what happened.
	Text string `json:"text"`
	// Warning marks an action that did not happen (it no longer applied,
	// someone else acted first): shown as a warning, not a success.
	Warning bool `json:"warning,omitempty"`
	// Reason is the reason typed for an action that did not happen, shown
	// under NotRecorded (which says it was not recorded); empty when there
	// is none.
	Reason      string `json:"reason,omitempty"`
	NotRecorded string `json:"not_recorded,omitempty"`
	// Page is the path of the page the notice is for (its form's
	// redirect): another page opened meanwhile, in another tab or instead
	// of following the redirect, does not show it. Query is its query
	// string, when the redirect has one (url.Values.Encode's): the audit
	// log of one bulk action does not show another's notice (on-call QA).
	Page  string `json:"page"`
	Query string `json:"query,omitempty"`
}

// sessionStore keeps the console's sessions in the database (see
// engine.ConsoleSession), keyed by the SHA-256 of the session id so that
// the store itself holds nothing a browser could present: any replica
// serves any session, and a restart ends none. Ending every session at
// once is revoking the tokens they were opened with.
type sessionStore struct {
	eng    *engine.Engine
	logger *slog.Logger
}

func newSessionStore(eng *engine.Engine, logger *slog.Logger) *sessionStore {
	return &sessionStore{eng: eng, logger: logger}
}

// randomToken returns 256 random bits, base64url encoded.
func randomToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program rather than return an error
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func sessionKey(id string) []byte {
	k := sha256.Sum256([]byte(id))
	return k[:]
}

// create starts a session for the token of tokenHash and returns its id.
func (s *sessionStore) create(ctx context.Context, tokenHash []byte, now time.Time) (string, error) {
	id := randomToken()
	err := s.eng.CreateConsoleSession(ctx, sessionKey(id), tokenHash, randomToken(), now, now.Add(idleTimeout), now.Add(maxSessionAge))
	return id, err
}

// get returns the live session of id and pushes its expiry back: the
// timeout counts idleness, up to maxSessionAge after the sign-in.
func (s *sessionStore) get(ctx context.Context, id string, now time.Time) (session, bool, error) {
	if id == "" {
		return session{}, false, nil
	}
	sess, ok, err := s.eng.ConsoleSession(ctx, sessionKey(id), now, now.Add(idleTimeout))
	if !ok || err != nil {
		return session{}, false, err
	}
	return session{tokenHash: sess.TokenHash, csrf: sess.CSRF, reloadPaused: sess.ReloadPaused, hasFlash: sess.HasFlash}, true, nil
}

// setFlash keeps a notice for the page at path (without its query) that
// the session of id opens next. Losing it loses words, not the action it
// tells of: a failure is logged.
func (s *sessionStore) setFlash(ctx context.Context, id, path string, query url.Values, msg flash) {
	msg.Page, msg.Query = path, query.Encode()
	b, err := json.Marshal(msg)
	if err == nil {
		err = s.eng.SetConsoleFlash(ctx, sessionKey(id), b)
	}
	if err != nil {
		s.logger.Warn("console: the notice of a form's outcome could not be kept", "page", path, "err", err)
	}
}

// takeFlash returns the session's notice if it is for the page at path
// (with the redirect's query parameters, if it had some), and forgets it:
// a reload does not show it again.
func (s *sessionStore) takeFlash(ctx context.Context, id, path string, query url.Values) flash {
	b, err := s.eng.TakeConsoleFlash(ctx, sessionKey(id), path, query.Encode())
	var msg flash
	if err == nil && b != nil {
		err = json.Unmarshal(b, &msg)
	}
	if err != nil {
		s.logger.Warn("console: the notice of a form's outcome could not be read", "page", path, "err", err)
		return flash{}
	}
	return msg
}

// setReloadPaused pauses or resumes the auto-reload of the session of
// id's live pages.
func (s *sessionStore) setReloadPaused(ctx context.Context, id string, paused bool) error {
	return s.eng.SetConsoleReloadPaused(ctx, sessionKey(id), paused)
}

// delete ends the session of id, if any.
func (s *sessionStore) delete(ctx context.Context, id string) error {
	return s.eng.DeleteConsoleSession(ctx, sessionKey(id))
}

// cookie returns a console cookie: HttpOnly (scripts never need it),
// SameSite=Strict (another site's form or link never carries it), scoped to
// /console, and Secure whenever the browser spoke HTTPS: to Relais itself,
// or to a proxy of RELAIS_TRUSTED_PROXIES that says so in
// X-Forwarded-Proto (anyone else's header is ignored).
func cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: basePath, MaxAge: maxAge,
		HttpOnly: true, Secure: forwarded.IsHTTPS(r), SameSite: http.SameSiteStrictMode}
}

// preferenceCookie is cookie for a preference that authorizes nothing (the
// language): SameSite=Lax, so that following a link to the console from
// elsewhere already shows the chosen language.
func preferenceCookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	c := cookie(r, name, value, maxAge)
	c.SameSite = http.SameSiteLaxMode
	return c
}

// sameToken compares a submitted CSRF token with the expected one in
// constant time; an empty expected token never matches.
func sameToken(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
