package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// TestAgainstRelais runs the example worker against a real Relais: the same
// company started twice is created once, then found existing, and each
// instance takes the matching branch.
func TestAgainstRelais(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	token := env.Consumer("crm-sync", "add_company_to_crm")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func(k string) string {
			return map[string]string{"RELAIS_URL": env.URL, "RELAIS_TOKEN": token}[k]
		}, slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()

	first := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	if got := env.WaitEnded(first["id"].(string), 15*time.Second); got["status"] != "completed" || got["end_node"] != "done" {
		t.Fatalf("first Acme: %v at %v; want completed at done (created)", got["status"], got["end_node"])
	}
	second := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": " ACME "}}).JSON(t)
	if got := env.WaitEnded(second["id"].(string), 15*time.Second); got["status"] != "completed" || got["end_node"] != "known" {
		t.Fatalf("second Acme: %v at %v; want completed at known (existing)", got["status"], got["end_node"])
	}
}
