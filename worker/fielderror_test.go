package worker

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

// A contract's refusal reads in a log as pointers and messages, not as
// Go's struct syntax (a newcomer's log showed {Path:… Message:…}).
func TestFieldErrorsInALog(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Error("outputs violate the contract", "errors",
		[]FieldError{{Path: "/outputs/result", Message: `must be one of "created", "existing"`}})
	if got := buf.String(); !strings.Contains(got, `/outputs/result: must be one of`) || strings.Contains(got, "Path:") {
		t.Errorf("log line %q, want the pointer and its message", got)
	}
}

// A connection lost under a streamed call reads as lost, not as the gRPC
// code connect gives it ("canceled": a newcomer read it as a call the
// worker cancelled).
func TestNetworkErrorSaysTheCause(t *testing.T) {
	cause := errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer")
	err := &networkError{connect.NewError(connect.CodeCanceled, cause)}
	if got := err.Error(); got != "relais: "+cause.Error() {
		t.Errorf("Error() = %q, want the cause", got)
	}
	if !errors.Is(err, cause) {
		t.Error("the cause is no longer in the chain")
	}
}

// An https:// URL to a plain HTTP listener fails in this client, which
// connect reports as Unavailable: not Relais's 503 (newcomer QA), and the
// message says what to change.
func TestAnHTTPSURLToPlainHTTPIsNoServerError(t *testing.T) {
	cause := errors.New("http: server gave HTTP response to HTTPS client")
	err := wireError(connect.NewError(connect.CodeUnavailable, cause))
	var ae *APIError
	if errors.As(err, &ae) {
		t.Fatalf("wireError = %v, an API error with status %d; want a network error", err, ae.Status)
	}
	if got := err.Error(); !strings.Contains(got, "use http://") {
		t.Errorf("Error() = %q, want the URL's fix", got)
	}
}

// A report whose token TokenFunc could not give, failed in the stream's
// interceptor, is said as the worker's own, never as Relais's answer
// (verifier QA: "relais: worker: TokenFunc …").
func TestATokenFailureUnderAStreamedCallIsTheWorkers(t *testing.T) {
	te := &tokenError{errors.New("open /run/secrets/relais: no such file or directory")}
	err := wireError(connect.NewError(connect.CodeUnknown, te))
	if got := err.Error(); strings.HasPrefix(got, "relais:") || !strings.HasPrefix(got, "worker: TokenFunc gave no token") {
		t.Errorf("Error() = %q, want the token's failure, unprefixed", got)
	}
}
