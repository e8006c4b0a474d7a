package worker

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
)

// countingConn counts the writes of a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func TestSettlementIsOneWrite(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/proto")
	}))
	defer srv.Close()
	var writes atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	}}
	defer tr.CloseIdleConnections()
	w, err := New(Config{URL: srv.URL, Token: "t", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	c := newStreamClient(w)
	req := &workerv1.CompleteRequest{OccurrenceId: "01a24674-323e-717c-82f2-981853fb03c7", WorkerId: "w", Outputs: []byte(`{"customer_id":"C-1"}`)}
	for i := range 3 {
		before := writes.Load()
		if _, err := c.api.Complete(t.Context(), request(c, req)); err != nil && connect.CodeOf(err) == connect.CodeUnavailable {
			t.Fatal(err)
		}
		// Headers and body flushed apart are two system calls, and two
		// reads at the server.
		if n := writes.Load() - before; n != 1 {
			t.Errorf("call %d: the request took %d writes, want 1", i, n)
		}
	}
}
