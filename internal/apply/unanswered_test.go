package apply_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/relais/relais/internal/apply"
)

// A write that gets no answer (the connection dropped, a timeout) may have
// landed: its problem says the outcome is unknown, where a refusal, or a
// read that got no answer, is not.
func TestAWriteWithoutAnAnswerHasAnUnknownOutcome(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			// Gone before answering, as a server killed mid-request.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		http.Error(w, `{"code":"forbidden","detail":"no"}`, http.StatusForbidden)
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "dest.yaml")
	if err := os.WriteFile(file, []byte("kind: Destination\nname: api\nurl: https://example.com/x\nmax_timeout: PT2S\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	docs, problems, err := apply.Load(file)
	if err != nil || len(problems) > 0 {
		t.Fatalf("load: %v %v", problems, err)
	}
	c := &apply.Client{URL: srv.URL, Token: "rls_x"}
	got := c.Apply(context.Background(), docs, false, func(apply.Result) {})
	if len(got) != 1 || !got[0].Unknown {
		t.Errorf("a PUT without an answer: %+v, want one problem with an unknown outcome", got)
	}
	if dry := c.Apply(context.Background(), docs, true, func(apply.Result) {}); len(dry) != 1 || dry[0].Unknown {
		t.Errorf("a dry run without an answer: %+v, want a problem whose outcome is known (nothing changes)", dry)
	}
}
