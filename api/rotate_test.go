package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// A rotation with an overlap keeps the old token working for that long,
// so that workers can be given the new one first; without one the old
// token stops at once. Overlaps out of bounds are refused.
func TestRotationOverlap(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	c := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm-sync",
		"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": "all"}}}).JSON(t)
	path := fmt.Sprintf("/api/v1/consumers/%v/rotate", c["id"])
	old := c["token"].(string)

	for _, bad := range []map[string]any{{"overlap": "P8D"}, {"overlap": "PT-1S"}, {"overlap": "soon"}, {"overlap": 60}, {"grace": "PT1M"}} {
		if r := env.Do("POST", path, env.Admin, bad); r.Status != 400 {
			t.Errorf("rotate with %v: %d %s, want 400", bad, r.Status, r.Body)
		}
	}
	if r := env.Do("POST", path, env.Admin, map[string]any{"overlap": "P8D"}).JSON(t); r["code"] != "bound_exceeded" || r["field"] != "overlap" || r["ceiling"] != "P7D" {
		t.Errorf("an overlap above the ceiling: %v, want bound_exceeded naming overlap and P7D, as every bound does", r)
	}
	if r := env.Do("GET", "/api/v1/whoami", old, nil); r.Status != 200 {
		t.Fatalf("a refused rotation changed the token: %d", r.Status)
	}

	rotated := time.Now()
	res := env.Must(200, "POST", path, env.Admin, map[string]any{"overlap": "PT2S"}).JSON(t)
	fresh := res["token"].(string)
	until := relaistest.TimeOf(t, "previous_tokens_expire_at", res["previous_tokens_expire_at"])
	if d := until.Sub(rotated); d < time.Second || d > 4*time.Second {
		t.Errorf("previous_tokens_expire_at %v, want about 2s after the rotation (%v)", until, rotated)
	}
	for name, token := range map[string]string{"old": old, "new": fresh} {
		if r := env.Do("GET", "/api/v1/whoami", token, nil); r.Status != 200 {
			t.Errorf("the %s token within the overlap: %d, want 200", name, r.Status)
		}
	}
	relaistest.WaitFor(t, 5*time.Second, "the old token stops after the overlap", func() (bool, string) {
		r := env.Do("GET", "/api/v1/whoami", old, nil)
		return r.Status == 401, fmt.Sprint(r.Status)
	})
	if r := env.Do("GET", "/api/v1/whoami", fresh, nil); r.Status != 200 {
		t.Errorf("the new token after the overlap: %d, want 200", r.Status)
	}

	// Without an overlap, the token in use stops at once.
	res = env.Must(200, "POST", path, env.Admin, nil).JSON(t)
	if _, ok := res["previous_tokens_expire_at"]; ok {
		t.Errorf("a rotation without overlap answered %v", res)
	}
	if r := env.Do("GET", "/api/v1/whoami", fresh, nil); r.Status != 401 {
		t.Errorf("the replaced token after a rotation without overlap: %d, want 401", r.Status)
	}
	if r := env.Do("GET", "/api/v1/whoami", res["token"].(string), nil); r.Status != 200 {
		t.Errorf("the newest token: %d, want 200", r.Status)
	}
}
