package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/longpoll"
	"github.com/relais/relais/stream"
)

// bodyServer is the replica's real handler, with a route that reads its
// body and then takes twice bodyReadTimeout to answer, and an admin token.
func bodyServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	d := Deps{Logger: logger, Config: config.Default(), Engine: engine.New(dbtest.Pool(t), engine.Options{Logger: logger}), Registry: reg}
	mux := newHandler(d, longpoll.NewHub(10, reg), stream.New(logger, d.Config, d.Engine, d.Engine.LookupToken, reg), newDatabaseGate(), newEndHub(d)).(*chi.Mux)
	mux.Post("/test/slow-answer", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		time.Sleep(2 * bodyReadTimeout)
		_, _ = io.WriteString(w, "answered")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	token, _, err := d.Engine.CreateToken(context.Background(), "bodies", auth.RoleAdmin, engine.Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, token
}

// rawPost sends a POST to path whose headers promise a body of length
// bytes and sends only sent of it, then reads the answer within wait.
func rawPost(t *testing.T, url, path, token string, length int, sent string, wait time.Duration) (*http.Response, error) {
	t.Helper()
	res, _, err := rawExchange(t, url, path, token, length, sent, wait)
	return res, err
}

// rawPostBody is rawPost answering the response's status and body, or
// the error reading it.
func rawPostBody(t *testing.T, url, path, token string, length int, sent string, wait time.Duration) string {
	t.Helper()
	res, body, err := rawExchange(t, url, path, token, length, sent, wait)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d %s", res.StatusCode, body)
}

func rawExchange(t *testing.T, url, path, token string, length int, sent string, wait time.Duration) (*http.Response, []byte, error) {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, host, token, length, sent)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, body, nil
}

// The bounds on request bodies, with bodyReadTimeout shortened: an unknown
// token's request is answered 401 without its body being read (so nobody
// without a token can make the server hold a body while it trickles in);
// a body that does not arrive in time is answered 408 body_timeout and its
// connection closed; a body that did arrive lifts the bound, so a handler
// may take longer than it to answer (a long poll). Small and large bodies
// alike: net/http reads up to 256 KiB of what a handler left unread before
// answering, unless the connection is to close.
func TestRequestBodiesAreBounded(t *testing.T) {
	// Not parallel: it shortens the package's bound for its own run.
	defer func(d time.Duration) { bodyReadTimeout = d }(bodyReadTimeout)
	bodyReadTimeout = 300 * time.Millisecond
	srv, token := bodyServer(t)
	for _, length := range []int{100 << 10, 1 << 20} {
		began := time.Now()
		res, err := rawPost(t, srv.URL, "/api/v1/tokens", "rls_not-a-token-at-all-0123456789", length, `{"name":`, 5*time.Second)
		if err != nil || res.StatusCode != http.StatusUnauthorized {
			t.Errorf("unknown token, %d-byte body still owed: %v %v; want 401", length, res, err)
		} else if took := time.Since(began); took >= bodyReadTimeout {
			t.Errorf("unknown token, %d-byte body still owed: answered after %v; want at once", length, took)
		}

		began = time.Now()
		res, err = rawPost(t, srv.URL, "/api/v1/tokens", token, length, `{"name":`, 5*time.Second)
		took := time.Since(began)
		if err != nil || res.StatusCode != http.StatusRequestTimeout || !res.Close {
			t.Errorf("admin token, %d-byte body still owed: %v %v; want 408, the connection closed", length, res, err)
		} else if took < bodyReadTimeout || took > 3*time.Second {
			t.Errorf("admin token, %d-byte body still owed: answered after %v; want after %v", length, took, bodyReadTimeout)
		}
	}
	res, err := rawPost(t, srv.URL, "/test/slow-answer", token, 2, `{}`, 5*time.Second)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("a handler answering after the bound, its body read: %v %v; want 200", res, err)
	}

	// The Camunda facade refuses an unknown token at once too (it waited
	// for the body's deadline: net/http reads a small unread body before
	// answering on a connection it keeps).
	began := time.Now()
	res, err = rawPost(t, srv.URL, "/engine-rest/external-task/fetchAndLock", "rls_not-a-token-at-all-0123456789", 100, `{"workerId":`, 5*time.Second)
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("facade, unknown token, body still owed: %v %v; want 401", res, err)
	} else if took := time.Since(began); took >= bodyReadTimeout {
		t.Errorf("facade, unknown token, body still owed: answered after %v; want at once", took)
	}
	// The worker protocol reads its body before its token: one that does
	// not arrive is deadline_exceeded, saying so without the connection's
	// addresses (it quoted "read tcp 127.0.0.1:…->127.0.0.1:…: i/o timeout").
	body := rawPostBody(t, srv.URL, "/relais.worker.v1.WorkerService/Complete", token, 100, `{"occurrenceId":`, 5*time.Second)
	if !strings.Contains(body, "deadline_exceeded") || !strings.Contains(body, "did not arrive within") || strings.Contains(body, "127.0.0.1") {
		t.Errorf("worker protocol, body still owed: %s; want deadline_exceeded saying the body did not arrive, no address", body)
	}
}

// The worker protocol's answers carry the REST answers' hardening: a
// Subscribe delivers secrets in clear, and gRPC-Web's clients are
// browsers (security QA).
func TestWorkerProtocolAnswersAreNotStoredOrSniffed(t *testing.T) {
	t.Parallel()
	srv, _ := bodyServer(t)
	res, err := http.Post(srv.URL+"/relais.worker.v1.WorkerService/Complete", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("worker protocol answer %d: Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff", res.StatusCode,
			res.Header.Get("Cache-Control"), res.Header.Get("X-Content-Type-Options"))
	}
}
