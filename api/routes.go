package api

import (
	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/auth"
)

// Routes mounts every route of the design and observation API on r (which
// sits at /api/v1). Admin may call everything.
func (a *API) Routes(r chi.Router, lookup auth.Lookup) {
	designer := auth.Require(lookup, a.logger, auth.RoleDesigner)
	reader := auth.Require(lookup, a.logger, auth.RoleDesigner, auth.RoleOperator)
	schemaReader := auth.Require(lookup, a.logger, auth.RoleDesigner, auth.RoleOperator, auth.RoleConsumer)

	r.Route("/definitions", func(r chi.Router) {
		r.With(reader).Method("GET", "/", a.listDefinitions())
		r.With(reader).Method("GET", "/{key}", a.getDefinition())
		r.With(designer).Method("PUT", "/{key}/working", a.putWorking())
		r.With(designer).Method("POST", "/{key}/revisions", a.snapshot())
		r.With(reader).Method("GET", "/{key}/revisions/{n}", a.getRevision())
		for _, m := range []string{"PUT", "PATCH", "DELETE", "POST"} {
			r.Method(m, "/{key}/revisions/{n}", a.immutable("a revision"))
			r.Method(m, "/{key}/releases/{name}", a.immutable("a release"))
		}
		r.With(schemaReader).Method("GET", "/{key}/revisions/{n}/schemas/inputs", a.getSchema("inputs"))
		r.With(schemaReader).Method("GET", "/{key}/revisions/{n}/schemas/outputs", a.getSchema("outputs"))
		r.With(reader).Method("GET", "/{key}/revisions/{a}/diff/{b}", a.diff())
		r.With(designer).Method("POST", "/{key}/releases", a.createRelease())
		r.With(reader).Method("GET", "/{key}/releases", a.listReleases())
		r.With(reader).Method("GET", "/{key}/releases/{name}", a.getRelease())
	})
}
