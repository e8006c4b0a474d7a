// Package console is the operators' web console: server-rendered templ
// pages over the engine's observation methods, in English and French, that
// work without JavaScript. It observes, and changes only what operators
// decide on incidents (DESIGN §12): retry or abandon a held instance, stop a
// running or held one, one at a time or every instance a filter matches,
// each with a reason recorded in the audit log. Nothing in it fabricates a
// completion. Admins may also reveal a sensitive value, which changes
// nothing but the audit log that records it.
//
// Each page sits next to its handler (occurrence_list.go and
// occurrence_list.templ); handlers build a view model whose strings are
// already translated, because gotext only extracts message literals passed
// to T at Go call sites.
package console

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/internal/snapshot"
)

// basePath is where server.go mounts the console; links and cookies use it.
const basePath = "/console"

// homePath is where a signed-in operator lands: the operations view.
const homePath = basePath + "/occurrences"

// Paths of the operations pages.
const (
	healthPath    = basePath + "/health"
	instancesPath = basePath + "/instances"
	processesPath = basePath + "/processes"
	auditPath     = basePath + "/audit"
	searchPath    = basePath + "/search"
)

// definitionsPath is where a designer lands: designers read definitions
// (DESIGN: "console (read)"), while occurrences and instances are for
// operators, as in the API.
const definitionsPath = basePath + "/definitions"

// homeFor is the landing page of a role.
func homeFor(role auth.Role) string {
	if role == auth.RoleDesigner {
		return definitionsPath
	}
	return homePath
}

// canOpenConsole reports whether a role may sign in to the console.
func canOpenConsole(role auth.Role) bool {
	return auth.Allowed(role, auth.RoleOperator) || role == auth.RoleDesigner
}

// requireOperator guards the operations pages (occurrences, instances):
// a designer's session gets a page saying what its role may read.
func (c *Console) requireOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := auth.FromContext(r.Context()); !ok || !auth.Allowed(p.Role, auth.RoleOperator) {
			ctx := r.Context()
			c.errorPage(w, r, http.StatusForbidden, T(ctx, "Not allowed"),
				T(ctx, "Your role can read definitions and processes only: external tasks and process instances are for operators and administrators."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxFormBytes bounds a console form body; the largest form holds a token.
const maxFormBytes = 64 << 10

// Console serves the operators' web console.
type Console struct {
	logger   *slog.Logger
	eng      *engine.Engine
	sessions *sessionStore
	throttle *signInThrottle
	menus    *snapshot.Cache[filterMenus]
	// nodeCounts are each process version's occurrences per node.
	nodeCounts *versionCounts
	// now is the clock sessions expire by; tests move it.
	now func() time.Time
	// countsOf reads the counts by definition and status
	// (eng.OccurrenceCounts); tests slow it down.
	countsOf func(context.Context) ([]engine.OccurrenceCount, time.Time, error)
	// bulkCost is what a bulk action takes per instance, to warn of a
	// long one (tests make it longer).
	bulkCost time.Duration
}

// New returns the console on eng. A nil logger discards.
func New(logger *slog.Logger, eng *engine.Engine) *Console {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{logger: logger, eng: eng, sessions: newSessionStore(eng, logger), throttle: newSignInThrottle(), now: time.Now,
		menus: snapshot.New("console filter menus", loadMenus(eng), logger, menusTTL).QuietWhen(engine.PoolClosed)}
	c.nodeCounts = &versionCounts{eng: eng, c: c}
	c.countsOf = eng.FreshOccurrenceCounts
	c.bulkCost = bulkCostPerInstance
	return c
}

// contentSecurityPolicy allows nothing but the console's own stylesheet,
// images and forms: no script at all, no inline style, no framing.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every console response carries,
// redirects and errors included.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

type sessionCtxKey struct{}

// current is the signed-in session of a request, as handlers need it.
type current struct {
	id   string
	csrf string
	// reloadPaused: live pages do not reload themselves (the operator
	// paused them).
	reloadPaused bool
	// hasFlash: a notice waits for a page; without one no page asks.
	hasFlash bool
}

func currentOf(ctx context.Context) current {
	s, _ := ctx.Value(sessionCtxKey{}).(current)
	return s
}

// requireSession admits requests of a live session whose token is still
// valid, and checks the CSRF token of every POST. Others go to sign-in.
func (c *Console) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id string
		if ck, err := r.Cookie(sessionCookie); err == nil {
			id = ck.Value
		}
		sess, ok, err := c.sessions.get(r.Context(), id, c.now())
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		var principal auth.Principal
		if ok {
			p, _, err := c.eng.LookupToken(r.Context(), sess.tokenHash)
			switch {
			case err == nil && canOpenConsole(p.Role):
				principal = p
			case err == nil || isUnknownToken(err):
				// Revoked since sign-in: the session ends with the token
				// (which every request looks up: a failed delete leaves a
				// row nobody can use, purged once expired).
				if err := c.sessions.delete(r.Context(), id); err != nil {
					c.logger.Warn("console: a revoked token's session could not be deleted", "err", err)
				}
				ok = false
			default:
				c.serverError(w, r, err)
				return
			}
		}
		if !ok {
			if id != "" {
				http.SetCookie(w, cookie(r, sessionCookie, "", -1))
			}
			redirectToSignIn(w, r, id != "")
			return
		}
		// The session is the request's before its form is read: a form
		// refused is answered on a page of the operator's session.
		ctx := auth.WithPrincipal(r.Context(), principal)
		ctx = context.WithValue(ctx, sessionCtxKey{}, current{id: id, csrf: sess.csrf, reloadPaused: sess.reloadPaused, hasFlash: sess.hasFlash})
		r = r.WithContext(ctx)
		if r.Method == http.MethodPost {
			if !c.readForm(w, r) {
				return
			}
			if !sameToken(r.PostFormValue(csrfField), sess.csrf) {
				c.forbiddenForm(w, r)
				return
			}
		}
		if field, bad := unstorableField(r); bad {
			c.errorPage(w, r, http.StatusBadRequest, T(ctx, "Invalid request"),
				T(ctx, "The field “%s” holds a NUL character or bytes that are not UTF-8 text: correct it and try again.", field))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unstorableField names the first field of r (its address, a query
// parameter, a form field) holding a NUL character or bytes that are not
// UTF-8: PostgreSQL refuses such text, and a filter or a reason holding
// one would otherwise fail its page with a 500.
func unstorableField(r *http.Request) (string, bool) {
	bad := func(s string) bool { return httpjson.UnstorableText(s) != "" }
	if bad(r.URL.Path) {
		return "path", true
	}
	// A POST's form was read for its CSRF token already; a GET's is its
	// query. A malformed query stays what the handlers make of it (its
	// readable parameters): only the values read are checked.
	_ = r.ParseForm()
	names := slices.Sorted(maps.Keys(r.Form))
	for _, name := range names {
		if bad(name) || slices.ContainsFunc(r.Form[name], bad) {
			return httpjson.PrintableName(name), true
		}
	}
	return "", false
}

// redirectToSignIn sends the browser to sign-in, remembering the page it
// asked for (a GET), or the page whose form it posted (its Referer, when a
// console page). ended says the browser had a session that is gone
// (expired, signed out elsewhere, its token revoked, the replica
// restarted): sign-in then says so, and that a posted action was not
// applied, rather than greeting the operator as if nothing happened.
func redirectToSignIn(w http.ResponseWriter, r *http.Request, ended bool) {
	if r.Method == http.MethodPost && r.URL.Path == basePath+"/sign-out" {
		// Signing out of a session that had ended is done, not lost.
		http.Redirect(w, r, basePath+"/sign-in?signed-out=1", http.StatusSeeOther)
		return
	}
	q := url.Values{}
	switch {
	case r.Method == http.MethodGet && r.URL.Path != basePath && r.URL.Path != basePath+"/":
		next := r.URL.RequestURI()
		if r.URL.Query().Has("token") {
			// A token in the address is not carried on into the next
			// one (verifier QA), and sign-in says where it went.
			next = withoutParam(r.URL, "token")
			q.Set(addressTokenParam, "1")
		}
		q.Set("next", next)
	case r.Method == http.MethodPost:
		if from := postedFrom(r); from != "" {
			q.Set("next", withDraftReason(w, r, from))
		}
	}
	switch {
	case r.Method == http.MethodPost:
		// A form posted without a session was made by one: signed out
		// in another tab, the browser dropped its cookie with it (console
		// QA: the action was lost without a word).
		q.Set("ended", "action")
	case ended:
		q.Set("ended", "1")
	}
	target := basePath + "/sign-in"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// draftReasonParam carries, in the address of an action's confirmation,
// the reason typed in its form when it was posted without a session: the
// page shows it again after sign-in, where the operator typed it in vain
// before (console QA: a long incident note typed at the end of a shift).
const draftReasonParam = "reason"

// withDraftReason is from, the page whose form r posted, with the reason
// that form carried, when it has one fit to be shown again.
func withDraftReason(w http.ResponseWriter, r *http.Request, from string) string {
	// Read as a signed-in form is, bounded: nobody's session vouches for
	// this one.
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if r.ParseForm() != nil {
		return from
	}
	reason := formReason(r)
	if strings.TrimSpace(reason) == "" || utf8.RuneCountInString(reason) > engine.MaxReason || httpjson.UnstorableText(reason) != "" {
		return from
	}
	u, err := url.Parse(from)
	if err != nil {
		return from
	}
	q := u.Query()
	q.Set(draftReasonParam, reason)
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// postedFrom is the console page whose form r posted: its Referer, which
// browsers send whole, when a page of this console (this host); else "".
func postedFrom(r *http.Request) string {
	if ref, err := url.Parse(r.Referer()); err == nil && ref.Host == r.Host {
		return consolePath(ref.RequestURI())
	}
	return ""
}

// safeNext returns next when it is a console page other than sign-in,
// else the home page: the sign-in redirects cannot send a browser off the
// console, nor back to sign-in in a loop.
func safeNext(next string) string {
	u := consolePath(next)
	if u == "" || u == basePath+"/sign-in" || strings.HasPrefix(u, basePath+"/sign-in?") {
		return homePath
	}
	return u
}

// consolePath returns next as a path and query when it designates a page of
// the console, or "" for anything else (another site, another surface).
func consolePath(next string) string {
	if next == "" || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, "//") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	if u.Path != basePath && !strings.HasPrefix(u.Path, basePath+"/") || strings.Contains(u.Path, "/..") {
		return ""
	}
	return u.RequestURI()
}

// setLanguage is the language switcher: it remembers the choice in the
// lang cookie and goes back to the page. It is a GET because it changes a
// preference of this browser only, which a forged link cannot abuse.
func (c *Console) setLanguage(w http.ResponseWriter, r *http.Request) {
	code := chi.URLParam(r, "lang")
	if _, ok := supportedTag(code); !ok {
		c.notFound(w, r)
		return
	}
	http.SetCookie(w, preferenceCookie(r, langCookie, code, langCookieAge))
	next := consolePath(r.URL.Query().Get("next"))
	if next == "" {
		next = homePath
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// render writes a page. It renders into a buffer first so that a failing
// component produces an error page rather than half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page templ.Component) {
	var buf bytes.Buffer
	if err := page.Render(context.WithValue(r.Context(), refusedKey{}, status >= 400), &buf); err != nil {
		if r.Context().Err() != nil {
			// templ stops at a cancelled context: the replica cut the
			// request short (PostgreSQL stopped answering: a 503 page), or
			// the browser left.
			c.serverError(w, r, err)
			return
		}
		c.logger.Error("console: render", "path", r.URL.Path, "err", err)
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// Pages show operational data: keep them out of shared and disk caches.
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage renders a translated error.
func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	ctx := r.Context()
	v := errorView{Chrome: c.chrome(r, title, ""), Message: message, Back: T(ctx, "Back to external tasks"), BackHref: homePath}
	switch p, ok := auth.FromContext(ctx); {
	case !ok:
		// Not signed in (the sign-in form itself refused, an unknown
		// address): the lists would only send the browser to sign in.
		v.Back, v.BackHref = T(ctx, "Back to sign-in"), basePath+"/sign-in"
	case p.Role == auth.RoleDesigner:
		v.Back, v.BackHref = T(ctx, "Back to definitions"), definitionsPath
	}
	c.render(w, r, status, errorPage(v))
}

// instancesErrorPage is errorPage for a request made from the instances
// list (a bulk action): it leads back there, not to the external tasks.
func (c *Console) instancesErrorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	c.errorPageBack(w, r, status, title, message, "instances", T(r.Context(), "Back to the list"), instancesPath)
}

// errorPageBack is errorPage for a request made from a page it leads back
// to (back, labelled label), under the navigation entry section.
func (c *Console) errorPageBack(w http.ResponseWriter, r *http.Request, status int, title, message, section, label, back string) {
	c.render(w, r, status, errorPage(errorView{Chrome: c.chrome(r, title, section), Message: message, Back: label, BackHref: back}))
}

// optionalSession attaches the browser's session to a request that no
// guard read it for (an unknown address): the page then keeps the full
// chrome (navigation, search, the signed-in box) instead of looking like
// the browser was signed out. Nothing else is allowed by it.
func (c *Console) optionalSession(r *http.Request) *http.Request {
	if _, ok := auth.FromContext(r.Context()); ok {
		return r
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return r
	}
	sess, ok, err := c.sessions.get(r.Context(), ck.Value, c.now())
	if !ok || err != nil {
		return r
	}
	p, _, err := c.eng.LookupToken(r.Context(), sess.tokenHash)
	if err != nil || !canOpenConsole(p.Role) {
		return r
	}
	ctx := auth.WithPrincipal(r.Context(), p)
	ctx = context.WithValue(ctx, sessionCtxKey{}, current{id: ck.Value, csrf: sess.csrf, hasFlash: sess.hasFlash})
	return r.WithContext(ctx)
}

// redirectWithFlash answers a form with a redirect to target, whose page
// shows msg once (and no other page does).
func (c *Console) redirectWithFlash(w http.ResponseWriter, r *http.Request, target string, msg flash) {
	path, rawQuery, _ := strings.Cut(target, "?")
	query, _ := url.ParseQuery(rawQuery)
	c.sessions.setFlash(r.Context(), currentOf(r.Context()).id, path, query, msg)
	http.Redirect(w, r, target, http.StatusSeeOther)
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	r = c.optionalSession(r)
	ctx := r.Context()
	detail := T(ctx, "Nothing exists at this address, or it is not visible to you.")
	// Links to instances and occurrences outlive them (alerts, logs,
	// bookmarks): say where an ended one went.
	if strings.HasPrefix(r.URL.Path, basePath+"/instances/") || strings.HasPrefix(r.URL.Path, basePath+"/occurrences/") {
		detail = T(ctx, "Nothing exists at this address, or it is not visible to you. An ended instance is deleted, with its occurrences and attempts, once the retention period (RELAIS_RETENTION) has passed, or at once when an administrator erases it; the audit log keeps the operator actions taken on it.")
		id, _ := strings.CutPrefix(strings.TrimPrefix(r.URL.Path, basePath+"/instances/"), basePath+"/occurrences/")
		if id != "" && !strings.Contains(id, "/") && uuid.Validate(id) != nil {
			// A mangled link or the short id a list shows: no instance
			// or occurrence was ever there.
			detail = T(ctx, "“%s” is not a whole id (a UUID): the lists show the end of each id; open the row, or copy its link, for the whole id.", id)
		} else if erased := c.erasure(r, id); erased != "" {
			detail = erased
		}
	}
	if p, ok := auth.FromContext(ctx); ok && p.Role != auth.RoleDesigner && strings.HasPrefix(r.URL.Path, basePath+"/instances/") {
		// An instance gone (erased, retention's): back to the instances,
		// where its reader came from (lifecycle QA).
		c.instancesErrorPage(w, r, http.StatusNotFound, T(ctx, "Not found"), detail)
		return
	}
	c.errorPage(w, r, http.StatusNotFound, T(ctx, "Not found"), detail)
}

// erasure says who erased the instance at a not-found page's path, and
// why, for a viewer who may read the audit log; "" when it was not erased
// (or not an instance's page).
func (c *Console) erasure(r *http.Request, path string) string {
	ctx := r.Context()
	p, ok := auth.FromContext(ctx)
	if !ok || !auth.Allowed(p.Role, auth.RoleOperator) || !strings.HasPrefix(r.URL.Path, basePath+"/instances/") {
		return ""
	}
	id, err := uuid.Parse(path)
	if err != nil {
		return ""
	}
	rec, erased, err := c.eng.ErasureOf(ctx, id)
	if err != nil || !erased {
		return ""
	}
	return T(ctx, "This instance was erased by %s on %s, for this reason: “%s”. Its inputs, occurrences and attempts were deleted with it; the audit log keeps the operator actions taken on it.",
		rec.ActorName, formatTime(ctx, rec.At).Text, visibleBidi(rec.Reason))
}

// forbiddenForm answers a POST whose CSRF token is missing or wrong. The
// session, when the browser still has one, keeps the page's chrome (it
// looked signed out), and the page leads back to the form's page: "reload
// the page" meant resending the refused POST.
func (c *Console) forbiddenForm(w http.ResponseWriter, r *http.Request) {
	r = c.optionalSession(r)
	ctx := r.Context()
	title := T(ctx, "Form refused")
	msg := T(ctx, "This form was not sent from this console session, or it has expired: nothing was done. Open the form again and send it anew.")
	if from := postedFrom(r); from != "" {
		c.errorPageBack(w, r, http.StatusForbidden, title, msg, "", T(ctx, "Back to the form"), from)
		return
	}
	c.errorPage(w, r, http.StatusForbidden, title, msg)
}

// readForm reads a POST's form, at most maxFormBytes within the body's
// deadline, and answers for it when it cannot: 413 for a form too large,
// 408 for one that did not arrive in time, 400 for one that cannot be
// read. Unread, its CSRF token read as missing and the operator was told
// the form came from another session (or, once the connection's deadline
// had cancelled the request, got a bare 499). The connection ends with
// such an answer: the rest of the body is not read.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		// The console's forms are never multipart, but a browser's
		// extension or a script may send one: read alike, it is told as
		// much as any other form (r.PostFormValue would otherwise read it
		// unbounded by this function, and a form too large read as one
		// from another session).
		err = r.ParseMultipartForm(maxFormBytes)
	} else {
		err = r.ParseForm()
	}
	if err == nil {
		return true
	}
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	// The page is written whatever became of the request's context: the
	// browser is still there, waiting for an answer.
	r = r.WithContext(context.WithoutCancel(r.Context()))
	ctx := r.Context()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		c.errorPage(w, r, http.StatusRequestEntityTooLarge, T(ctx, "Form too large"),
			T(ctx, "This form is larger than %d KiB: nothing was done. Shorten what you typed and send it again.", maxFormBytes>>10))
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.errorPage(w, r, http.StatusRequestTimeout, T(ctx, "Form not received"),
			T(ctx, "This form did not arrive in time: nothing was done. Send it again."))
	default:
		c.errorPage(w, r, http.StatusBadRequest, T(ctx, "Invalid request"), T(ctx, "This form could not be read: nothing was done. Send it again."))
	}
	return false
}

// serverError logs err and renders a generic error: details stay in logs.
func (c *Console) serverError(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	requestID := middleware.GetReqID(ctx)
	if cut := pgfault.CutShort(ctx); cut != nil {
		// The replica cut the page short: PostgreSQL stopped answering.
		// The page is rendered with a context that still lives.
		err, ctx = cut, context.WithoutCancel(ctx)
		r = r.WithContext(ctx)
	}
	if ctx.Err() != nil {
		// The browser left (a closed tab, a second click): no fault of
		// ours, and nobody reads the page. 499 is what the request log
		// shows for it.
		c.logger.Debug("console: request abandoned by the client", "path", r.URL.Path, "request_id", requestID, "err", err)
		w.WriteHeader(httpjson.StatusClientClosedRequest)
		return
	}
	if fe, ok := fault.As(err); ok && fe.Kind == fault.Unavailable {
		// The database is down or restarting: say so, and when to retry,
		// rather than ask for a request id nobody needs.
		c.logger.Warn("console: database unavailable", "path", r.URL.Path, "request_id", requestID, "err", err)
		httpjson.NoteProblem(ctx, fe.Code)
		w.Header().Set("Retry-After", strconv.Itoa(int(fe.RetryAfter.Seconds())))
		c.errorPage(w, r, http.StatusServiceUnavailable, T(ctx, "Temporarily unavailable"),
			T(ctx, "The database cannot be reached right now. Try again in a few seconds."))
		return
	}
	c.logger.Error("console: request failed", "path", r.URL.Path, "request_id", requestID, "err", err)
	c.errorPage(w, r, http.StatusInternalServerError, T(ctx, "Something went wrong"),
		T(ctx, "The console could not show this page. Try again; if it persists, give your administrator the request id %s.", requestID))
}

// fail renders the page an engine error deserves: not found for unknown
// resources, else a server error.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	if fe, ok := fault.As(err); ok && fe.Kind == fault.NotFound {
		c.notFound(w, r)
		return
	}
	c.serverError(w, r, err)
}

func isUnknownToken(err error) bool { return errors.Is(err, auth.ErrUnknownToken) }
