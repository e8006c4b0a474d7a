package pull

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpauth"
	"github.com/relais/relais/internal/httpjson"
)

// Routes mounts the pull routes on r (at /api/v1/pull). Only consumer
// tokens may pull: an occurrence is delivered to a consumer's grants.
// Complete and fail also take a settle token, scoped to one deferred
// occurrence; every other route refuses it (401).
func (p *Protocol) Routes(r chi.Router, lookup auth.Lookup) {
	consumer := httpauth.Require(lookup, p.logger, auth.RoleConsumer)
	r.Group(func(r chi.Router) {
		r.Use(consumer, p.consumerOnly)
		r.Method("POST", "/fetch-and-lock", p.handle(p.fetchTimed))
		r.Method("POST", "/settle", p.handle(p.timed("settle", p.settle)))
		r.Method("POST", "/occurrences/{id}/extend", p.handle(p.timed("extend", p.extend)))
		r.Method("POST", "/occurrences/{id}/defer", p.handle(p.timed("defer", p.deferOccurrence)))
		r.Method("POST", "/occurrences/{id}/release", p.handle(p.timed("release", p.release)))
		r.Method("POST", "/occurrences/{id}/settle-token", p.handle(p.timed("settle_token", p.settleToken)))
		r.Method("DELETE", "/occurrences/{id}/settle-token", httpjson.ErrorHandler(p.logger, p.revokeSettleTokens))
		r.Method("GET", "/deferred", httpjson.ErrorHandler(p.logger, p.listDeferred))
	})
	r.Group(func(r chi.Router) {
		r.Use(settleTokenOr(p.eng, p.logger, func(next http.Handler) http.Handler { return consumer(p.consumerOnly(next)) }))
		r.Method("POST", "/occurrences/{id}/complete", p.handle(p.timed("complete", p.complete)))
		r.Method("POST", "/occurrences/{id}/fail", p.handle(p.timed("fail", p.fail)))
	})
}

func (p *Protocol) consumerOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pr, _ := auth.FromContext(r.Context()); pr.ConsumerID == 0 {
			httpjson.WriteError(w, r, p.logger, fault.New(fault.Forbidden, "forbidden", "pull routes need a consumer token (POST /api/v1/consumers)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

type settleTokenKey struct{}

// viaSettleToken returns the scope of the settle token the request came
// with, if it came with one.
func viaSettleToken(ctx context.Context) (engine.SettleScope, bool) {
	v, ok := ctx.Value(settleTokenKey{}).(engine.SettleScope)
	return v, ok
}

// settleTokenOr authenticates a settle token for the occurrence in the path
// (a token of another occurrence is 401, like an unknown one), and leaves
// every other token to otherwise.
func settleTokenOr(eng *engine.Engine, logger *slog.Logger, otherwise func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		fallback := otherwise(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := httpauth.Bearer(r.Header)
			if !ok || !engine.IsSettleToken(token) {
				fallback.ServeHTTP(w, r)
				return
			}
			scope, err := eng.AuthenticateSettleToken(r.Context(), token)
			if err == nil && scope.Occurrence.String() != strings.ToLower(chi.URLParam(r, "id")) {
				err = fault.New(fault.Unauthorized, "unauthorized", "this settle token settles another occurrence")
			}
			if err != nil {
				// Only a refused token is invalid: a client told so of a
				// database outage would throw a good token away.
				if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer realm="relais", error="invalid_token"`)
				}
				httpjson.WriteError(w, r, logger, err)
				return
			}
			ctx := auth.WithPrincipal(r.Context(), auth.Principal{Name: engine.SettleTokenWorker, Role: auth.RoleConsumer, ConsumerID: scope.ConsumerID})
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, settleTokenKey{}, scope)))
		})
	}
}
