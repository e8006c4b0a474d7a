package httpjson

import (
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
)

// probedMethods are the methods an Allow header is built from, in the
// order it lists them.
var probedMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// NotAllowed marks a route's handler that refuses every request with 405
// (a write to an immutable resource): Allow does not list its method.
type NotAllowed struct{ http.Handler }

// Allow builds the Allow header a 405 must carry (RFC 9110 §15.5.6),
// which chi does not set when it calls a custom method-not-allowed
// handler. It asks a flat copy of the routes, built at first use (once
// every route is registered): chi's own Match answers yes for every method
// at a subrouter's bare path ("/definitions" for a router mounted there),
// which chi routes to the subrouter's "/" only when the request is served.
type Allow struct {
	routes chi.Routes
	once   sync.Once
	flat   *chi.Mux
	// refused are the "METHOD pattern" of NotAllowed routes.
	refused map[string]bool
}

// NewAllow returns the Allow of routes.
func NewAllow(routes chi.Routes) *Allow { return &Allow{routes: routes} }

// Set sets w's Allow header to the methods served at path (relative to
// the routes given to NewAllow, escaped as chi routes it), HEAD with GET
// (every GET route answers HEAD).
func (a *Allow) Set(w http.ResponseWriter, path string) {
	a.once.Do(a.build)
	if len(path) > 1 {
		// The API ignores a trailing slash; so must the methods it lists.
		path = strings.TrimSuffix(path, "/")
	}
	var allowed []string
	for _, m := range probedMethods {
		if p := a.flat.Find(chi.NewRouteContext(), m, path); p != "" && !a.refused[m+" "+p] {
			allowed = append(allowed, m)
			if m == http.MethodGet {
				allowed = append(allowed, http.MethodHead)
			}
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
	}
}

func (a *Allow) build() {
	a.flat, a.refused = chi.NewRouter(), map[string]bool{}
	nothing := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	_ = chi.Walk(a.routes, func(method, route string, h http.Handler, _ ...func(http.Handler) http.Handler) error {
		_, refused := h.(NotAllowed)
		add := func(route string) {
			a.flat.Method(method, route, nothing)
			a.refused[method+" "+route] = refused
		}
		add(route)
		if trimmed := strings.TrimSuffix(route, "/"); trimmed != route && trimmed != "" && !strings.HasSuffix(trimmed, "/") {
			// A subrouter's "/" is served at its bare mount path too.
			add(trimmed)
		}
		return nil
	})
}
