package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/httpauth"
)

// Routes mounts every /api/v1 route but the pull protocol (package pull) on
// r, each with the roles that may call it. Admin may call everything; every
// route needs a token.
func (a *API) Routes(r chi.Router, lookup auth.Lookup) {
	role := func(roles ...auth.Role) func(http.Handler) http.Handler {
		return httpauth.Require(lookup, a.logger, roles...)
	}
	var (
		anyone   = role(auth.RoleDesigner, auth.RoleOperator, auth.RoleConsumer)
		designer = role(auth.RoleDesigner)
		reader   = role(auth.RoleDesigner, auth.RoleOperator)
		starter  = role(auth.RoleDesigner, auth.RoleOperator)
		schemas  = role(auth.RoleDesigner, auth.RoleOperator, auth.RoleConsumer)
		operator = role(auth.RoleOperator)
		admin    = role()
	)

	r.With(anyone).Method("GET", "/whoami", a.whoami())
	r.With(anyone).Method("GET", "/openapi.json", a.openAPI())
	r.Route("/tokens", func(r chi.Router) {
		r.Use(admin)
		r.Method("POST", "/", a.createToken())
		r.Method("GET", "/", a.listTokens())
		r.Method("DELETE", "/{id}", a.revokeToken())
	})

	r.Route("/definitions", func(r chi.Router) {
		r.With(reader).Method("GET", "/", a.listDefinitions())
		r.With(reader).Method("GET", "/{key}", a.getDefinition())
		r.With(designer).Method("PUT", "/{key}/working", a.putWorking())
		r.With(designer).Method("POST", "/{key}/revisions", a.snapshot())
		r.With(reader).Method("GET", "/{key}/revisions", a.listRevisions())
		r.With(reader).Method("GET", "/{key}/revisions/{n}", a.getRevision())
		r.With(schemas).Method("GET", "/{key}/revisions/{n}/schemas/inputs", a.getSchema("inputs"))
		r.With(schemas).Method("GET", "/{key}/revisions/{n}/schemas/outputs", a.getSchema("outputs"))
		r.With(reader).Method("GET", "/{key}/revisions/{a}/diff/{b}", a.diff())
		r.With(designer).Method("POST", "/{key}/releases", a.createRelease())
		r.With(reader).Method("GET", "/{key}/releases", a.listReleases())
		r.With(reader).Method("GET", "/{key}/releases/{name}", a.getRelease())
		r.With(operator).Method("GET", "/{key}/workers", a.listWorkers(true))
		// Writes to immutable resources are refused to readers only: every
		// route needs a token, so no token is 401, not 405.
		for _, m := range []string{"PUT", "PATCH", "DELETE", "POST"} {
			r.With(reader).Method(m, "/{key}/revisions/{n}", a.immutable("a revision", "edit the definition's working copy (PUT /api/v1/definitions/{key}/working) and snapshot a new revision (POST /api/v1/definitions/{key}/revisions)"))
			r.With(reader).Method(m, "/{key}/releases/{name}", a.immutable("a release", "publish the revision under another name (POST /api/v1/definitions/{key}/releases)"))
		}
	})
	r.Route("/processes", func(r chi.Router) {
		r.With(reader).Method("GET", "/", a.listProcesses())
		r.With(reader).Method("GET", "/{key}", a.getProcess())
		r.With(designer).Method("POST", "/{key}/versions", a.publishProcess())
		r.With(reader).Method("GET", "/{key}/versions", a.listProcessVersions())
		r.With(reader).Method("GET", "/{key}/versions/{v}", a.getProcessVersion())
		r.With(starter).Method("POST", "/{key}/instances", a.startInstance())
		r.With(starter).Method("POST", "/{key}/instances/batch", a.startInstances())
		for _, m := range []string{"PUT", "PATCH", "DELETE", "POST"} {
			r.With(reader).Method(m, "/{key}/versions/{v}", a.immutable("a process version", "publish a new version (POST /api/v1/processes/{key}/versions)"))
		}
	})
	r.Route("/instances", func(r chi.Router) {
		r.With(operator).Method("GET", "/", a.listInstances())
		r.With(operator).Method("GET", "/{id}", a.getInstance(lookup))
		r.With(operator).Method("POST", "/{id}/stop", a.actOnInstance(engine.ActionStop))
		r.With(operator).Method("POST", "/{id}/retry", a.actOnInstance(engine.ActionRetry))
		r.With(operator).Method("POST", "/{id}/abandon", a.actOnInstance(engine.ActionAbandon))
		r.With(admin).Method("POST", "/{id}/erase", a.eraseInstance())
		r.With(operator).Method("POST", "/actions", a.actOnFilter())
		// Without it, chi would take GET /instances/actions for an instance.
		r.With(operator).Method("GET", "/actions", a.notAllowed())
	})
	r.Route("/occurrences", func(r chi.Router) {
		r.With(operator).Method("GET", "/", a.listOccurrences())
		r.With(operator).Method("GET", "/{id}", a.getOccurrence())
		r.With(admin).Method("POST", "/{id}/reveal", a.revealOccurrence())
	})
	r.With(admin).Method("GET", "/audit/reveals", a.listReveals())
	r.With(operator).Method("GET", "/audit/actions", a.listOperatorActions())
	r.With(operator).Method("GET", "/audit/bulk/{id}", a.getBulkAction())
	r.With(operator).Method("GET", "/workers", a.listWorkers(false))
	r.With(operator).Method("GET", "/workers/lapses", a.listLapses())
	r.Route("/consumers", func(r chi.Router) {
		r.Use(admin) // and so are this subtree's 404s and 405s
		r.Method("POST", "/", a.createConsumer())
		r.Method("GET", "/", a.listConsumers())
		r.Method("GET", "/{id}", a.getConsumer())
		r.Method("PUT", "/{id}/grants", a.setGrants())
		r.Method("POST", "/{id}/rotate", a.rotateConsumer())
		r.Method("DELETE", "/{id}", a.revokeConsumer())
	})
	r.Route("/destinations", func(r chi.Router) {
		r.Use(admin)
		r.Method("PUT", "/{name}", a.putDestination())
		r.Method("GET", "/", a.listDestinations())
		r.Method("GET", "/{name}", a.getDestination())
		r.Method("DELETE", "/{name}", a.deleteDestination())
	})
}
