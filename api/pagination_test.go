package api_test

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// pageThrough follows next_cursor from the first page of path with the
// limit, failing past maxPages, and returns the value of field of every
// item with the size of each page.
func pageThrough(t *testing.T, env *relaistest.Env, token, path, field string, limit, maxPages int) (values []string, sizes []int) {
	t.Helper()
	cursor := ""
	for range maxPages {
		res := env.Must(200, "GET", fmt.Sprintf("%s?limit=%d&cursor=%s", path, limit, cursor), token, nil).JSON(t)
		items := res["items"].([]any)
		sizes = append(sizes, len(items))
		for _, it := range items {
			values = append(values, fmt.Sprint(it.(map[string]any)[field]))
		}
		next, _ := res["next_cursor"].(string)
		if next == "" {
			return values, sizes
		}
		cursor = next
	}
	t.Fatalf("%s: more than %d pages of %d", path, maxPages, limit)
	return nil, nil
}

// TestReleasesArePaginated: the releases list is keyset-paginated like
// every list (DESIGN §9), in publication order, and refuses a bad cursor or
// limit with the same 400 as the other lists.
func TestReleasesArePaginated(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("score_company.yaml")
	base := "/api/v1/definitions/" + key + "/releases"
	// Published in an order that is not the names' order.
	published := []string{"2026.5", "2026.1", "2026.4", "2026.2", "2026.3"}
	for _, name := range published {
		env.Must(201, "POST", base, env.Designer, map[string]any{"name": name, "revision": 1})
	}
	names, sizes := pageThrough(t, env, env.Operator, base, "name", 2, 5)
	if !reflect.DeepEqual(names, published) || !reflect.DeepEqual(sizes, []int{2, 2, 1}) {
		t.Errorf("paged releases %v in pages of %v; want %v in pages of [2 2 1]", names, sizes, published)
	}
	if all := env.Must(200, "GET", base, env.Operator, nil).JSON(t); len(all["items"].([]any)) != 5 || all["next_cursor"] != nil {
		t.Errorf("default page = %v; want the 5 releases and no cursor", all)
	}
	wantRefusals(t, env, env.Operator, base)
	wantRefusals(t, env, env.Operator, "/api/v1/definitions")
	if r := env.Do("GET", "/api/v1/definitions/nothing/releases", env.Operator, nil); r.Status != 404 {
		t.Errorf("releases of an unknown definition: %d %s", r.Status, r.Body)
	}
}

// wantRefusals checks the 400s of a list: limits out of range, cursors
// the API did not return (one holding the NUL character, which PostgreSQL
// would refuse, included).
func wantRefusals(t *testing.T, env *relaistest.Env, token, path string) {
	t.Helper()
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "limit="} {
		if r := env.Do("GET", path+"?"+q, token, nil); r.Status != 400 || r.Code() != "invalid_request" {
			t.Errorf("%s?%s: %d %s; want 400 invalid_request", path, q, r.Status, r.Body)
		}
	}
	for _, c := range []string{"garbage!", base64.RawURLEncoding.EncodeToString([]byte(`{"x":`)), base64.RawURLEncoding.EncodeToString([]byte(`[1]`)),
		base64.RawURLEncoding.EncodeToString([]byte(`"\u0000"`)), base64.RawURLEncoding.EncodeToString([]byte(`null`))} {
		if r := env.Do("GET", path+"?cursor="+c, token, nil); r.Status != 400 || r.Code() != "invalid_cursor" {
			t.Errorf("%s?cursor=%s: %d %s; want 400 invalid_cursor", path, c, r.Status, r.Body)
		}
	}
}
