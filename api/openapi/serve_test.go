package openapi_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/relais/relais/api/openapi"
	"github.com/relais/relais/internal/relaistest"
)

// The served document can be revalidated: it carries a strong ETag, the
// hash of the bytes served, and an If-None-Match naming it (as RFC 9110's
// weak comparison reads a list) gets 304 without a body instead of the
// whole document again.
func TestServeAnswersIfNoneMatch(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256(openapi.JSON())
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	if openapi.ETag() != etag {
		t.Fatalf("ETag %s, want the SHA-256 of the served bytes %s", openapi.ETag(), etag)
	}
	for _, c := range []struct {
		ifNoneMatch []string
		want        int
	}{
		{nil, http.StatusOK},
		{[]string{etag}, http.StatusNotModified},
		{[]string{"W/" + etag}, http.StatusNotModified},
		{[]string{"*"}, http.StatusNotModified},
		{[]string{`"other", ` + etag}, http.StatusNotModified},
		{[]string{`"other"`, `W/"x",` + etag}, http.StatusNotModified},
		{[]string{`"other"`}, http.StatusOK},
		{[]string{`"a,b", "c"`}, http.StatusOK},
		{[]string{etag[:20]}, http.StatusOK},
		{[]string{etag[1 : len(etag)-1]}, http.StatusOK}, // unquoted: not an entity tag
		{[]string{""}, http.StatusOK},
	} {
		r := httptest.NewRequest("GET", "/api/v1/openapi.json", nil)
		for _, v := range c.ifNoneMatch {
			r.Header.Add("If-None-Match", v)
		}
		w := httptest.NewRecorder()
		openapi.Serve(w, r)
		if w.Code != c.want {
			t.Errorf("If-None-Match %q: %d, want %d", c.ifNoneMatch, w.Code, c.want)
		}
		if got := w.Header().Get("ETag"); got != etag {
			t.Errorf("If-None-Match %q: ETag %q", c.ifNoneMatch, got)
		}
		if got := w.Header().Get("Cache-Control"); got != "no-cache" {
			t.Errorf("If-None-Match %q: Cache-Control %q", c.ifNoneMatch, got)
		}
		switch {
		case c.want == http.StatusNotModified && w.Body.Len() != 0:
			t.Errorf("If-None-Match %q: 304 with a body of %d bytes", c.ifNoneMatch, w.Body.Len())
		case c.want == http.StatusOK && w.Body.String() != string(openapi.JSON()):
			t.Errorf("If-None-Match %q: 200 without the document", c.ifNoneMatch)
		}
	}
}

// Through the API, as a client revalidates its copy: both answers are as
// the document describes them.
func TestServedDocumentRevalidates(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	v := newValidator(t)
	const path = "/api/v1/openapi.json"
	first := env.Do("GET", path, env.Operator, nil, "Accept-Encoding", "identity")
	sum := sha256.Sum256(first.Body)
	etag := first.Header.Get("ETag")
	if etag != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Fatalf("ETag %q is not the hash of the %d bytes served", etag, len(first.Body))
	}
	checkResponse(t, v, "GET", validatorRequest(t, "GET", path, ""), first)

	again := env.Do("GET", path, env.Operator, nil, "If-None-Match", etag, "Accept-Encoding", "identity")
	if again.Status != http.StatusNotModified || len(again.Body) != 0 {
		t.Fatalf("If-None-Match its ETag: %d with %d bytes, want 304 without a body", again.Status, len(again.Body))
	}
	if again.Header.Get("ETag") != etag || again.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("304: ETag %q, Cache-Control %q", again.Header.Get("ETag"), again.Header.Get("Cache-Control"))
	}
	req := validatorRequest(t, "GET", path, "")
	req.Header.Set("If-None-Match", etag)
	checkResponse(t, v, "GET If-None-Match", req, again)

	if r := env.Do("GET", path, env.Operator, nil, "If-None-Match", `"stale"`); r.Status != http.StatusOK || len(r.Body) != len(first.Body) {
		t.Errorf("If-None-Match another tag: %d with %d bytes, want the document", r.Status, len(r.Body))
	}
	// Compressed for a client that takes gzip (OpenAPI QA: 170 KB sent
	// whole), under the tag of its own bytes; either tag revalidates.
	zipped := env.Do("GET", path, env.Operator, nil, "Accept-Encoding", "br, gzip;q=0.8")
	zsum := sha256.Sum256(zipped.Body)
	zr, err := gzip.NewReader(bytes.NewReader(zipped.Body))
	if err != nil {
		t.Fatalf("gzip answer: %v (Content-Encoding %q)", err, zipped.Header.Get("Content-Encoding"))
	}
	unzipped, _ := io.ReadAll(zr)
	ztag := zipped.Header.Get("ETag")
	if zipped.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(unzipped, first.Body) || len(zipped.Body)*4 > len(first.Body) ||
		ztag != `"`+hex.EncodeToString(zsum[:])+`"` || !strings.Contains(zipped.Header.Get("Vary"), "Accept-Encoding") {
		t.Errorf("gzip: %d bytes, Content-Encoding %q, ETag %q, Vary %q; want the document compressed under its own hash", len(zipped.Body),
			zipped.Header.Get("Content-Encoding"), ztag, zipped.Header.Get("Vary"))
	}
	for _, tag := range []string{etag, ztag} {
		if r := env.Do("GET", path, env.Operator, nil, "If-None-Match", tag, "Accept-Encoding", "gzip"); r.Status != http.StatusNotModified {
			t.Errorf("gzip, If-None-Match %s: %d, want 304", tag, r.Status)
		}
	}
	if r := env.Do("GET", path, env.Operator, nil, "Accept-Encoding", "gzip;q=0"); r.Header.Get("Content-Encoding") != "" || len(r.Body) != len(first.Body) {
		t.Errorf("gzip;q=0: Content-Encoding %q, %d bytes; want the JSON", r.Header.Get("Content-Encoding"), len(r.Body))
	}
	if r := env.Do("GET", path, "", nil, "If-None-Match", etag); r.Status != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401 (a 304 would tell the version to anyone)", r.Status)
	}
}
