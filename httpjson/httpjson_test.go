package httpjson

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/fault"
)

type body struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		wantCode string
		wantPath string
	}{
		{`{"name":"a","count":1}`, "", ""},
		{`{"name":"a","colour":"red"}`, "unknown_field", "/colour"},
		{`{"name":`, "invalid_json", ""},
		{``, "invalid_json", ""},
		{`{"name":"a"} {"name":"b"}`, "invalid_json", ""},
		{`{"count":"three"}`, "invalid_json", "/count"},
		{`{"name":"` + strings.Repeat("x", 200) + `"}`, "body_too_large", ""},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("POST", "/", strings.NewReader(tt.in))
		_, err := Decode[body](httptest.NewRecorder(), req, 100)
		if tt.wantCode == "" {
			if err != nil {
				t.Errorf("%.40s: %v", tt.in, err)
			}
			continue
		}
		fe, ok := fault.As(err)
		if !ok || fe.Code != tt.wantCode {
			t.Errorf("%.40s: error %v; want code %s", tt.in, err, tt.wantCode)
			continue
		}
		if tt.wantPath != "" && (len(fe.Errors) == 0 || fe.Errors[0].Path != tt.wantPath) {
			t.Errorf("%.40s: errors %v; want path %s", tt.in, fe.Errors, tt.wantPath)
		}
	}
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	fe := fault.New(fault.TooManyRequests, "too_many_waiters", "full")
	fe.RetryAfter = 1500 * time.Millisecond
	fe.Extra = map[string]any{"ceiling": 10, "code": "must not override"}
	WriteError(rec, httptest.NewRequest("GET", "/", nil), nil, fe)
	var p map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" || rec.Header().Get("Content-Type") != ProblemContentType {
		t.Errorf("status %d, Retry-After %q, type %q", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Content-Type"))
	}
	if p["type"] != "urn:relais:problem:too_many_waiters" || p["code"] != "too_many_waiters" || p["ceiling"] != 10.0 || p["status"] != 429.0 {
		t.Errorf("problem = %v", p)
	}

	// Errors that are not faults are internal: their text is not shown.
	rec = httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/", nil), nil, errors.New("pq: secret table detail"))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "secret table") {
		t.Errorf("internal error shown: %d %s", rec.Code, rec.Body)
	}
}
