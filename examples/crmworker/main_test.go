package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/testlog"
)

// relais is the least of the pull protocol this worker needs: a queue of
// tasks handed out once, long polls that last until the client leaves,
// and a record of every settlement.
type relais struct {
	mu      sync.Mutex
	queue   []map[string]any
	settled map[string]map[string]any // occurrence id → action and body
}

func (s *relais) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer consumer-token" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	switch r.Pattern {
	case "POST /api/v1/pull/fetch-and-lock":
		s.mu.Lock()
		n := min(int(body["max_tasks"].(float64)), len(s.queue))
		tasks := s.queue[:n]
		s.queue = s.queue[n:]
		s.mu.Unlock()
		if len(tasks) == 0 {
			<-r.Context().Done() // until shutdown abandons the poll
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"occurrences": tasks})
	case "POST /api/v1/pull/occurrences/{id}/complete", "POST /api/v1/pull/occurrences/{id}/fail":
		s.mu.Lock()
		body["action"] = path.Base(r.URL.Path)
		s.settled[r.PathValue("id")] = body
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "done"})
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"lock_expires_at": time.Now().Add(time.Minute)})
	}
}

func task(id, name, country string) map[string]any {
	return map[string]any{"id": id, "definition": "add_company_to_crm", "revision": 1, "attempt": 1, "attempts_left": 2,
		"lock_expires_at": time.Now().Add(time.Minute), "instance_id": "i-1", "node": "crm",
		"inputs": map[string]any{"company_name": name, "country": country, "source": "web"}}
}

func TestRun(t *testing.T) {
	fake := &relais{settled: map[string]map[string]any{}, queue: []map[string]any{
		task("a", "Acme", "FR"), task("b", " ACME ", "FR"), task("c", "Globex", "France"),
	}}
	mux := http.NewServeMux()
	for _, p := range []string{"fetch-and-lock", "occurrences/{id}/complete", "occurrences/{id}/fail", "occurrences/{id}/extend"} {
		mux.Handle("POST /api/v1/pull/"+p, fake)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	env := map[string]string{"RELAIS_URL": srv.URL, "RELAIS_TOKEN": "consumer-token"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs testlog.Buffer
	go func() {
		done <- run(ctx, func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &logs), nil)))
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		fake.mu.Lock()
		n := len(fake.settled)
		fake.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tasks not settled")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v", err)
	}

	// a and b ran concurrently: either may have created the company.
	outcomes := map[string]int{}
	for _, id := range []string{"a", "b"} {
		out, _ := json.Marshal(fake.settled[id]["outputs"])
		outcomes[fake.settled[id]["action"].(string)+" "+string(out)]++
	}
	want := map[string]int{
		`complete {"crm_id":"CRM-0001","result":"created"}`:                        1,
		`complete {"crm_id":"CRM-0001","matched_on":["name"],"result":"existing"}`: 1,
	}
	for k, n := range want {
		if outcomes[k] != n {
			t.Errorf("outcomes = %v; want %v", outcomes, want)
		}
	}
	if c := fake.settled["c"]; c["action"] != "fail" || c["error_code"] != "INVALID_COUNTRY" || c["retryable"] != false {
		t.Errorf("c settled as %v; want a non-retryable INVALID_COUNTRY failure", c)
	}
	// Someone running the example sees what it did, line by line, and no
	// input's value (the company's name).
	if added, found := strings.Count(logs.String(), "company added to the CRM"), strings.Count(logs.String(), "company already in the CRM"); added != 1 || found != 1 || strings.Contains(logs.String(), "Acme") {
		t.Errorf("logs:\n%s\nwant a line for each of the two companies handled (one added, one already there), without their names", logs.String())
	}
}

func TestRunNeedsEnvironment(t *testing.T) {
	if err := run(context.Background(), func(string) string { return "" }, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("run without RELAIS_URL and RELAIS_TOKEN succeeded")
	}
}
