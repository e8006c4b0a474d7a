package console

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/internal/auth"
)

// Handler returns the console's routes, to be mounted at /console.
func (c *Console) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders, withLanguage)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { c.notFound(w, r) })
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusMethodNotAllowed, T(r.Context(), "Not allowed"), T(r.Context(), "This page does not accept that request."))
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
		r.Get("/definitions", c.definitionList)
		r.Get("/definitions/{key}", c.definitionDetail)
		r.Group(func(r chi.Router) {
			r.Use(c.requireOperator)
			r.Get("/occurrences", c.occurrenceList)
			r.Get("/occurrences/{id}", c.occurrenceDetail)
			r.Get("/occurrences/{id}/reveal", c.occurrenceRevealGet)
			r.Post("/occurrences/{id}/reveal", c.occurrenceReveal)
			r.Get("/workers", c.workerList)
			r.Get("/instances/{id}", c.instanceDetail)
			r.Get("/instances/{id}/stop", c.instanceStopConfirm)
			r.Post("/instances/{id}/stop", c.instanceStop)
		})
	})
	return r
}
