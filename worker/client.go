package worker

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// maxResponse bounds what the worker reads from one answer: a fetch of
// many tasks with large inputs is big, but never unbounded.
const maxResponse = 64 << 20

// networkError marks a request whose answer never arrived whole. Unlike
// an HTTP error status, the server may or may not have acted on it.
type networkError struct{ err error }

func (e *networkError) Error() string {
	if strings.Contains(e.err.Error(), "server gave HTTP response to HTTPS client") {
		return "relais: the URL says https:// but Relais answers plain HTTP there: use http:// (or serve Relais with TLS, RELAIS_TLS_CERT_FILE): " + e.err.Error()
	}
	// connect names a connection lost under a call by a gRPC code
	// ("canceled: … connection reset by peer"), which reads as a call
	// this worker cancelled: the cause says what happened (newcomer QA).
	var ce *connect.Error
	if errors.As(e.err, &ce) && !connect.IsWireError(ce) {
		if cause := ce.Unwrap(); cause != nil {
			return "relais: " + cause.Error()
		}
	}
	return "relais: " + e.err.Error()
}
func (e *networkError) Unwrap() error { return e.err }

// post sends body as JSON to path and decodes a 2xx answer into out.
// Errors are *APIError for an answer with another status and
// *networkError otherwise.
//
// A settlement names its attempt; a Relais before the attempt member
// refuses it as an unknown member: the request is sent again without it,
// and so are the next ones (the worker then settles as it did before).
func (w *Worker) post(ctx context.Context, path string, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("relais: encoding the request: %w", err)
	}
	if w.noAttempt.Load() {
		if p, ok := withoutAttempts(payload); ok {
			payload = p
		}
	}
	err = w.postPayload(ctx, path, payload, out)
	if attemptUnknown(err) {
		if p, ok := withoutAttempts(payload); ok {
			if !w.noAttempt.Swap(true) {
				w.log.Info("this Relais takes no attempt in settlements (a release before it did): settling without it")
			}
			err = w.postPayload(ctx, path, p, out)
		}
	}
	return err
}

func (w *Worker) postPayload(ctx context.Context, path string, payload []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+path, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("relais: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	return w.send(req, path, out)
}

// attemptUnknown reports a refusal of the attempt member as unknown.
func attemptUnknown(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return false
	}
	for _, fe := range ae.Errors {
		if strings.HasSuffix(fe.Path, "/attempt") && fe.Message == "unknown field" {
			return true
		}
	}
	return false
}

// withoutAttempts is payload without its attempt members (at the top, and
// in a batch's items); ok is false when it had none.
func withoutAttempts(payload []byte) ([]byte, bool) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(payload, &doc) != nil {
		return nil, false
	}
	_, found := doc["attempt"]
	delete(doc, "attempt")
	if raw, ok := doc["items"]; ok {
		var items []map[string]json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			for _, it := range items {
				if _, ok := it["attempt"]; ok {
					found = true
					delete(it, "attempt")
				}
			}
			doc["items"], _ = json.Marshal(items)
		}
	}
	if !found {
		return nil, false
	}
	out, err := json.Marshal(doc)
	return out, err == nil
}

// get reads path (with its query) as post does.
func (w *Worker) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.base+path, nil)
	if err != nil {
		return fmt.Errorf("relais: %w", err)
	}
	return w.send(req, path, out)
}

func (w *Worker) send(req *http.Request, path string, out any) error {
	ctx := req.Context()
	token, err := w.token(ctx)
	if err != nil {
		return err // a tokenError, retried: the next read may succeed
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", "relais-worker-go")
	resp, err := w.cfg.HTTPClient.Do(req)
	if err != nil {
		return &networkError{err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return &networkError{err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return problem(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		// A 2xx the worker cannot read is as good as lost: treat it like
		// a dropped connection so that callers retry it.
		return &networkError{fmt.Errorf("decoding the answer to %s: %w", path, err)}
	}
	return nil
}

// problem turns an error answer into an *APIError, keeping problem+json
// members beyond the standard ones in Extra.
func problem(resp *http.Response, data []byte) *APIError {
	ae := &APIError{Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil {
		// Not a problem document (a proxy's error page, say): a short
		// excerpt is enough to diagnose it.
		text := strings.TrimSpace(string(data))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		ae.Detail = text
		return ae
	}
	// A malformed member is left empty: the status alone still tells the
	// worker how to react.
	for k, v := range doc {
		switch k {
		case "code":
			_ = json.Unmarshal(v, &ae.Code)
		case "detail":
			_ = json.Unmarshal(v, &ae.Detail)
		case "errors":
			_ = json.Unmarshal(v, &ae.Errors)
		case "type", "title", "status":
		default:
			var x any
			if json.Unmarshal(v, &x) == nil {
				if ae.Extra == nil {
					ae.Extra = map[string]any{}
				}
				ae.Extra[k] = x
			}
		}
	}
	return ae
}

// parseRetryAfter reads Retry-After as seconds or as an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return max(time.Duration(secs)*time.Second, 0)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// newRequestID returns a random fetch request id.
func newRequestID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func occurrencePath(id, action string) string {
	return "/api/v1/pull/occurrences/" + url.PathEscape(id) + "/" + action
}

// backoff is exponential backoff with jitter. Half of each delay is
// random so that workers failing together do not retry together.
type backoff struct {
	min, max time.Duration
	n        int
}

func (b *backoff) next() time.Duration {
	d := b.min
	for i := 0; i < b.n && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	b.n++
	half := d / 2
	return half + rand.N(d-half+1)
}

func (b *backoff) reset() { b.n = 0 }

// sleepCtx waits d unless ctx ends first; it reports whether it waited.
// reached signals that a call reached Relais (see Worker.reachable).
func (w *Worker) reached() {
	select {
	case w.reachable <- struct{}{}:
	default:
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func isNetworkError(err error) bool {
	var ne *networkError
	return errors.As(err, &ne)
}

// neverSent reports whether err is a connection that could not be made
// (refused, unreachable, a name that does not resolve): the request never
// reached a server, so nothing it could have done needs replaying.
func neverSent(err error) bool {
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &oe) && oe.Op == "dial" || errors.As(err, &de)
}
