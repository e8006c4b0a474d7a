package server_test

import (
	"context"
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
