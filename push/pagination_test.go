package push_test

import (
	"encoding/base64"
	"reflect"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// TestDestinationsArePaginated: the destinations list is keyset-paginated
// by name like every list (DESIGN §9), and refuses a bad cursor or limit
// with the same 400 as the other lists.
func TestDestinationsArePaginated(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, name := range []string{"erp", "billing", "crm", "alerts", "dwh"} {
		env.Must(201, "PUT", "/api/v1/destinations/"+name, env.Admin, map[string]any{"url": "http://127.0.0.1:9/" + name, "max_timeout": "PT5S"})
	}
	var names []string
	var sizes []int
	cursor := ""
	for range 5 {
		res := env.Must(200, "GET", "/api/v1/destinations?limit=2&cursor="+cursor, env.Admin, nil).JSON(t)
		items := res["items"].([]any)
		sizes = append(sizes, len(items))
		for _, it := range items {
			names = append(names, it.(map[string]any)["name"].(string))
		}
		if cursor, _ = res["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if want := []string{"alerts", "billing", "crm", "dwh", "erp"}; !reflect.DeepEqual(names, want) || !reflect.DeepEqual(sizes, []int{2, 2, 1}) {
		t.Errorf("paged destinations %v in pages of %v; want %v in pages of [2 2 1]", names, sizes, want)
	}

	for _, q := range []string{"limit=0", "limit=501", "limit=two"} {
		if r := env.Do("GET", "/api/v1/destinations?"+q, env.Admin, nil); r.Status != 400 || r.Code() != "invalid_request" {
			t.Errorf("?%s: %d %s; want 400 invalid_request", q, r.Status, r.Body)
		}
	}
	for _, c := range []string{"not-a-cursor!", base64.RawURLEncoding.EncodeToString([]byte(`42`)), base64.RawURLEncoding.EncodeToString([]byte(`"\u0000"`))} {
		if r := env.Do("GET", "/api/v1/destinations?cursor="+c, env.Admin, nil); r.Status != 400 || r.Code() != "invalid_cursor" {
			t.Errorf("?cursor=%s: %d %s; want 400 invalid_cursor", c, r.Status, r.Body)
		}
	}
	if r := env.Do("GET", "/api/v1/destinations", env.Operator, nil); r.Status != 403 {
		t.Errorf("an operator listed destinations: %d", r.Status)
	}
}
