package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"
)

// runPush measures Relais push throughput: --n starts by --producers of a
// one-push-node process whose destination is a local HTTP server answering
// at once, from the first start to the last instance ended (the push
// runner's concurrency is relais serve's default). River has no push
// equivalent: the figure stands alone.
func runPush(ctx context.Context, b *bench) ([]measurement, error) {
	rate, err := relaisPush(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("relais: %w", err)
	}
	return []measurement{{Scenario: "push", System: sysRelais, Metric: "throughput", Value: rate, Unit: "occurrences/s", Better: "higher"}}, nil
}

// scoringProcess is one push node on score_company revision 1.
func scoringProcess(destination string) map[string]any {
	return map[string]any{
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "crm_id", "type": "text", "required": true}}},
		"start":  "score",
		"nodes": map[string]any{
			"score": map[string]any{"kind": "push", "definition": "score_company", "revision": 1, "destination": destination, "timeout": "PT5S",
				"inputs": map[string]any{"crm_id": map[string]any{"from": "input.crm_id"}, "country": map[string]any{"value": "FR"}},
				"next":   "done", "on_error": "failed"},
			"done":   map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	}
}

// startDestination serves a scoring API on loopback that answers every
// call at once.
func startDestination() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"outputs": {"score": 42, "band": "low"}}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/score", func() { _ = srv.Close() }, nil
}

func relaisPush(ctx context.Context, b *bench) (float64, error) {
	r, done, err := freshRelais(ctx, b, "bench_push_relais")
	if err != nil {
		return 0, err
	}
	defer done()
	dest, closeDest, err := startDestination()
	if err != nil {
		return 0, err
	}
	defer closeDest()
	if err := r.applyFile(ctx, filepath.Join(b.opts.Examples, "definitions", "score_company.yaml")); err != nil {
		return 0, err
	}
	if err := r.api.expect(ctx, http.StatusCreated, "PUT", "/api/v1/destinations/local", r.admin, mustJSON(map[string]any{"url": dest, "max_timeout": "PT5S"}), nil); err != nil {
		return 0, err
	}
	if err := r.publish(ctx, "scoring", scoringProcess("local")); err != nil {
		return 0, err
	}

	// The push runner settles in the background: ended instances are
	// counted by polling.
	settled := &tally{}
	failed := make(chan error, 1)
	ended, err := pollEnded(ctx, r.db, settled, failed, 5*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer ended.stop()
	start := ended.counting(func(ctx context.Context, i int) error {
		_, err := r.startInstance(ctx, "scoring", mustJSON(map[string]any{"inputs": map[string]any{"crm_id": fmt.Sprint("CRM-", i)}}))
		return err
	})
	return r.measure(ctx, b, warmup(b.opts.N), b.opts.N, relaisRun{label: "relais push", profile: "push-relais", start: start, settled: settled, failed: failed})
}
