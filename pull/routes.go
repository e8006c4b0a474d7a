package pull

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpauth"
	"github.com/relais/relais/internal/httpjson"
)

// Routes mounts the pull routes on r (at /api/v1/pull). Only consumer
// tokens may pull: an occurrence is delivered to a consumer's grants.
func (p *Protocol) Routes(r chi.Router, lookup auth.Lookup) {
	r.Use(httpauth.Require(lookup, p.logger, auth.RoleConsumer), p.consumerOnly)
	r.Method("POST", "/fetch-and-lock", p.handle(p.fetch))
	r.Method("POST", "/occurrences/{id}/complete", p.handle(p.complete))
	r.Method("POST", "/occurrences/{id}/fail", p.handle(p.fail))
	r.Method("POST", "/occurrences/{id}/extend", p.handle(p.extend))
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
