package httpauth

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/relais/relais/internal/auth"
)

func TestRequire(t *testing.T) {
	t.Parallel()
	operator, opHash := auth.NewToken()
	consumer, cHash := auth.NewToken()
	lookup := func(_ context.Context, h []byte) (auth.Principal, []byte, error) {
		switch {
		case bytes.Equal(h, opHash):
			return auth.Principal{Name: "op", Role: auth.RoleOperator}, opHash, nil
		case bytes.Equal(h, cHash):
			return auth.Principal{Name: "c", Role: auth.RoleConsumer}, cHash, nil
		}
		return auth.Principal{}, nil, auth.ErrUnknownToken
	}
	var seen auth.Principal
	h := Require(lookup, nil, auth.RoleOperator)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = auth.FromContext(r.Context())
	}))
	tests := []struct {
		header     string
		wantStatus int
		wantCode   string
	}{
		{"", 401, "unauthorized"},
		{"Basic abc", 401, "unauthorized"},
		{"Bearer rls_wrong", 401, "unauthorized"},
		{"Bearer " + consumer, 403, "forbidden"},
		{"Bearer " + operator, 200, ""},
		{"bearer " + operator, 200, ""},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.wantStatus {
			t.Errorf("%q: status %d, want %d", tt.header, rec.Code, tt.wantStatus)
			continue
		}
		if tt.wantCode != "" {
			var p map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p["code"] != tt.wantCode {
				t.Errorf("%q: body %s, want code %s", tt.header, rec.Body, tt.wantCode)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("%q: content type %q", tt.header, ct)
			}
		}
	}
	if seen.Name != "op" {
		t.Errorf("principal in context = %+v", seen)
	}
}

// TestForbiddenNamesTheRolesAdmitted: a 403 says which token the route
// takes.
func TestForbiddenNamesTheRolesAdmitted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		roles []auth.Role
		want  string
	}{
		{nil, "an admin"},
		{[]auth.Role{auth.RoleAdmin}, "an admin"},
		{[]auth.Role{auth.RoleConsumer}, "a consumer"},
		{[]auth.Role{auth.RoleOperator, auth.RoleConsumer}, "an operator, a consumer or an admin"},
		{[]auth.Role{auth.RoleDesigner, auth.RoleOperator}, "a designer, an operator or an admin"},
	} {
		if got := needed(c.roles); got != c.want {
			t.Errorf("needed(%v) = %q, want %q", c.roles, got, c.want)
		}
	}
}

// A token sent without its scheme is told what the header must read;
// no header at all gets the plain answer.
func TestRequireNamesAMissingScheme(t *testing.T) {
	t.Parallel()
	token, _ := auth.NewToken()
	lookup := func(context.Context, []byte) (auth.Principal, []byte, error) {
		return auth.Principal{}, nil, auth.ErrUnknownToken
	}
	h := Require(lookup, nil, auth.RoleOperator)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for header, hint := range map[string]bool{"": false, token: true, "Token " + token: true} {
		req := httptest.NewRequest("GET", "/", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var p struct{ Detail string }
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 401 {
			t.Fatalf("%q: %d %s", header, rec.Code, rec.Body)
		}
		if got := bytes.Contains([]byte(p.Detail), []byte(`"Bearer "`)); got != hint {
			t.Errorf("%q: detail %q; want the scheme named: %v", header, p.Detail, hint)
		}
		if bytes.Contains([]byte(p.Detail), []byte(token)) {
			t.Errorf("%q: the detail quotes the token", header)
		}
	}
}

// Two Authorization headers authenticate nobody (security QA: the first
// won, where a proxy reading the last would authorize another principal).
func TestRequireRefusesTwoAuthorizationHeaders(t *testing.T) {
	t.Parallel()
	token, _ := auth.NewToken()
	lookup := func(context.Context, []byte) (auth.Principal, []byte, error) {
		return auth.Principal{Role: auth.RoleAdmin}, nil, nil
	}
	reached := false
	h := Require(lookup, nil, auth.RoleOperator)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Add("Authorization", "Bearer "+token)
	req.Header.Add("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || reached || !bytes.Contains(rec.Body.Bytes(), []byte("gives the header 2 times")) {
		t.Errorf("two headers: %d %s (handler reached %v), want 401 saying so", rec.Code, rec.Body, reached)
	}
	if _, ok := Bearer(req.Header); ok {
		t.Error("Bearer read a token from two headers")
	}
}
