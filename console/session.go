package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/relais/relais/internal/auth"
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
	// sweepEvery bounds how often expired sessions are purged.
	sweepEvery = time.Minute
)

// session is one signed-in browser.
type session struct {
	principal auth.Principal
	// tokenHash is the stored form of the token signed in with (not the
	// token): every request looks it up again so that revoking the token
	// ends its console sessions at once.
	tokenHash []byte
	csrf      string
	expires   time.Time
	// ends is maxSessionAge after the sign-in: expires never passes it.
	ends time.Time
	// flash is a notice for the next page this session opens: what a
	// form did, shown once after its redirect (Post/Redirect/Get).
	flash flash
	// reloadPaused keeps live pages from reloading themselves until the
	// operator resumes (or saves the display settings): a reload empties
	// what was typed but not applied, and no script can tell that someone
	// is typing.
	reloadPaused bool
}

// flash is what a form did, for the page its redirect opens. The zero
// flash shows nothing.
type flash struct {
	// Text says what happened.
	Text string
	// Warning marks an action that did not happen (it no longer applied,
	// someone else acted first): shown as a warning, not a success.
	Warning bool
	// Reason is the reason typed for an action that did not happen, shown
	// under NotRecorded (which says it was not recorded); empty when there
	// is none.
	Reason, NotRecorded string
	// page is the path of the page the notice is for (its form's
	// redirect): another page opened meanwhile, in another tab or instead
	// of following the redirect, does not show it. query is its query
	// string's parameters, when the redirect has some: the audit log of
	// one bulk action does not show another's notice (on-call QA).
	page  string
	query url.Values
}

// sessionStore keeps sessions in this replica's memory, keyed by the
// SHA-256 of the session id so that the store itself holds nothing a
// browser could present.
//
// The store is per replica: with several replicas behind a load balancer,
// either route the console with sticky sessions or accept that an operator
// whose request lands on another replica signs in again. Restarting a
// replica signs everyone out of it, which is also how an operator would
// revoke all sessions in an emergency.
type sessionStore struct {
	mu        sync.Mutex
	sessions  map[[32]byte]*session
	lastSweep time.Time
}

func newSessionStore() *sessionStore {
	return &sessionStore{sessions: map[[32]byte]*session{}}
}

// randomToken returns 256 random bits, base64url encoded.
func randomToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program rather than return an error
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func sessionKey(id string) [32]byte { return sha256.Sum256([]byte(id)) }

// create starts a session for p and returns its id.
func (s *sessionStore) create(p auth.Principal, tokenHash []byte, now time.Time) (string, session) {
	id := randomToken()
	sess := &session{principal: p, tokenHash: tokenHash, csrf: randomToken(), expires: now.Add(idleTimeout), ends: now.Add(maxSessionAge)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	s.sessions[sessionKey(id)] = sess
	return id, *sess
}

// get returns the live session of id and pushes its expiry back: the
// timeout counts idleness, up to maxSessionAge after the sign-in.
func (s *sessionStore) get(id string, now time.Time) (session, bool) {
	if id == "" {
		return session{}, false
	}
	k := sessionKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[k]
	if !ok {
		return session{}, false
	}
	if !now.Before(sess.expires) {
		delete(s.sessions, k)
		return session{}, false
	}
	sess.expires = now.Add(idleTimeout)
	if sess.expires.After(sess.ends) {
		sess.expires = sess.ends
	}
	return *sess, true
}

// setFlash keeps a notice for the page at path (without its query) that
// the session of id opens next.
func (s *sessionStore) setFlash(id, path string, query url.Values, msg flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[sessionKey(id)]; ok {
		msg.page, msg.query = path, query
		sess.flash = msg
	}
}

// takeFlash returns the session's notice if it is for the page at path
// (with the redirect's query parameters, if it had some), and forgets it:
// a reload does not show it again.
func (s *sessionStore) takeFlash(id, path string, query url.Values) flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[sessionKey(id)]
	if !ok || sess.flash.page != path || len(sess.flash.query) > 0 && !maps.EqualFunc(sess.flash.query, query, slices.Equal) {
		return flash{}
	}
	msg := sess.flash
	sess.flash = flash{}
	return msg
}

// setReloadPaused pauses or resumes the auto-reload of the session of
// id's live pages.
func (s *sessionStore) setReloadPaused(id string, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[sessionKey(id)]; ok {
		sess.reloadPaused = paused
	}
}

// delete ends the session of id, if any.
func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionKey(id))
}

// sweepLocked drops expired sessions at most once a minute, so that
// abandoned sessions do not accumulate without a background goroutine.
func (s *sessionStore) sweepLocked(now time.Time) {
	if now.Sub(s.lastSweep) < sweepEvery {
		return
	}
	s.lastSweep = now
	for k, sess := range s.sessions {
		if !now.Before(sess.expires) {
			delete(s.sessions, k)
		}
	}
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
