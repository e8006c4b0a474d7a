package relaistest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// RecordEnv names the folder where, when it is set, every Env records the
// exchanges of the documented surfaces (/api/v1 and /engine-rest), one
// JSON line each, in one file per test process. The OpenAPI test
// (api/openapi) replays them through a validator: the suite's real
// traffic checks the document, and the document the traffic.
const RecordEnv = "RELAIS_OPENAPI_RECORD"

// InjectedFaultHeader marks a request a test makes fail on purpose (a
// trigger that breaks a statement): its 5xx answer is what the test
// checks, not a bug the recorded exchanges should report.
const InjectedFaultHeader = "X-Relais-Test-Fault"

// Exchange is one recorded request and its response. Credentials are not
// kept: Authorization keeps its scheme only.
type Exchange struct {
	Method          string            `json:"method"`
	URL             string            `json:"url"` // path and query
	RequestHeaders  map[string]string `json:"request_headers"`
	RequestBody     []byte            `json:"request_body"`
	Status          int               `json:"status"`
	ResponseHeaders map[string]string `json:"response_headers"`
	ResponseBody    []byte            `json:"response_body"`
}

// recordedPrefixes are the surfaces the OpenAPI document describes.
var recordedPrefixes = []string{"/api/v1/", "/api/v1?", "/engine-rest/", "/engine-rest?", "/healthz", "/readyz", "/metrics"}

var recording struct {
	once sync.Once
	mu   sync.Mutex
	file *os.File
	err  error
}

// recorder wraps h so that it records every exchange of the documented
// surfaces into dir; without dir it returns h.
func recorder(dir string, h http.Handler) (http.Handler, error) {
	if dir == "" {
		return h, nil
	}
	recording.once.Do(func() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			recording.err = err
			return
		}
		name := fmt.Sprintf("%s-%d.jsonl", strings.TrimSuffix(filepath.Base(os.Args[0]), ".test"), os.Getpid())
		recording.file, recording.err = os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	})
	if recording.err != nil {
		return nil, fmt.Errorf("relaistest: record exchanges: %w", recording.err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri := r.URL.RequestURI()
		if !recorded(uri) {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		var rest io.Reader = bytes.NewReader(body)
		if err != nil {
			// The handler must meet the failure the client caused (a body
			// cut off, broken chunks), not a shorter body that ends well.
			rest = io.MultiReader(rest, failingReader{err})
		}
		r.Body = io.NopCloser(rest)
		ex := Exchange{Method: r.Method, URL: uri, RequestBody: body, RequestHeaders: map[string]string{}}
		for _, k := range []string{"Content-Type", "Idempotency-Key", "Accept", InjectedFaultHeader} {
			if v := r.Header.Get(k); v != "" {
				ex.RequestHeaders[k] = v
			}
		}
		if scheme, _, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok {
			ex.RequestHeaders["Authorization"] = scheme + " " + base64.StdEncoding.EncodeToString([]byte("redacted:redacted"))
		} else if v := r.Header.Get("Authorization"); v != "" {
			ex.RequestHeaders["Authorization"] = v
		}
		rw := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rw, r)
		ex.Status, ex.ResponseBody = rw.status, rw.body.Bytes()
		ex.ResponseHeaders = map[string]string{}
		for k := range w.Header() {
			ex.ResponseHeaders[k] = w.Header().Get(k)
		}
		line, _ := json.Marshal(ex)
		recording.mu.Lock()
		defer recording.mu.Unlock()
		_, _ = recording.file.Write(append(line, '\n'))
	}), nil
}

func recorded(uri string) bool {
	for _, p := range recordedPrefixes {
		if strings.HasPrefix(uri, p) || uri == strings.TrimRight(p, "/?") {
			return true
		}
	}
	return false
}

// recordingWriter keeps a copy of what a handler writes.
type recordingWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (w *recordingWriter) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.wroteHeader = true
	w.body.Write(p)
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the real writer (flushes,
// deadlines).
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// failingReader fails every read with err.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }
