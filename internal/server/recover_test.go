package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/longpoll"
	"github.com/relais/relais/internal/testlog"
	"github.com/relais/relais/stream"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// panicServer is the replica's real handler with three extra routes that
// panic: before answering, with http.ErrAbortHandler, and after starting
// to answer.
func panicServer(t *testing.T) (*httptest.Server, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	reg := prometheus.NewRegistry()
	d := Deps{Logger: logger, Config: config.Default(), Engine: engine.New(dbtest.Pool(t), engine.Options{Logger: logger}), Registry: reg}
	h := newHandler(d, longpoll.NewHub(10, reg), stream.New(logger, d.Config, d.Engine, d.Engine.LookupToken, reg), newDatabaseGate(), newEndHub(d))
	mux, ok := h.(*chi.Mux)
	if !ok {
		t.Fatalf("the replica's handler is a %T, not a *chi.Mux", h)
	}
	mux.Get("/test/panic", func(http.ResponseWriter, *http.Request) {
		panic("boom: secret-canary-4e1f")
	})
	mux.Get("/test/abort", func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	})
	mux.Get("/test/late-panic", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"items": [`))
		w.(http.Flusher).Flush()
		panic("boom after the headers")
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, logs
}

// TestPanicIsAnInternalProblem: a panicking handler gets the problem+json
// every API error is (DESIGN §8), code internal, without the panic value;
// the panic's type and stack are logged, not its value.
func TestPanicIsAnInternalProblem(t *testing.T) {
	t.Parallel()
	srv, logs := panicServer(t)

	res, err := http.Get(srv.URL + "/test/panic")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 500 || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("got %d %q %s; want 500 application/problem+json", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	var p struct {
		Type, Code string
		Status     int
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Code != "internal" || p.Type != "urn:relais:problem:internal" || p.Status != 500 {
		t.Errorf("problem %s (%v); want code internal, status 500", body, err)
	}
	if strings.Contains(string(body), "canary") || strings.Contains(string(body), "boom") {
		t.Errorf("the panic value reached the client: %s", body)
	}
	log := logs.String()
	for _, want := range []string{"handler panicked", "a value of type string", "recover_test.go", "path=/test/panic", "status=500"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	// The value may be a payload: logs never show it (DESIGN §5).
	if strings.Contains(log, "secret-canary-4e1f") {
		t.Errorf("the log shows the panic value:\n%s", log)
	}
}

// TestAbortHandlerStillAborts: http.ErrAbortHandler keeps its meaning (the
// response is aborted, not answered), and so does a panic after the
// response started, which must not look like a complete answer.
func TestAbortHandlerStillAborts(t *testing.T) {
	t.Parallel()
	srv, _ := panicServer(t)
	for _, path := range []string{"/test/abort", "/test/late-panic"} {
		res, err := http.Get(srv.URL + path)
		if err == nil {
			body, rerr := io.ReadAll(res.Body)
			res.Body.Close()
			if rerr == nil {
				t.Errorf("%s: a complete answer %d %s; want the response aborted", path, res.StatusCode, body)
			}
		}
	}
}
