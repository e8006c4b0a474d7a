package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// TestHeadServedForGetRoutes: every GET route answers HEAD with the GET's
// status and headers and no body, an API route and a console page alike
// (chi alone answers 405 to a HEAD it has no route for).
func TestHeadServedForGetRoutes(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, c := range []struct {
		path, token string
		status      int
		contentType string
	}{
		{"/api/v1/definitions", env.Operator, 200, "application/json"},
		{"/api/v1/whoami", env.Admin, 200, "application/json"},
		{"/api/v1/definitions", "", 401, "application/problem+json"},
		{"/console/sign-in", "", 200, "text/html; charset=utf-8"},
		{"/healthz", "", 200, "application/json"},
	} {
		req, _ := http.NewRequest(http.MethodHead, env.URL+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.status || res.Header.Get("Content-Type") != c.contentType {
			t.Errorf("HEAD %s: %d %q; want %d %q", c.path, res.StatusCode, res.Header.Get("Content-Type"), c.status, c.contentType)
		}
	}
}

// TestClientCancellationIsNotAnError: a client that gives up on a request
// while the database is slow to answer is logged at info with status 499,
// never as an ERROR 500 (the failure was the client's departure).
func TestClientCancellationIsNotAnError(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	// Every API request looks its token up: hold the table so it waits.
	tx, err := env.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(context.Background(), "lock table tokens in access exclusive mode"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+env.Admin)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the request was answered (%d) although the tokens table is locked", res.StatusCode)
	}
	relaistest.WaitFor(t, 10*time.Second, "the abandoned request is logged", func() (bool, string) {
		return strings.Contains(env.Logs.String(), "route=/api/v1/whoami"), env.Logs.String()
	})
	logs := env.Logs.String()
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "route=/api/v1/whoami") && (!strings.Contains(line, "status=499") || !strings.Contains(line, "level=INFO")) {
			t.Errorf("request logged as %q; want level INFO, status 499", line)
		}
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("an abandoned request logged an error: %q", line)
		}
	}
}

// TestCutBodyIsTheClientsDeparture: a request whose body stops short (the
// client went away mid-upload, or a shutdown closed the connection) is
// logged as the client's departure (499 at info), not as 400 invalid_json
// blaming its data; a body whose framing is broken is still 400, and a
// process document cut off is not answered 413 body_too_large.
func TestCutBodyIsTheClientsDeparture(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	host := strings.TrimPrefix(env.URL, "http://")
	consumer := env.Consumer("cut", "crm.*")
	send := func(t *testing.T, path, head, body string, cut bool) string {
		t.Helper()
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		token := env.Admin
		if strings.HasPrefix(path, "/engine-rest/") {
			token = consumer
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n%s", path, host, token, head, body)
		if cut {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return fmt.Sprintf("%d %s", res.StatusCode, b)
	}
	paths := []string{"/api/v1/processes/p/instances", "/api/v1/processes/p/versions", "/engine-rest/external-task/0190a5f0-0000-7000-8000-000000000000/complete"}
	for _, path := range paths {
		if got := send(t, path, "Content-Length: 100\r\n", `{"inputs":`, true); !strings.HasPrefix(got, "499 ") {
			t.Errorf("POST %s with a body cut off: %s; want 499", path, got)
		}
		if got := send(t, path, "Transfer-Encoding: chunked\r\n", "zz\r\n{}\r\n0\r\n\r\n", false); !strings.HasPrefix(got, "400 ") || !strings.Contains(got, `invalid_json`) {
			t.Errorf("POST %s with broken chunks: %s; want 400 invalid_json", path, got)
		}
	}
	relaistest.WaitFor(t, 10*time.Second, "the cut requests are logged", func() (bool, string) {
		return strings.Count(env.Logs.String(), "status=499") >= len(paths), env.Logs.String()
	})
	for line := range strings.Lines(env.Logs.String()) {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "status=499") && !strings.Contains(line, "level=INFO") {
			t.Errorf("a cut request logged %q; want level INFO, status 499", line)
		}
	}
}

// A gRPC stream asked over HTTP/1.1 (505 from the worker protocol's
// handler, the reflection service's included, which needs no token) is
// the client's doing: logged at WARN, not ERROR (security QA: anyone could
// raise ERROR lines at will).
func TestHTTPVersionRefusalIsNoError(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/grpc")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusHTTPVersionNotSupported {
		t.Fatalf("the reflection stream over HTTP/1.1 answered %d, want 505", res.StatusCode)
	}
	relaistest.WaitFor(t, 5*time.Second, "the request is logged", func() (bool, string) {
		return strings.Contains(env.Logs.String(), "status=505"), env.Logs.String()
	})
	for line := range strings.Lines(env.Logs.String()) {
		if strings.Contains(line, "status=505") && !strings.Contains(line, "level=WARN") {
			t.Errorf("logged %q; want level WARN", line)
		}
	}
}
