package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNewTokenIsRandomAndHashed(t *testing.T) {
	t.Parallel()
	a, ha := NewToken()
	b, hb := NewToken()
	if a == b || bytes.Equal(ha, hb) {
		t.Fatal("two tokens are equal")
	}
	if !strings.HasPrefix(a, "rls_") || len(a) < 40 {
		t.Errorf("token %q lacks prefix or entropy", a)
	}
	if !bytes.Equal(Hash(a), ha) || len(ha) != 32 {
		t.Error("hash does not match")
	}
}

func TestRequire(t *testing.T) {
	t.Parallel()
	operator, opHash := NewToken()
	consumer, cHash := NewToken()
	lookup := func(_ context.Context, h []byte) (Principal, []byte, error) {
		switch {
		case bytes.Equal(h, opHash):
			return Principal{Name: "op", Role: RoleOperator}, opHash, nil
		case bytes.Equal(h, cHash):
			return Principal{Name: "c", Role: RoleConsumer}, cHash, nil
		}
		return Principal{}, nil, ErrUnknownToken
	}
	var seen Principal
	h := Require(lookup, nil, RoleOperator)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = FromContext(r.Context())
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

func TestAdminIsAllowedEverywhere(t *testing.T) {
	t.Parallel()
	if !Allowed(RoleAdmin, RoleConsumer) || Allowed(RoleOperator, RoleDesigner) {
		t.Fatal("Allowed is wrong")
	}
}
