package camunda

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

// Routes mounts the facade on r (at /engine-rest). Every route, unknown
// ones included, needs a consumer token (Bearer, or Basic with the
// consumer's name): without one it is 401, before any 404 or 405.
func (f *Facade) Routes(r chi.Router, lookup auth.Lookup) {
	r.Use(f.authenticate(lookup), f.readableQuery, f.sameOrigin, f.jsonBodies)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if advice := unserved(r.URL.Path); advice != "" {
			f.notServed(w, r, advice)
			return
		}
		encode(w, http.StatusNotFound, exception{Type: notFoundException, Message: "not_found: no Camunda external-task route for " + r.URL.Path + " (docs/camunda.md lists what the facade serves)"})
	})
	allow := httpjson.NewAllow(r)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		if advice := unserved(r.URL.Path); advice != "" {
			// PUT /external-task/retries is no task named "retries": its
			// Allow would offer a GET of it (Camunda QA).
			f.notServed(w, r, advice)
			return
		}
		allow.Set(w, chi.RouteContext(r.Context()).RoutePath)
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

// readableQuery refuses (400) a query string that cannot be read: read
// without what it could not parse, ?topicName=x% would count every task.
func (f *Facade) readableQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := httpjson.QueryProblem(r.URL.RawQuery); msg != "" {
			f.writeError(w, r, badRequest("query", "%s", msg))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin refuses (403) a state-changing request a browser sends from
// another site. The facade takes HTTP Basic, which a browser that once
// opened /engine-rest remembers and attaches to any page's form posts:
// without this, any web page could lock or fail its user's tasks.
// Workers, which send no Sec-Fetch-Site or Origin, are not concerned.
func (f *Facade) sameOrigin(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.writeError(w, r, fault.New(fault.Forbidden, "cross_origin", "a browser request from another origin may not change tasks"))
	}))
	return p.Handler(next)
}

// jsonBodies refuses (415) a POST whose body is not declared JSON, as
// Camunda's REST API does: a form or text/plain post is not a Camunda
// client. A POST without a body (Camunda's clients send unlock so) may
// omit the header.
func (f *Facade) jsonBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		ct := r.Header.Get("Content-Type")
		if ct == "" && r.ContentLength <= 0 {
			// A chunked request (length -1) may carry no body: one byte
			// read says.
			var one [1]byte
			if r.ContentLength == 0 || r.Body == nil {
				next.ServeHTTP(w, r)
				return
			}
			if n, _ := io.ReadFull(r.Body, one[:]); n == 0 {
				r.Body = http.NoBody
				next.ServeHTTP(w, r)
				return
			}
		}
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != contentType {
			if ct == "" {
				ct = "none"
			}
			encode(w, http.StatusUnsupportedMediaType, exception{Type: notSupported,
				Message: fmt.Sprintf("unsupported_media_type: the body must be %s (Content-Type: %s)", contentType, ct)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unserved says what to do instead of a Camunda external-task route the
// facade does not serve, by its path: "" for any other path. Setting
// retries is how Camunda resolves an incident; Relais's is an operator's
// retry.
func unserved(path string) string {
	_, rest, ok := strings.Cut(path, "/external-task/")
	if !ok {
		return ""
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && (parts[0] == "retries" || parts[0] == "retries-async"),
		len(parts) == 2 && parts[1] == "retries":
		return "retries are not set by a Camunda client in Relais: an incident is resolved by an operator's retry, POST /api/v1/instances/{instance id}/retry with an operator token (or Retry on the console's instance page), which gives the task a fresh budget"
	case len(parts) == 2 && parts[1] == "priority":
		return "a task's priority is its node's policy.priority, set by the process version"
	case len(parts) == 2 && parts[1] == "lock":
		return "a task is locked by fetching it: POST /external-task/fetchAndLock"
	case len(parts) == 2 && parts[1] == "errorDetails":
		return "a failure's message and code are on the occurrence: GET /api/v1/occurrences/{id} (error_message) with an operator token"
	}
	return ""
}

// notServed answers a Camunda route the facade does not serve with what
// to do instead.
func (f *Facade) notServed(w http.ResponseWriter, r *http.Request, advice string) {
	httpjson.NoteProblem(r.Context(), "not_found")
	encode(w, http.StatusNotFound, exception{Type: notFoundException, Message: "not_found: " + r.Method + " " + r.URL.Path + " is not served by the facade: " + advice})
}
