package server

import (
	"bufio"
	"context"
	"log/slog"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"fmt"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/longpoll"
	"github.com/relais/relais/stream"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawPost sends a POST whose headers promise a body of length bytes and
// sends only sent of it, then reads the answer within wait.
func rawPost(t *testing.T, url, token string, length int, sent string, wait time.Duration) (*http.Response, error) {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /api/v1/tokens HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", host, token, length, sent)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	return http.ReadResponse(bufio.NewReader(conn), nil)
}

// An unknown token's request is answered 401 without its body being read:
// a client without a token cannot make the server hold a body of up to
// RELAIS_MAX_BODY_BYTES per connection while it trickles in.
func TestUnauthenticatedBodiesAreNotRead(t *testing.T) {
	t.Parallel()
	srv, _ := panicServer(t)
	res, err := rawPost(t, srv.URL, "rls_not-a-token-at-all-0123456789", 1<<20, `{"name":`, 5*time.Second)
	if err != nil {
		t.Fatalf("no answer while the body is still owed: %v; want 401 at once", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", res.StatusCode)
	}
}

// An authenticated body that does not arrive within bodyReadTimeout ends
// its request: a connection cannot be held open by sending slowly.
func TestSlowBodiesAreCutOff(t *testing.T) {
	// Not parallel: it shortens the package's bound for its own run.
	defer func(d time.Duration) { bodyReadTimeout = d }(bodyReadTimeout)
	bodyReadTimeout = 300 * time.Millisecond
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	d := Deps{Logger: logger, Config: config.Default(), Engine: engine.New(dbtest.Pool(t), engine.Options{Logger: logger}), Registry: reg}
	srv := httptest.NewServer(newHandler(d, longpoll.NewHub(10, reg), stream.New(logger, d.Config, d.Engine, d.Engine.LookupToken, reg)))
	t.Cleanup(srv.Close)
	token, _, cerr := d.Engine.CreateToken(context.Background(), "slow", auth.RoleAdmin, engine.Expiry{})
	if cerr != nil {
		t.Fatal(cerr)
	}
	began := time.Now()
	res, err := rawPost(t, srv.URL, token, 1<<20, `{"name":`, 10*time.Second)
	if err == nil {
		res.Body.Close()
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the request held its connection %v; want it cut off after about %v", took, bodyReadTimeout)
	}
}
