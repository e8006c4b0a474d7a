// Command scoringapi is the push destination of the README walkthrough: a
// scoring API that Relais calls synchronously for the onboard_company
// process's score node (examples/destinations/destinations.yaml points
// scoring-api at it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// call is what Relais POSTs (DESIGN §4).
type call struct {
	OccurrenceID string `json:"occurrence_id"`
	Definition   string `json:"definition"`
	Revision     int    `json:"revision"`
	Inputs       struct {
		CRMID   string `json:"crm_id"`
		Country string `json:"country"`
	} `json:"inputs"`
}

func main() {
	addr := os.Getenv("SCORING_ADDR")
	if addr == "" {
		addr = "127.0.0.1:9091"
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := &http.Server{Addr: addr, Handler: handler(logger), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	// Listen first, so that "listening" is said only once it is true.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Error("scoring API cannot listen (SCORING_ADDR)", "addr", addr, "err", err)
		os.Exit(1)
	}
	logger.Info("scoring API listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("scoring API stopped", "err", err)
		os.Exit(1)
	}
}

func handler(logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /score", func(w http.ResponseWriter, r *http.Request) {
		var c call
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&c); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		// The Idempotency-Key header is the occurrence id: a real API would
		// use it to answer a repeated call with the same result.
		logger.Info("scoring", "occurrence", r.Header.Get("Idempotency-Key"), "crm_id", c.Inputs.CRMID)
		h := fnv.New32a()
		h.Write([]byte(c.Inputs.CRMID + c.Inputs.Country))
		score := int(h.Sum32() % 101)
		band := "low"
		switch {
		case score >= 70:
			band = "high"
		case score >= 40:
			band = "medium"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"outputs": map[string]any{"score": score, "band": band}})
	})
	return mux
}
