package server

import (
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/api/openapi"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/longpoll"
	"github.com/relais/relais/stream"
)

// documentedPrefixes are the surfaces the OpenAPI document describes.
var documentedPrefixes = []string{"/api/v1/", "/engine-rest/", "/healthz/", "/readyz/", "/metrics/"}

// routeParam matches a chi or OpenAPI path parameter; both write {name}.
var routeParam = regexp.MustCompile(`\{[^}]+\}`)

// TestDocumentListsEveryRoute walks the assembled router (chi.Walk) and
// fails for every route of the documented surfaces that the OpenAPI
// document lacks, and for every operation it lists that the router lacks:
// adding a route means documenting it.
func TestDocumentListsEveryRoute(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	// No query runs while the router is assembled: the engine needs no
	// database here.
	d := Deps{Logger: logger, Config: config.Default(), Engine: engine.New(nil, engine.Options{Logger: logger}), Registry: reg}
	mux, ok := newHandler(d, longpoll.NewHub(1, reg), stream.New(logger, d.Config, d.Engine, d.Engine.LookupToken, reg), newDatabaseGate(), newEndHub(d)).(chi.Routes)
	if !ok {
		t.Fatal("the replica's handler is not a chi router")
	}
	ops, err := openapi.Operations()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, op := range ops {
		documented[op.Method+" "+op.Path] = true
	}
	routed := map[string]bool{}
	err = chi.Walk(mux, func(method, route string, h http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.ReplaceAll(route, "/*/", "/")
		if route != "/" {
			route = strings.TrimSuffix(route, "/")
		}
		if _, refused := h.(httpjson.NotAllowed); refused && !documented[method+" "+route] {
			// A route that only answers 405 where another route's pattern
			// would take the path (GET /instances/actions): no operation.
			return nil
		}
		for _, p := range documentedPrefixes {
			if strings.HasPrefix(route+"/", p) {
				routed[method+" "+route] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(routed) < 60 {
		t.Fatalf("the walk found %d routes; the check would prove little", len(routed))
	}
	t.Logf("%d routes, %d documented operations", len(routed), len(documented))
	var missing, extra []string
	for r := range routed {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !routed[r] {
			extra = append(extra, r)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	for _, r := range missing {
		t.Errorf("route %s is not in api/openapi/openapi.yaml: document it", r)
	}
	for _, r := range extra {
		t.Errorf("api/openapi/openapi.yaml documents %s, which the router lacks (parameters are compared by name: %s)", r, routeParam.FindAllString(r, -1))
	}
}
