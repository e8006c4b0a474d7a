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
		// Refusals of writes to immutable resources are answered to readers
		// only: every route needs a token, so no token is 401, not 405.
		for _, m := range []string{"PUT", "PATCH", "DELETE", "POST"} {
			r.With(reader).Method(m, "/{key}/revisions/{n}", a.immutable("a revision"))
			r.With(reader).Method(m, "/{key}/releases/{name}", a.immutable("a release"))
		}
		r.With(schemaReader).Method("GET", "/{key}/revisions/{n}/schemas/inputs", a.getSchema("inputs"))
		r.With(schemaReader).Method("GET", "/{key}/revisions/{n}/schemas/outputs", a.getSchema("outputs"))
		r.With(reader).Method("GET", "/{key}/revisions/{a}/diff/{b}", a.diff())
		r.With(designer).Method("POST", "/{key}/releases", a.createRelease())
		r.With(reader).Method("GET", "/{key}/releases", a.listReleases())
		r.With(reader).Method("GET", "/{key}/releases/{name}", a.getRelease())
	})

	starter := auth.Require(lookup, a.logger, auth.RoleDesigner, auth.RoleOperator)
	operator := auth.Require(lookup, a.logger, auth.RoleOperator)
	admin := auth.Require(lookup, a.logger)

	r.Route("/processes", func(r chi.Router) {
		r.With(reader).Method("GET", "/", a.listProcesses())
		r.With(reader).Method("GET", "/{key}", a.getProcess())
		r.With(designer).Method("POST", "/{key}/versions", a.publishProcess())
		r.With(reader).Method("GET", "/{key}/versions/{v}", a.getProcessVersion())
		for _, m := range []string{"PUT", "PATCH", "DELETE"} {
			r.With(reader).Method(m, "/{key}/versions/{v}", a.immutable("a process version"))
		}
		r.With(starter).Method("POST", "/{key}/instances", a.startInstance())
	})
	r.Route("/instances", func(r chi.Router) {
		r.With(operator).Method("GET", "/", a.listInstances())
		r.With(operator).Method("GET", "/{id}", a.getInstance())
		r.With(operator).Method("POST", "/{id}/stop", a.stopInstance())
	})
	r.Route("/occurrences", func(r chi.Router) {
		r.With(operator).Method("GET", "/", a.listOccurrences())
		r.With(operator).Method("GET", "/{id}", a.getOccurrence())
		r.With(admin).Method("POST", "/{id}/reveal", a.revealOccurrence())
	})
	r.With(admin).Method("GET", "/audit/reveals", a.listReveals())
	r.Route("/consumers", func(r chi.Router) {
		r.Use(admin)
		r.Method("POST", "/", a.createConsumer())
		r.Method("GET", "/", a.listConsumers())
		r.Method("GET", "/{id}", a.getConsumer())
		r.Method("PUT", "/{id}/grants", a.setGrants())
		r.Method("POST", "/{id}/rotate", a.rotateConsumer())
		r.Method("DELETE", "/{id}", a.revokeConsumer())
	})
}
