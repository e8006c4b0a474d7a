package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// A grants replacement with If-Match applies only to the grants it was
// made from: two admins each adding one grant, at once, keep both, and a
// withdrawal is not undone by a grant made from the list before it
// (verifier QA: 11 of 15 concurrent grants lost one).
func TestGrantsReplacedIfUnchanged(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	env.Definition("score_company.yaml")
	env.Consumer("crm-sync", key)
	id := env.ConsumerID("crm-sync")
	path := fmt.Sprint("/api/v1/consumers/", id)
	read := env.Must(200, "GET", path, env.Admin, nil)
	tag := read.Header.Get("ETag")
	if len(tag) != 34 {
		t.Fatalf("GET consumer ETag %q, want a quoted tag", tag)
	}
	if r := env.Do("GET", path, env.Admin, nil, "If-None-Match", tag); r.Status != http.StatusNotModified || len(r.Body) != 0 {
		t.Errorf("GET with If-None-Match its ETag: %d, %d bytes; want 304 without a body", r.Status, len(r.Body))
	}
	put := func(tag string, grants ...map[string]any) relaistest.Response {
		headers := []string{}
		if tag != "" {
			headers = []string{"If-Match", tag}
		}
		return env.Do("PUT", path+"/grants", env.Admin, map[string]any{"grants": grants}, headers...)
	}
	all := func(k string) map[string]any { return map[string]any{"definition": k, "revisions": "all"} }
	first := put(tag, all(key), all("score_company"))
	if first.Status != http.StatusOK || first.Header.Get("ETag") == tag || first.Header.Get("ETag") == "" {
		t.Fatalf("PUT with the current tag: %d %s, ETag %q", first.Status, first.Body, first.Header.Get("ETag"))
	}
	stale := put(tag, all(key))
	if stale.Status != http.StatusPreconditionFailed || stale.Code() != "grants_changed" {
		t.Errorf("PUT with a stale tag: %d %s, want 412 grants_changed", stale.Status, stale.Body)
	}
	if got := env.Must(200, "GET", path, env.Admin, nil).JSON(t)["grants"].([]any); len(got) != 2 {
		t.Errorf("the refused PUT changed the grants: %v", got)
	}
	for _, bad := range []string{`W/` + first.Header.Get("ETag"), "abc", first.Header.Get("ETag") + ", " + tag} {
		if r := put(bad, all(key)); r.Status != http.StatusBadRequest {
			t.Errorf("If-Match %q: %d, want 400", bad, r.Status)
		}
	}
	if r := put("*", all(key)); r.Status != http.StatusOK {
		t.Errorf("PUT with If-Match *: %d, want 200 (any grants, RFC 9110)", r.Status)
	}
	if r := put("", all(key)); r.Status != http.StatusOK {
		t.Errorf("PUT without If-Match: %d, want 200 (it replaces whatever is there)", r.Status)
	}

	// Many read-change-write cycles at once, each retried on 412: none is
	// lost.
	keys := []string{key, "score_company"}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			add := keys[i%2]
			for range 50 {
				cur := env.Do("GET", path, env.Admin, nil)
				grants := []map[string]any{}
				have := false
				for _, g := range cur.JSON(t)["grants"].([]any) {
					gm := g.(map[string]any)
					grants = append(grants, map[string]any{"definition": gm["definition"], "revisions": gm["revisions"]})
					have = have || gm["definition"] == add
				}
				if !have {
					grants = append(grants, all(add))
				}
				if r := put(cur.Header.Get("ETag"), grants...); r.Status == http.StatusOK {
					return
				} else if r.Status != http.StatusPreconditionFailed {
					t.Errorf("concurrent PUT: %d %s", r.Status, r.Body)
					return
				}
			}
			t.Error("a grant retried 50 times without success")
		})
		if i == 1 {
			// Both keys withdrawn between the first two and the others.
			wg.Wait()
			env.Must(200, "PUT", path+"/grants", env.Admin, map[string]any{"grants": []any{}})
		}
	}
	wg.Wait()
	got := env.Must(200, "GET", path, env.Admin, nil).JSON(t)["grants"].([]any)
	var names []string
	for _, g := range got {
		names = append(names, g.(map[string]any)["definition"].(string))
	}
	if strings.Join(names, ",") != key+",score_company" {
		t.Errorf("after concurrent grants: %v, want both keys", names)
	}
}
