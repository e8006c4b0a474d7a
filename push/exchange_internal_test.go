package push

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
)

// breakableConn fails every write, writing nothing, once broken: a
// connection the destination reset while it sat idle in the pool.
type breakableConn struct {
	net.Conn
	broken *atomic.Bool
}

func (c *breakableConn) Write(p []byte) (int, error) {
	if c.broken.Load() {
		return 0, syscall.ECONNRESET
	}
	return c.Conn.Write(p)
}

// A request of which not a byte reached the network cannot have been acted
// on: on a reused connection it is made again once, on a fresh one it
// fails connection_failed, never outcome_unknown. (net/http's WroteRequest
// trace says written once the request is in the connection's buffer,
// before any of it is flushed.)
func TestARequestThatNeverLeftIsNotOutcomeUnknown(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"outputs": map[string]any{"score": 1}})
	}))
	t.Cleanup(srv.Close)

	r := NewRunner(nil, slog.New(slog.DiscardHandler), config.Push{Concurrency: 2, MaxResponseBytes: 1 << 20, MaxTimeout: 5 * time.Second}, nil)
	var breakNext atomic.Bool // the connections dialled from now on fail their writes
	var first atomic.Pointer[atomic.Bool]
	dial := (&net.Dialer{}).DialContext
	r.client.Transport.(*http.Transport).DialContext = countingDial(func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		broken := &atomic.Bool{}
		broken.Store(breakNext.Load())
		first.CompareAndSwap(nil, broken)
		return &breakableConn{Conn: conn, broken: broken}, nil
	})
	call := func() engine.PushResult {
		c := engine.PushCall{ID: uuid.Must(uuid.NewV7()), Definition: "d", Revision: 1, Attempt: 1, Inputs: json.RawMessage(`{}`), URL: srv.URL}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return r.call(ctx, c, 5*time.Second)
	}

	if res := call(); res.ErrorCode != "" {
		t.Fatalf("first call: %s %s", res.ErrorCode, res.Message)
	}
	// The pooled connection is reset: the next call writes nothing to it,
	// and is made again, once, on a new connection.
	first.Load().Store(true)
	if res := call(); res.ErrorCode != "" {
		t.Fatalf("a call on a connection reset while idle: %s %s, want it made again on a new one", res.ErrorCode, res.Message)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the destination got %d requests, want 2", n)
	}
	// Every connection fails its writes: nothing reached the destination.
	breakNext.Store(true)
	r.client.CloseIdleConnections()
	res := call()
	if res.ErrorCode != engine.CodeConnectionFailed {
		t.Errorf("a request that never left: %s %q, want connection_failed", res.ErrorCode, res.Message)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the destination got %d requests, want 2", n)
	}
}

// A call whose budget ends while it connects (a host that drops packets)
// sent nothing the destination could act on: connection_failed, not
// deadline_exceeded, which says it may have acted (push QA). One whose
// request was sent and whose answer never came is deadline_exceeded.
func TestABudgetSpentConnectingIsConnectionFailed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	// The dial a call started is in the hole by the time the call ends
	// (its budget): the cleanup lets it out and waits for it to leave.
	var inHole atomic.Int32
	t.Cleanup(silent.Close)
	t.Cleanup(func() { // first: Close waits for the handler
		close(release)
		for inHole.Load() > 0 {
			time.Sleep(time.Millisecond)
		}
	})
	r := NewRunner(nil, slog.New(slog.DiscardHandler), config.Push{Concurrency: 2, MaxResponseBytes: 1 << 20, MaxTimeout: 5 * time.Second}, nil)
	var blackHole atomic.Bool
	dial := (&net.Dialer{}).DialContext
	r.client.Transport.(*http.Transport).DialContext = countingDial(func(ctx context.Context, network, addr string) (net.Conn, error) {
		if blackHole.Load() {
			// net/http dials past a request's end (for its pool): the
			// hole holds its dial until the test ends.
			inHole.Add(1)
			defer inHole.Add(-1)
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, syscall.ETIMEDOUT
		}
		return dial(ctx, network, addr)
	})
	call := func() engine.PushResult {
		c := engine.PushCall{ID: uuid.Must(uuid.NewV7()), Definition: "d", Revision: 1, Attempt: 1, Inputs: json.RawMessage(`{}`), URL: silent.URL}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return r.call(ctx, c, 300*time.Millisecond)
	}
	if res := call(); res.ErrorCode != engine.CodeDeadlineExceeded {
		t.Errorf("a request sent, its answer never come: %s %s; want deadline_exceeded", res.ErrorCode, res.Message)
	}
	r.client.Transport.(*http.Transport).CloseIdleConnections()
	blackHole.Store(true)
	if res := call(); res.ErrorCode != engine.CodeConnectionFailed {
		t.Errorf("a budget spent connecting: %s %s; want connection_failed", res.ErrorCode, res.Message)
	}
}

// rawServer is a TCP server that reads what a connection sends first, then
// writes answer and closes: a destination speaking another protocol than
// its URL says. It returns its address.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			_, _ = conn.Read(buf)
			_, _ = conn.Write([]byte(answer))
			conn.Close()
		}
	}()
	return ln.Addr().String()
}

// callOnce makes one push call to url with a fresh runner.
func callOnce(t *testing.T, url string) engine.PushResult {
	t.Helper()
	r := NewRunner(nil, slog.New(slog.DiscardHandler), config.Push{Concurrency: 2, MaxResponseBytes: 1 << 20, MaxTimeout: 5 * time.Second}, nil)
	c := engine.PushCall{ID: uuid.Must(uuid.NewV7()), Definition: "d", Revision: 1, Attempt: 1, Inputs: json.RawMessage(`{}`), URL: url}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.call(ctx, c, 5*time.Second)
}

// A destination whose URL says http:// but which speaks TLS answers a TLS
// alert (Go's own TLS servers answer 400 instead): it cannot have acted on
// the plain request, so the call is connection_failed saying to use
// https, not outcome_unknown (push QA).
func TestPlainHTTPToATLSDestinationIsConnectionFailed(t *testing.T) {
	t.Parallel()
	// A TLS record of an alert, handshake_failure, as a TLS server answers
	// bytes that are no ClientHello.
	addr := rawServer(t, "\x15\x03\x01\x00\x02\x02\x28")
	if res := callOnce(t, "http://"+addr+"/score"); res.ErrorCode != engine.CodeConnectionFailed || !strings.Contains(res.Message, "https://") {
		t.Errorf("plain HTTP to a TLS server: %s %q; want connection_failed naming https", res.ErrorCode, res.Message)
	}
}

// The reverse: an https:// URL to a plain HTTP server says to use http://
// (push QA: "first record does not look like a TLS handshake" alone),
// whether the server answers in HTTP (net/http names that case) or with
// anything else that is no TLS.
func TestTLSToAPlainHTTPDestinationSaysHTTP(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	for what, addr := range map[string]string{"HTTP": srv.Listener.Addr().String(), "garbage": rawServer(t, "<html>bad request</html>\n")} {
		if res := callOnce(t, "https://"+addr+"/score"); res.ErrorCode != engine.CodeConnectionFailed || !strings.Contains(res.Message, "should start with http://") {
			t.Errorf("TLS to a server answering %s: %s %q; want connection_failed naming http://", what, res.ErrorCode, res.Message)
		}
	}
}

// An answer in an encoding Relais did not ask for is said as such, not as
// JSON that does not parse (push QA: a deflate answer).
func TestAnAnswerInAnotherEncodingSaysSo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "deflate")
		var b bytes.Buffer
		zw, _ := flate.NewWriter(&b, flate.DefaultCompression)
		_, _ = zw.Write([]byte(`{"outputs": {}}`))
		_ = zw.Close()
		_, _ = w.Write(b.Bytes())
	}))
	t.Cleanup(srv.Close)
	if res := callOnce(t, srv.URL+"/score"); res.ErrorCode != engine.CodeInvalidOutputs || !strings.Contains(res.Message, `Content-Encoding: "deflate"`) {
		t.Errorf("a deflate answer: %s %q; want invalid_outputs naming the encoding", res.ErrorCode, res.Message)
	}
}
