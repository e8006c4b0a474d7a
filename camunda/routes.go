package camunda

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
)

// Routes mounts the facade on r (at /engine-rest). Every route, unknown
// ones included, needs a consumer token (Bearer, or Basic with the
// consumer's name): without one it is 401, before any 404 or 405.
func (f *Facade) Routes(r chi.Router, lookup auth.Lookup) {
	r.Use(f.authenticate(lookup))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		encode(w, http.StatusNotFound, exception{Type: notFoundException, Message: "no Camunda external-task route for " + r.URL.Path + " (see the README for what the facade serves)"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		f.writeError(w, r, fault.New(fault.MethodNotAllowed, "method_not_allowed", "%s is not allowed on %s", r.Method, r.URL.Path))
	})

	r.Method("POST", "/external-task/fetchAndLock", f.handle(f.fetchAndLock))
	r.Method("GET", "/external-task", f.handle(f.listTasks))
	r.Method("GET", "/external-task/count", f.handle(f.countTasks))
	r.Method("GET", "/external-task/{id}", f.handle(f.getTask))
	r.Method("POST", "/external-task/{id}/complete", f.handle(f.complete))
	r.Method("POST", "/external-task/{id}/failure", f.handle(f.failure))
	r.Method("POST", "/external-task/{id}/bpmnError", f.handle(f.bpmnError))
	r.Method("POST", "/external-task/{id}/extendLock", f.handle(f.extendLock))
	r.Method("POST", "/external-task/{id}/unlock", f.handle(f.unlock))
}
