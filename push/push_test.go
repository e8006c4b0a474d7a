package push_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// scoreProcess pushes score_company revision 1 to dest with the budget.
func scoreProcess(dest, timeout string) map[string]any {
	return map[string]any{
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "crm_id", "type": "text", "required": true}}},
		"start":  "score",
		"nodes": map[string]any{
			"score": map[string]any{"kind": "push", "definition": "score_company", "revision": 1, "destination": dest, "timeout": timeout,
				"inputs": map[string]any{"crm_id": map[string]any{"from": "input.crm_id"}, "country": map[string]any{"value": "FR"}},
				"next":   "done", "on_error": "failed"},
			"done":   map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	}
}

// destination is a local HTTP server counting the calls it receives.
type destination struct {
	URL   string
	calls atomic.Int32
	last  atomic.Value // http.Header of the last call
	body  atomic.Value // []byte of the last call
}

func newDestination(t testing.TB, h http.HandlerFunc) *destination {
	d := &destination{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.calls.Add(1)
		d.last.Store(r.Header.Clone())
		b, _ := io.ReadAll(r.Body)
		d.body.Store(b)
		r.Body = io.NopCloser(bytes.NewReader(b)) // for h to read too
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL
	return d
}

func TestPushOutcomes(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"outputs": {"score": 42, "band": "low"}}`)
	}
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String() + "/score"
	refused.Close()
	// Made once: compressing it in the handler took most of the 1 s
	// budget under -race.
	bomb := gzipped(`{"outputs": {"score": 42, "band": "` + strings.Repeat("x", 2<<20) + `"}}`)

	tests := []struct {
		name     string
		handler  http.HandlerFunc
		url      string // overrides the local server
		wantCode string // "" means completed
		wantMsg  string // in the occurrence's error message, when set
	}{
		{"200 valid", ok, "", "", ""},
		{"503", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, "", "destination_http_503", "answered 503: (no body)"},
		{"invalid JSON", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"outputs": {`) }, "", "invalid_outputs", ""},
		{"outputs violate the contract", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"outputs": {"score": 420, "band": "low"}}`)
		}, "", "invalid_outputs", ""},
		{"sleeps past the budget", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
			ok(w, r)
		}, "", "deadline_exceeded", ""},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
		}, "", "destination_http_302", ""},
		{"connection refused", nil, refusedURL, "connection_failed", ""},
		// The destination had the whole request: it may have acted on it.
		{"answer cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			fmt.Fprint(w, `{"outputs": {"sco`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, "", "outcome_unknown", ""},
		{"connection closed unanswered", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }, "", "outcome_unknown", ""},
		// Arrived whole, but not the gzip it says: the destination's
		// fault, not an answer lost (push QA).
		{"gzip that is not", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			fmt.Fprint(w, `{"outputs": {"score": 42, "band": "low"}}`)
		}, "", "invalid_outputs", "Content-Encoding: gzip but is not valid gzip"},
		// A gzip cut short but sent whole, and a status whose body says
		// gzip and is none: the answer arrived, the status stands (push
		// QA: read as an answer lost, and the 503 hidden).
		{"gzip cut short, sent whole", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			z := gzipped(`{"outputs": {"score": 42, "band": "low"}}`)
			w.Header().Set("Content-Length", strconv.Itoa(len(z)-10))
			_, _ = w.Write(z[:len(z)-10])
		}, "", "invalid_outputs", "Content-Encoding: gzip but is not valid gzip"},
		{"503 saying gzip, plain", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "busy")
		}, "", "destination_http_503", "after 30 seconds (Retry-After): (a body that says Content-Encoding: gzip but is not valid gzip)"},
		{"gzip", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gzipped(`{"outputs": {"score": 42, "band": "low"}}`))
		}, "", "", ""},
		// The body is bounded as sent and as decoded (a gzip bomb).
		{"body too large", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"outputs": {"score": 42, "band": "%s"}}`, strings.Repeat("x", 2<<20))
		}, "", "response_too_large", "larger than 1048576 bytes"},
		{"gzip bomb", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb)
		}, "", "response_too_large", "larger than 1048576 bytes"},
		// Headers are bounded as the body is.
		{"headers too large", func(w http.ResponseWriter, r *http.Request) {
			for i := range 150 {
				w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("x", 8000))
			}
			ok(w, r)
		}, "", "response_too_large", "headers are larger than"},
		// Relais retries nothing: the message keeps when the destination
		// asked to be called again.
		{"429 with Retry-After", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		}, "", "destination_http_429", `asking to be called again after 30 seconds (Retry-After)`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := relaistest.New(t)
			env.Definition("score_company.yaml")
			var d *destination
			u := tt.url
			if tt.handler != nil {
				d = newDestination(t, tt.handler)
				u = d.URL + "/score"
			}
			name := fmt.Sprintf("dest-%d", i)
			env.Must(201, "PUT", "/api/v1/destinations/"+name, env.Admin, map[string]any{"url": u, "max_timeout": "PT5S",
				"headers": map[string]string{"Authorization": "Bearer dest-secret"}})
			env.Process("scoring", scoreProcess(name, "PT1S"))

			started := time.Now()
			inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
			got := env.WaitEnded(inst["id"].(string), 5*time.Second)
			elapsed := time.Since(started)

			path := got["path"].([]any)
			occ := env.Must(200, "GET", "/api/v1/occurrences/"+path[0].(map[string]any)["occurrence_id"].(string), env.Operator, nil).JSON(t)
			if tt.wantCode == "" {
				if got["status"] != "completed" || occ["status"] != "completed" {
					t.Fatalf("instance %v, occurrence %v; want completed", got["status"], occ["status"])
				}
			} else {
				if got["status"] != "failed" || occ["error_code"] != tt.wantCode {
					t.Fatalf("instance %v, occurrence code %v (%v); want failed with %s", got["status"], occ["error_code"], occ["error_message"], tt.wantCode)
				}
				if msg, _ := occ["error_message"].(string); !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("error message %q; want it to say %q", msg, tt.wantMsg)
				}
				// An operator reading the log sees the failure (its code,
				// never what the destination answered).
				found := false
				for line := range strings.Lines(env.Logs.String()) {
					// With how long the call took, whoever logs it.
					found = found || strings.Contains(line, `msg="push call failed"`) && strings.Contains(line, "code="+tt.wantCode) && strings.Contains(line, " took=")
				}
				if !found {
					t.Errorf("no push call failed line with code=%s and took= in the log:\n%s", tt.wantCode, env.Logs.String())
				}
			}
			// The budget is 1 s: whatever happened, the occurrence is settled
			// within the budget plus 1 s of the call's start (its attempt's
			// reservation; database clock on both ends): well before the 3 s
			// a destination sleeps, so a call not cut at its budget fails,
			// while the settlement's own transaction may take a few hundred
			// milliseconds on a loaded machine under -race.
			attempts := occ["attempts"].([]any)
			if len(attempts) != 1 {
				t.Fatalf("%d attempts; want 1", len(attempts))
			}
			reserved, _ := time.Parse(time.RFC3339Nano, attempts[0].(map[string]any)["reserved_at"].(string))
			settled, _ := time.Parse(time.RFC3339Nano, occ["settled_at"].(string))
			if d := settled.Sub(reserved); d > 2*time.Second {
				t.Errorf("settled %v after the call started; budget PT1S + 1 s", d)
			}
			if elapsed > 3*time.Second {
				t.Errorf("observed the end after %v", elapsed)
			}
			if d != nil {
				if n := d.calls.Load(); n != 1 {
					t.Errorf("destination called %d times; want exactly 1", n)
				}
				h := d.last.Load().(http.Header)
				if h.Get("Idempotency-Key") != occ["id"] || h.Get("Relais-Attempt") != "1" || h.Get("Authorization") != "Bearer dest-secret" {
					t.Errorf("headers = %v", h)
				}
				var body map[string]any
				_ = json.Unmarshal(d.body.Load().([]byte), &body)
				if body["occurrence_id"] != occ["id"] || body["definition"] != "score_company" || body["inputs"].(map[string]any)["crm_id"] != "C-1" {
					t.Errorf("body = %v", body)
				}
			}
		})
	}
}

// TestACallIsMadeOnceWhenItsConnectionBreaks: a reused connection that
// breaks after the request was written leaves the call's outcome unknown,
// and the call is not made again: net/http resends a request carrying an
// Idempotency-Key by itself there, a second call no attempt recorded.
func TestACallIsMadeOnceWhenItsConnectionBreaks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	byKey := map[string]int{}
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		byKey[r.Header.Get("Idempotency-Key")]++
		first := len(byKey) == 1
		mu.Unlock()
		if !first {
			panic(http.ErrAbortHandler) // read whole, never answered
		}
		fmt.Fprint(w, `{"outputs": {"score": 42, "band": "low"}}`)
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	env.Must(201, "PUT", "/api/v1/destinations/scorer", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S"})
	env.Process("scoring", scoreProcess("scorer", "PT2S"))
	run := func() map[string]any {
		inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
		ended := env.WaitEnded(inst["id"].(string), 5*time.Second)
		occ := ended["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
		return env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)
	}
	if first := run(); first["status"] != "completed" {
		t.Fatalf("first call: %v %v", first["status"], first["error_code"])
	}
	// The second call goes out on the first's connection, kept alive.
	second := run()
	if second["error_code"] != "outcome_unknown" || !strings.Contains(fmt.Sprint(second["error_message"]), "may have acted on it") {
		t.Errorf("second call: %v %v, want outcome_unknown", second["error_code"], second["error_message"])
	}
	mu.Lock()
	defer mu.Unlock()
	if n := byKey[second["id"].(string)]; n != 1 {
		t.Errorf("the destination received the second call %d times, want 1", n)
	}
}

// TestPushErrorRoutesByCode: the code a call fails with picks the node's
// on_error target: destination_http_503 holds the instance for an
// operator, any other code fails it.
func TestPushErrorRoutesByCode(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	var unavailable atomic.Bool
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		if unavailable.Load() {
			w.WriteHeader(503)
			return
		}
		fmt.Fprint(w, `{"outputs": {"score": "high"}}`)
	})
	env.Must(201, "PUT", "/api/v1/destinations/scoring", env.Admin, map[string]any{"url": d.URL, "max_timeout": "PT5S"})
	doc := scoreProcess("scoring", "PT1S")
	doc["nodes"].(map[string]any)["score"].(map[string]any)["on_error"] = map[string]any{"destination_http_503": "hold", "*": "failed"}
	env.Process("scoring", doc)
	run := func() map[string]any {
		inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
		return env.WaitEnded(inst["id"].(string), 5*time.Second)
	}

	unavailable.Store(true)
	if got := run(); got["status"] != "held" || got["error_code"] != "destination_http_503" {
		t.Errorf("after a 503: instance %v with %v; want held with destination_http_503", got["status"], got["error_code"])
	}
	unavailable.Store(false)
	if got := run(); got["status"] != "failed" || got["end_node"] != "failed" || got["error_code"] != "invalid_outputs" {
		t.Errorf("after invalid outputs: instance %v at %v with %v; want failed at failed with invalid_outputs", got["status"], got["end_node"], got["error_code"])
	}
	// The 2xx whose outputs broke the contract is a failed call in the
	// metrics too (they are counted once the settlement returns, just after
	// its commit ended the instance).
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := env.Metrics()
		invalid, _ := m.Get("relais_push_calls_total", "result", "invalid_outputs")
		ok, _ := m.Get("relais_push_calls_total", "result", "ok")
		slow, _ := m.Get("relais_push_call_duration_seconds_count", "destination", "scoring", "outcome", "invalid_outputs")
		if invalid == 1 && ok == 0 && slow == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relais_push_calls_total invalid_outputs %v, ok %v, duration count for invalid_outputs %v; want 1, 0, 1", invalid, ok, slow)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDestinations(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	res := env.Do("PUT", "/api/v1/destinations/api", env.Admin, map[string]any{"url": "ftp://x", "max_timeout": "PT11S"})
	if res.Status != 400 || len(res.JSON(t)["errors"].([]any)) != 2 {
		t.Errorf("invalid destination: %d %s", res.Status, res.Body)
	}
	if r := env.Do("PUT", "/api/v1/destinations/api", env.Admin, map[string]any{"url": "https://x.example/score#token=abc", "max_timeout": "PT2S"}); r.Status != 400 || !containsString(r.Body, "fragment") {
		t.Errorf("a URL with a fragment (never sent): %d %s", r.Status, r.Body)
	}
	env.Must(201, "PUT", "/api/v1/destinations/api", env.Admin, map[string]any{"url": "http://127.0.0.1:1/x", "max_timeout": "PT2S",
		"headers": map[string]string{"X-Api-Key": "super-secret-value"}})
	got := env.Must(200, "GET", "/api/v1/destinations/api", env.Admin, nil)
	if string(got.Body) == "" || json.Valid(got.Body) && containsString(got.Body, "super-secret-value") {
		t.Errorf("header value returned: %s", got.Body)
	}
	if names := got.JSON(t)["header_names"].([]any); len(names) != 1 || names[0] != "X-Api-Key" {
		t.Errorf("header names = %v", names)
	}
	if r := env.Do("GET", "/api/v1/destinations/api", env.Operator, nil); r.Status != 403 {
		t.Errorf("operator reading destinations: %d", r.Status)
	}
	// A process whose budget exceeds the destination's cap is refused.
	if r := env.Do("POST", "/api/v1/processes/proc/versions", env.Designer, scoreProcess("api", "PT3S")); r.Status != 422 || !containsString(r.Body, "/nodes/score/timeout") {
		t.Errorf("budget above the cap: %d %s", r.Status, r.Body)
	}
	env.Process("proc", scoreProcess("api", "PT2S"))
	// The refusal names the versions, which the admin looks for next.
	if r := env.Do("DELETE", "/api/v1/destinations/api", env.Admin, nil); r.Status != 409 || r.Code() != "destination_in_use" || !containsString(r.Body, "proc version 1") {
		t.Errorf("deleting a used destination: %d %s", r.Status, r.Body)
	}
	// Lowering max_timeout below a published node's timeout names the
	// node, whose calls it cuts short, a dry run included (push QA: it
	// said nothing); keeping or raising it names none.
	api := map[string]any{"url": "http://127.0.0.1:1/x", "max_timeout": "PT1S", "headers": map[string]string{"X-Api-Key": "super-secret-value"}}
	for _, path := range []string{"/api/v1/destinations/api?dry_run=true", "/api/v1/destinations/api"} {
		r := env.Must(200, "PUT", path, env.Admin, api).JSON(t)
		if got := fmt.Sprint(r["capped_timeouts"]); got != "[map[node:score process_key:proc timeout:PT2S version:1]]" {
			t.Errorf("%s lowering max_timeout under proc's PT2S: capped_timeouts %s", path, got)
		}
	}
	// Raised, or put again, still under it: still said (verifier QA).
	api["max_timeout"] = "PT1.5S"
	for _, want := range []string{"updated", "unchanged"} {
		if r := env.Must(200, "PUT", "/api/v1/destinations/api", env.Admin, api).JSON(t); r["change"] != want || fmt.Sprint(r["capped_timeouts"]) != "[map[node:score process_key:proc timeout:PT2S version:1]]" {
			t.Errorf("max_timeout PT1.5S %s: capped_timeouts %v, want proc's node", want, r["capped_timeouts"])
		}
	}
	api["max_timeout"] = "PT2S"
	if r := env.Must(200, "PUT", "/api/v1/destinations/api", env.Admin, api).JSON(t); r["capped_timeouts"] != nil {
		t.Errorf("max_timeout back at the node's timeout: capped_timeouts %v, want none", r["capped_timeouts"])
	}
	env.Must(201, "PUT", "/api/v1/destinations/unused", env.Admin, map[string]any{"url": "https://example.com/x", "max_timeout": "PT1S"})
	env.Must(204, "DELETE", "/api/v1/destinations/unused", env.Admin, nil)

	// A PUT replaces the whole destination: one that drops its headers or
	// signing secret says which, a dry run included (push QA: sent to
	// change only the timeout, it cut the calls' credentials silently).
	signed := map[string]any{"url": "https://example.com/y", "max_timeout": "PT2S", "signing_secret": strings.Repeat("s", 32),
		"headers": map[string]string{"X-Api-Key": "k", "Authorization": "Bearer t"}}
	if r := env.Must(201, "PUT", "/api/v1/destinations/signed", env.Admin, signed).JSON(t); r["removed_headers"] != nil || r["signing_secret_removed"] != nil {
		t.Errorf("a creation: %v, want nothing removed", r)
	}
	for _, path := range []string{"/api/v1/destinations/signed?dry_run=true", "/api/v1/destinations/signed"} {
		r := env.Must(200, "PUT", path, env.Admin, map[string]any{"url": "https://example.com/y", "max_timeout": "PT1S",
			"headers": map[string]string{"authorization": "Bearer t"}}).JSON(t)
		if fmt.Sprint(r["removed_headers"]) != "[X-Api-Key]" || r["signing_secret_removed"] != true {
			t.Errorf("%s without the key and secret: removed_headers %v, signing_secret_removed %v; want [X-Api-Key] and true", path, r["removed_headers"], r["signing_secret_removed"])
		}
	}
	if r := env.Must(200, "PUT", "/api/v1/destinations/signed", env.Admin, map[string]any{"url": "https://example.com/y", "max_timeout": "PT2S",
		"headers": map[string]string{"Authorization": "Bearer t"}}).JSON(t); r["removed_headers"] != nil || r["signing_secret_removed"] != nil {
		t.Errorf("a PUT keeping what is left: %v, want nothing removed", r)
	}
}

func containsString(b []byte, s string) bool {
	return len(s) > 0 && len(b) >= len(s) && (string(b) == s || indexOf(string(b), s) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestStopAbortsAnInFlightCall(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	d, called, aborted := slowDestination(t, env)
	env.Process("scoring", scoreProcess("slow", "PT9S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("the destination was not called")
	}
	stopped := time.Now()
	env.Must(200, "POST", "/api/v1/instances/"+inst["id"].(string)+"/stop", env.Operator, map[string]any{"reason": "test stop"})
	select {
	case <-aborted:
	case <-time.After(3 * time.Second):
		t.Fatal("stopping the instance did not abort the call")
	}
	if d := time.Since(stopped); d > 2*time.Second {
		t.Errorf("aborted %v after the stop", d)
	}
	got := env.Must(200, "GET", "/api/v1/instances/"+inst["id"].(string), env.Operator, nil).JSON(t)
	step := got["path"].([]any)[0].(map[string]any)
	if got["status"] != "cancelled" || step["status"] != "cancelled" {
		t.Fatalf("instance %v, occurrence %v; want both cancelled", got["status"], step["status"])
	}
	if n := d.calls.Load(); n != 1 {
		t.Errorf("destination called %d times", n)
	}
	relaistest.WaitFor(t, 5*time.Second, "the call counted call_aborted", func() (bool, string) {
		n, _ := env.Metrics().Get("relais_push_calls_total", "result", "call_aborted")
		return n == 1, fmt.Sprintf("call_aborted %v", n)
	})
	// The request reached the destination: its attempt says it may have
	// acted, as the stop's confirmation warned.
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+step["occurrence_id"].(string), env.Operator, nil).JSON(t)
	attempt := occ["attempts"].([]any)[0].(map[string]any)
	if msg, _ := attempt["error_message"].(string); !strings.Contains(msg, "may already have acted on the request") {
		t.Errorf("aborted attempt: %v", attempt)
	}
}

// slowDestination registers destination "slow", which answers after 8 s
// unless its call is cut short: called is sent each call, aborted closed
// when one is.
func slowDestination(t *testing.T, env *relaistest.Env) (d *destination, called chan struct{}, aborted chan struct{}) {
	t.Helper()
	called, aborted = make(chan struct{}, 1), make(chan struct{})
	d = newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		called <- struct{}{}
		select {
		case <-r.Context().Done():
			close(aborted)
		case <-time.After(8 * time.Second):
		}
	})
	env.Must(201, "PUT", "/api/v1/destinations/slow", env.Admin, map[string]any{"url": d.URL, "max_timeout": "PT10S"})
	return d, called, aborted
}

// A short header value (a version, a flag, a tenant) is no credential and
// stays readable in what the destination says, as a short query value does;
// a long one is scrubbed (push QA: "field 2 of 2" read "field [redacted]
// of [redacted]").
func TestShortHeaderValuesAreNotScrubbed(t *testing.T) {
	t.Parallel()
	const credential = "hdr-7f3d9a2b11c4"
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, "field %s of 2, tenant %s, key %s", r.Header.Get("X-Api-Version"), r.Header.Get("X-Tenant"), r.Header.Get("X-Api-Key"))
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	env.Must(201, "PUT", "/api/v1/destinations/versioned", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT2S",
		"headers": map[string]string{"X-Api-Key": credential, "X-Api-Version": "2", "X-Tenant": "abc"}})
	env.Process("scoring", scoreProcess("versioned", "PT1S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 5*time.Second)
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)
	if msg, _ := occ["error_message"].(string); !strings.Contains(msg, "field 2 of 2, tenant abc, key [redacted]") {
		t.Errorf("error message %q: want the short values kept, the key redacted", msg)
	}
}

// A destination that echoes a credential past the start of a long error
// body must not leave a prefix of it in the stored message: the body is
// scrubbed whole, then cut.
func TestEchoedCredentialIsScrubbedBeforeTheMessageIsCut(t *testing.T) {
	t.Parallel()
	const credential = "tok-9d2kq-7pw4m-zz81x-hh3v"
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		// The credential straddles byte 300 of the body, and again ends a
		// body far longer than any stored message.
		fmt.Fprint(w, strings.Repeat("é", 145)+r.Header.Get("X-Api-Key")+strings.Repeat(".", 5000)+r.Header.Get("X-Api-Key"))
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	env.Must(201, "PUT", "/api/v1/destinations/echo", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT2S",
		"headers": map[string]string{"X-Api-Key": credential}})
	env.Process("scoring", scoreProcess("echo", "PT1S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 5*time.Second)
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)
	if occ["error_code"] != "destination_http_503" {
		t.Fatalf("error_code = %v, want destination_http_503", occ["error_code"])
	}
	var stored string
	if err := env.Pool.QueryRow(context.Background(), "select error_message from occurrences where id = $1", occID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{stored, occ["error_message"].(string)} {
		if !utf8.ValidString(msg) {
			t.Errorf("message is not valid UTF-8: %q", msg)
		}
		for n := 6; n <= len(credential); n++ {
			if strings.Contains(msg, credential[:n]) {
				t.Fatalf("message keeps %q, a prefix of the credential: %q", credential[:n], msg)
			}
		}
	}
	if !strings.Contains(stored, "[redacted]") {
		t.Errorf("message %q: want the credential's place marked", stored)
	}
}

// Outputs a contract refuses are described in the occurrence's message by
// their keys, which the destination chose: one echoing a credential is
// scrubbed, and a huge refused answer leaves a message of the usual bound,
// not a copy of every key.
func TestRefusedOutputsMessageIsScrubbedAndBounded(t *testing.T) {
	t.Parallel()
	const credential = "tok-4kd8s-pq72m-x0v9a"
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		outputs := map[string]any{"extra_" + r.Header.Get("X-Api-Key"): 1}
		for i := range 3000 {
			outputs[fmt.Sprintf("k%05d", i)] = i
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"outputs": outputs})
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	env.Must(201, "PUT", "/api/v1/destinations/echo", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT2S",
		"headers": map[string]string{"X-Api-Key": credential}})
	env.Process("scoring", scoreProcess("echo", "PT1S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 5*time.Second)
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	var code, stored string
	if err := env.Pool.QueryRow(context.Background(), "select error_code, error_message from occurrences where id = $1", occID).Scan(&code, &stored); err != nil {
		t.Fatal(err)
	}
	if code != "invalid_outputs" {
		t.Fatalf("error_code = %s, want invalid_outputs", code)
	}
	if strings.Contains(stored, credential) || !strings.Contains(stored, "[redacted]") {
		t.Errorf("message %.300q: want the echoed credential redacted", stored)
	}
	if len(stored) > 2000 {
		t.Errorf("message of %d bytes, want at most 2,000", len(stored))
	}
}

// A destination's misspelt output is said to be no field of the contract,
// with the field it meant, as a worker's is: hidden as "a protected value"
// (an unknown pointer has no classification, so it was taken for the most
// protected), it sent operators looking for a protected field that does
// not exist.
func TestMisspeltDestinationOutputIsNamed(t *testing.T) {
	t.Parallel()
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"outputs":{"scroe":42,"band":"low"}}`))
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	env.Must(201, "PUT", "/api/v1/destinations/typo", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT2S"})
	env.Process("scoring", scoreProcess("typo", "PT1S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 5*time.Second)
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)
	msg, _ := occ["error_message"].(string)
	if occ["error_code"] != "invalid_outputs" || !strings.Contains(msg, `/scroe: is not a field of the contract (did you mean "score"?)`) || strings.Contains(msg, "protected") {
		t.Errorf("error %v: %q; want /scroe named as no field of the contract", occ["error_code"], msg)
	}
}

// Lowering a destination's max_timeout caps the budget of calls made from
// then on, even for a version published with a longer timeout.
func TestLoweredDestinationCapBoundsCalls(t *testing.T) {
	t.Parallel()
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	put := func(max string) {
		if r := env.Do("PUT", "/api/v1/destinations/slow", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": max}); r.Status != 200 && r.Status != 201 {
			t.Fatalf("PUT destination max_timeout %s: %d %s", max, r.Status, r.Body)
		}
	}
	put("PT5S")
	env.Process("scoring", scoreProcess("slow", "PT5S"))
	put("PT1S")
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 10*time.Second)
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)
	if occ["error_code"] != "deadline_exceeded" {
		t.Fatalf("error_code = %v, want deadline_exceeded", occ["error_code"])
	}
	reserved := relaistest.TimeOf(t, "reserved_at", occ["attempts"].([]any)[0].(map[string]any)["reserved_at"])
	settled := relaistest.TimeOf(t, "settled_at", occ["settled_at"])
	// Well under the node's PT5S, with room for a loaded machine.
	if d := settled.Sub(reserved); d > 3*time.Second {
		t.Errorf("settled %v after the call started; the destination's cap is now PT1S (the node's timeout is PT5S)", d)
	}
}

// A webhook carries its credential in its URL's path (Slack's, Discord's):
// a destination echoing its path in an error must not hand it to
// operators, while short words of the path ("hooks") stay readable.
func TestEchoedURLPathCredentialIsScrubbed(t *testing.T) {
	t.Parallel()
	const credential = "Xq7LmP2vR9tK4wZ1bN6c"
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "no hook at "+r.URL.Path)
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	env.Must(201, "PUT", "/api/v1/destinations/hook", env.Admin, map[string]any{"url": d.URL + "/hooks/T0001/" + credential, "max_timeout": "PT2S"})
	env.Process("scoring", scoreProcess("hook", "PT1S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 5*time.Second)
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)
	if msg, _ := occ["error_message"].(string); strings.Contains(msg, credential) || !strings.Contains(msg, "/hooks/T0001/[redacted]") {
		t.Errorf("error message %q: want the path's credential redacted, its short segments kept", msg)
	}
}

// TestDestinationURLQueryIsSealed: a destination URL's query values are
// secret like header values: responses mask them, the database holds them
// sealed only, the call carries them, and an echo of one is scrubbed.
func TestDestinationURLQueryIsSealed(t *testing.T) {
	t.Parallel()
	const credential = "qk-7f3d9a2b11c4"
	var query atomic.Value
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		query.Store(r.URL.RawQuery)
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "bad key "+r.URL.Query().Get("api_key"))
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	put := env.Must(201, "PUT", "/api/v1/destinations/keyed", env.Admin, map[string]any{"url": d.URL + "/score?api_key=" + credential + "&region=eu-west",
		"max_timeout": "PT2S"}).JSON(t)
	want := d.URL + "/score?api_key=***&region=***"
	if put["url"] != want {
		t.Errorf("PUT answered url %v; want %s", put["url"], want)
	}
	for _, path := range []string{"/api/v1/destinations/keyed", "/api/v1/destinations"} {
		if body := env.Must(200, "GET", path, env.Admin, nil).Body; strings.Contains(string(body), credential) || !strings.Contains(string(body), "api_key=***") {
			t.Errorf("GET %s: %s; want the query masked", path, body)
		}
	}
	var stored string
	if err := env.Pool.QueryRow(context.Background(), "select url || coalesce(encode(sealed_url_query, 'escape'), '') from destinations where name = 'keyed'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, credential) || strings.Contains(stored, "eu-west") {
		t.Errorf("the database holds the query in clear: %q", stored)
	}
	// The same URL again is unchanged: it is compared in clear.
	if again := env.Must(200, "PUT", "/api/v1/destinations/keyed", env.Admin, map[string]any{"url": d.URL + "/score?api_key=" + credential + "&region=eu-west",
		"max_timeout": "PT2S"}).JSON(t); again["change"] != "unchanged" {
		t.Errorf("putting the same destination again: %v; want unchanged", again["change"])
	}

	env.Process("scoring", scoreProcess("keyed", "PT1S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 5*time.Second)
	if q, _ := query.Load().(string); q != "api_key="+credential+"&region=eu-west" {
		t.Errorf("the call's query = %q; want the real one", q)
	}
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)
	if msg, _ := occ["error_message"].(string); strings.Contains(msg, credential) || !strings.Contains(msg, "[redacted]") {
		t.Errorf("error message %q: want the echoed query value redacted", msg)
	}
}

// TestADrainingReplicaClaimsNoCall: once a replica drains (it is stopping),
// its runner claims no more push calls, so its stop waits only for the
// calls in flight; another replica makes the new ones.
func TestADrainingReplicaClaimsNoCall(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"outputs":{"score":42,"band":"low"}}`))
	})
	env.Must(201, "PUT", "/api/v1/destinations/scoring", env.Admin, map[string]any{"url": d.URL, "max_timeout": "PT5S"})
	env.Process("scoring", scoreProcess("scoring", "PT5S"))
	env.Drain()
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)["id"].(string)
	// The runner polls at least every second besides its notifications.
	time.Sleep(2 * time.Second)
	if n := d.calls.Load(); n != 0 {
		t.Fatalf("a draining replica made %d calls", n)
	}
	other := env.Replica()
	relaistest.WaitFor(t, 10*time.Second, "the other replica makes the call", func() (bool, string) {
		s := other.Must(200, "GET", "/api/v1/instances/"+inst, env.Operator, nil).JSON(t)["status"]
		return s == "completed", fmt.Sprint(s)
	})
}

// TestOccurrencesByDestination: the calls to one destination are listed by
// its name, in the API and the console (its Destinations row links there).
func TestOccurrencesByDestination(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"outputs": {"score": 42, "band": "low"}}`)
	}
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	for _, name := range []string{"scorer-a", "scorer-b"} {
		env.Must(201, "PUT", "/api/v1/destinations/"+name, env.Admin, map[string]any{"url": newDestination(t, ok).URL + "/score", "max_timeout": "PT5S"})
		env.Process("scoring_"+strings.TrimPrefix(name, "scorer-"), scoreProcess(name, "PT2S"))
	}
	var viaA []string
	for _, p := range []string{"scoring_a", "scoring_b", "scoring_a"} {
		inst := env.Must(201, "POST", "/api/v1/processes/"+p+"/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
		ended := env.WaitEnded(inst["id"].(string), 5*time.Second)
		if p == "scoring_a" {
			viaA = append(viaA, ended["path"].([]any)[0].(map[string]any)["occurrence_id"].(string))
		}
	}
	items := env.Must(200, "GET", "/api/v1/occurrences?destination=scorer-a", env.Operator, nil).JSON(t)["items"].([]any)
	var got []string
	for _, it := range items {
		got = append(got, it.(map[string]any)["id"].(string))
	}
	slices.Sort(got)
	slices.Sort(viaA)
	if !slices.Equal(got, viaA) {
		t.Errorf("destination=scorer-a listed %v, want %v", got, viaA)
	}
	if r := env.Do("GET", "/api/v1/occurrences?destination=Not%20a%20name", env.Operator, nil); r.Status != 400 || !containsString(r.Body, "must be a destination name") {
		t.Errorf("a malformed destination: %d %s", r.Status, r.Body)
	}
}

// A call its occurrence's deadline cuts short is a failure
// (deadline_exceeded), counted and logged as one: not call_aborted, which
// an operator's stop is and failure alerts leave out.
func TestDeadlineCutsAnInFlightCallShortAsAFailure(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	_, called, aborted := slowDestination(t, env)
	doc := scoreProcess("slow", "PT9S")
	doc["nodes"].(map[string]any)["score"].(map[string]any)["policy"] = map[string]any{"deadline": "PT5S"}
	env.Process("scoring", doc)
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("the destination was not called")
	}
	env.Clock.Advance(6 * time.Second)
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the deadline did not cut the call short")
	}
	relaistest.WaitFor(t, 5*time.Second, "the call counted deadline_exceeded", func() (bool, string) {
		m := env.Metrics()
		exceeded, _ := m.Get("relais_push_calls_total", "result", "deadline_exceeded")
		aborted, _ := m.Get("relais_push_calls_total", "result", "call_aborted")
		return exceeded == 1 && aborted == 0, fmt.Sprintf("deadline_exceeded %v, call_aborted %v", exceeded, aborted)
	})
	got := env.Must(200, "GET", "/api/v1/instances/"+inst["id"].(string), env.Operator, nil).JSON(t)
	if got["status"] != "failed" || got["error_code"] != "deadline_exceeded" {
		t.Errorf("instance %v %v, want failed deadline_exceeded", got["status"], got["error_code"])
	}
}

// Destinations take turns for the push slots: with one destination's
// calls queued behind a slow partner, another destination's call is made
// at the next free slot, not after the whole backlog.
func TestDestinationsTakeTurns(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var slowOnce sync.Once
	t.Cleanup(func() { slowOnce.Do(func() { close(release) }) })
	slow := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(800 * time.Millisecond):
		}
		fmt.Fprint(w, `{"outputs": {"score": 1, "band": "low"}}`)
	})
	fast := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"outputs": {"score": 2, "band": "low"}}`)
	})
	env := relaistest.New(t, func(c *config.Config) { c.Push.Concurrency = 1 })
	env.Definition("score_company.yaml")
	for name, d := range map[string]*destination{"slow-partner": slow, "fast-partner": fast} {
		env.Must(201, "PUT", "/api/v1/destinations/"+name, env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S"})
		env.Process("scoring_"+strings.TrimSuffix(name, "-partner"), scoreProcess(name, "PT3S"))
	}
	start := func(p string) string {
		return env.Must(201, "POST", "/api/v1/processes/"+p+"/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)["id"].(string)
	}
	for range 8 {
		start("scoring_slow")
	}
	fastOne := start("scoring_fast")
	// One slot, 800 ms a slow call: strict FIFO would reach the fast call
	// after the eight slow ones, 6 s or more.
	if got := env.WaitEnded(fastOne, 3*time.Second)["status"]; got != "completed" {
		t.Fatalf("the fast destination's call: %v", got)
	}
	if n := slow.calls.Load(); n > 3 {
		t.Errorf("%d slow calls were made before the fast one ended, want it served within its turn", n)
	}
}

// TestSignedDestinationCallsCarryTheirSignature: a destination given a
// signing secret receives each call with Relais-Signature, the HMAC of its
// time and body, which it checks with the secret; the secret is sealed,
// never shown (signed: true), refused outside its bounds, and a put with
// another secret is a change. An unsigned destination's calls carry none.
func TestSignedDestinationCallsCarryTheirSignature(t *testing.T) {
	t.Parallel()
	const secret = "whsec-2f9c1e7a5b3d4c6e8f0a1b2c3d4e5f60"
	verified := make(chan error, 2)
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		verified <- verifySignature(r.Header.Get("Relais-Signature"), secret, body, time.Now())
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"outputs": {"score": 7, "band": "low"}}`)
	})
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	if r := env.Do("PUT", "/api/v1/destinations/signed", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S",
		"signing_secret": "short"}); r.Status != 400 || !strings.Contains(string(r.Body), "/signing_secret") || strings.Contains(string(r.Body), "short\"") {
		t.Errorf("a short secret: %d %s, want 400 at /signing_secret", r.Status, r.Body)
	}
	if r := env.Do("PUT", "/api/v1/destinations/signed", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S",
		"headers": map[string]string{"relais-signature": "forged"}}); r.Status != 400 || !strings.Contains(string(r.Body), "set by Relais") {
		t.Errorf("a Relais-Signature header of its own: %d %s, want 400", r.Status, r.Body)
	}
	if r := env.Do("PUT", "/api/v1/destinations/signed", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S",
		"signing_secret": secret + "\n"}); r.Status != 400 || !strings.Contains(string(r.Body), "white space") {
		t.Errorf("a secret with a file's trailing newline: %d %s, want 400", r.Status, r.Body)
	}
	put := func(status int, secret string) map[string]any {
		t.Helper()
		res := env.Must(status, "PUT", "/api/v1/destinations/signed", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S",
			"signing_secret": secret})
		if strings.Contains(string(res.Body), secret) {
			t.Errorf("the answer shows the secret: %s", res.Body)
		}
		return res.JSON(t)
	}
	if got := put(201, secret); got["signed"] != true {
		t.Errorf("PUT answered %v, want signed true", got)
	}
	if got := put(200, secret); got["change"] != "unchanged" {
		t.Errorf("the same secret again: %v, want unchanged", got["change"])
	}
	if got := put(200, secret+"x"); got["change"] != "updated" {
		t.Errorf("another secret: %v, want updated", got["change"])
	}
	put(200, secret)
	if body := env.Must(200, "GET", "/api/v1/destinations", env.Admin, nil).Body; strings.Contains(string(body), secret) || !strings.Contains(string(body), `"signed":true`) {
		t.Errorf("the list: %s, want signed true and no secret", body)
	}
	var stored []byte
	if err := env.Pool.QueryRow(context.Background(), "select sealed_signing_secret from destinations where name = 'signed'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), secret) {
		t.Error("the database holds the signing secret in clear")
	}

	env.Process("scoring", scoreProcess("signed", "PT2S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	if got := env.WaitEnded(inst["id"].(string), 5*time.Second); got["status"] != "completed" {
		t.Errorf("instance %v, want completed", got["status"])
	}
	if err := <-verified; err != nil {
		t.Errorf("the destination could not verify the call: %v", err)
	}
	// The attempt is in the signed body too: a replay with another
	// Relais-Attempt header cannot pass for a new attempt.
	var sent struct{ Attempt int }
	if b, _ := d.body.Load().([]byte); json.Unmarshal(b, &sent) != nil || sent.Attempt != 1 {
		t.Errorf("the body's attempt %d, want 1", sent.Attempt)
	}
	if !strings.Contains(env.Logs.String(), "signed=true") {
		t.Error("the destination's put is not logged as signed")
	}

	// Unsigned again: no signature.
	env.Must(200, "PUT", "/api/v1/destinations/signed", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S"})
	inst = env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-2"}}).JSON(t)
	env.WaitEnded(inst["id"].(string), 5*time.Second)
	<-verified
	if h, _ := d.last.Load().(http.Header); h.Get("Relais-Signature") != "" {
		t.Errorf("an unsigned destination's call carries Relais-Signature %q", h.Get("Relais-Signature"))
	}
}

// verifySignature checks a Relais-Signature as the README tells a
// destination to: t and v1, the HMAC-SHA256 of "<t>.<body>", and t within
// five minutes of now.
func verifySignature(header, secret string, body []byte, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("header %q: no time", header)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("header %q: signed %v from now", header, d)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return fmt.Errorf("header %q: v1 is not the body's HMAC", header)
	}
	return nil
}

// gzipped is s compressed.
func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.Bytes()
}
