// Package httpauth enforces the auth model on HTTP routes: it reads the
// bearer token, resolves it to a principal and admits only the roles a
// route names, answering 401 or 403 as problem+json.
package httpauth

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

// Require returns middleware that authenticates the bearer token and admits
// only the given roles (and admin): 401 without a valid token, 403 with
// another role.
func Require(lookup auth.Lookup, logger *slog.Logger, roles ...auth.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := Bearer(r.Header)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="relais"`)
				detail := "an Authorization: Bearer token is required"
				if n := len(r.Header.Values("Authorization")); n > 1 {
					detail = "an Authorization: Bearer token is required, once: this request gives the header " + strconv.Itoa(n) + " times"
				} else if r.Header.Get("Authorization") != "" {
					// The header is there: its scheme is what is missing
					// or wrong, the commonest slip with a token in hand.
					detail = "an Authorization: Bearer token is required (the header must read \"Bearer \" then the token)"
				}
				httpjson.WriteError(w, r, logger, fault.New(fault.Unauthorized, "unauthorized", "%s", detail))
				return
			}
			p, err := authenticate(r, lookup, token)
			if err != nil {
				if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer realm="relais", error="invalid_token"`)
				}
				httpjson.WriteError(w, r, logger, err)
				return
			}
			// Before the role is checked: the access log names who was
			// refused too.
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
			if !auth.Allowed(p.Role, roles...) {
				httpjson.WriteError(w, r, logger, fault.New(fault.Forbidden, "forbidden", "role %s may not do this: it takes %s token", p.Role, needed(roles)))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// needed names the roles a route admits, admin last: "a designer, an
// operator or an admin". A route for consumers alone is a worker
// protocol's, which an admin token may not use either (what a worker
// receives is decided by its consumer's grants): "a consumer".
func needed(roles []auth.Role) string {
	if len(roles) == 1 && roles[0] == auth.RoleConsumer {
		return "a consumer"
	}
	var names []string
	for _, r := range roles {
		if r != auth.RoleAdmin {
			names = append(names, article(string(r))+" "+string(r))
		}
	}
	names = append(names, "an admin")
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// preauth is the outcome of Preauthenticate, kept for Require.
type preauth struct {
	token string
	p     auth.Principal
	err   error
}

type preauthKey struct{}

// Preauthenticate authenticates r's bearer token ahead of the route (to
// decide whether its body is worth reading) and returns r carrying the
// outcome, which Require then uses instead of looking the token up again.
// ok is false without a token, or when it is refused or cannot be looked
// up.
func Preauthenticate(r *http.Request, lookup auth.Lookup) (_ *http.Request, ok bool) {
	token, has := Bearer(r.Header)
	if !has {
		return r, false
	}
	p, err := auth.Authenticate(r.Context(), lookup, token)
	return r.WithContext(context.WithValue(r.Context(), preauthKey{}, preauth{token: token, p: p, err: err})), err == nil
}

func authenticate(r *http.Request, lookup auth.Lookup, token string) (auth.Principal, error) {
	if pre, ok := r.Context().Value(preauthKey{}).(preauth); ok && pre.token == token {
		return pre.p, pre.err
	}
	return auth.Authenticate(r.Context(), lookup, token)
}

// Bearer is the bearer token of a request's headers, if they carry one.
func Bearer(h http.Header) (string, bool) {
	if len(h.Values("Authorization")) > 1 {
		// Which one counts? A proxy reading the last would authorize
		// another principal than Relais reading the first (security QA).
		return "", false
	}
	scheme, token, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
