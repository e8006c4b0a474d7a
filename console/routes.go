package console

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/internal/auth"
)

// Handler returns the console's routes, to be mounted at /console.
func (c *Console) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders, withLanguage, c.withPreferences, c.sameOrigin)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { c.notFound(w, r) })
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		r = c.optionalSession(r)
		c.errorPage(w, r, http.StatusMethodNotAllowed, T(r.Context(), "Method not allowed"), T(r.Context(), "This page does not accept that request."))
	})

	r.Get("/static/*", serveStatic)
	r.Get("/lang/{lang}", c.setLanguage)
	r.Get("/sign-in", c.signInPage)
	r.Post("/sign-in", c.signIn)

	r.Group(func(r chi.Router) {
		r.Use(c.requireSession)
		r.Get("/", func(w http.ResponseWriter, r *http.Request) {
			p, _ := auth.FromContext(r.Context())
			http.Redirect(w, r, homeFor(p.Role), http.StatusSeeOther)
		})
		r.Post("/sign-out", c.signOut)
		r.Get("/preferences", c.preferencesPage)
		r.Post("/preferences", c.savePreferences)
		r.Post("/preferences/reload", c.setReloadPaused)
		r.Get("/definitions", c.definitionList)
		r.Get("/definitions/{key}", c.definitionDetail)
		// Designers read the processes they publish, as the API lets
		// them: the graph and the nodes (the counts are operators').
		r.Get("/processes", c.processList)
		r.Get("/processes/{key}", c.processLatest)
		r.Get("/processes/{key}/versions", c.processLatest)
		r.Get("/processes/{key}/versions/{version}", c.processVersion)
		r.Group(func(r chi.Router) {
			r.Use(c.requireOperator)
			r.Get("/health", c.health)
			r.Get("/search", c.search)
			r.Get("/occurrences", c.occurrenceList)
			r.Get("/occurrences/{id}", c.occurrenceDetail)
			r.Get("/occurrences/{id}/reveal", c.occurrenceRevealGet)
			r.Post("/occurrences/{id}/reveal", c.occurrenceReveal)
			r.Get("/instances", c.instanceList)
			r.Get("/instances/bulk", c.bulkConfirm)
			r.Post("/instances/bulk", c.bulkAct)
			r.Get("/workers", c.workerList)
			r.Get("/instances/{id}", c.instanceDetail)
			r.Get("/instances/{id}/{action:retry|abandon|stop}", c.instanceActionConfirm)
			r.Post("/instances/{id}/{action:retry|abandon|stop}", c.instanceAct)
			r.Get("/audit", c.auditList)
		})
		r.Group(func(r chi.Router) {
			r.Use(c.requireAdmin)
			r.Get("/tokens", c.tokenList)
			r.Get("/tokens/{id}/revoke", c.tokenRevokeConfirm)
			r.Post("/tokens/{id}/revoke", c.tokenRevoke)
			r.Get("/reveals", c.revealList)
			r.Get("/instances/{id}/erase", c.instanceEraseConfirm)
			r.Post("/instances/{id}/erase", c.instanceErase)
			r.Get("/consumers", c.consumerList)
			r.Get("/destinations", c.destinationList)
		})
	})
	return r
}

// sameOrigin refuses a form a browser posts from another origin, as the
// form's token does: the sign-in form's token is a cookie's double, which
// a host of the same site could plant (a login CSRF: the victim signed
// into the attacker's session). Browsers say where a post comes from
// (Sec-Fetch-Site, or Origin against Host); curl and scripts say nothing
// and are not concerned.
func (c *Console) sameOrigin(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		c.errorPage(w, r, http.StatusForbidden, T(ctx, "Form refused"),
			T(ctx, "This form was sent from another site: the console takes its forms from its own pages only. Open the console and send it from there."))
	}))
	return p.Handler(next)
}
