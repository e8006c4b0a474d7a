package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// The address serve prints answers: a browser goes to the console, any
// other client reads where things are (it was a 404, newcomer QA).
func TestTheRootSaysWhereThingsAre(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", env.URL+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/console/" {
		t.Errorf("a browser's GET /: %d to %q, want 302 to /console/", res.StatusCode, res.Header.Get("Location"))
	}
	got := env.Do("GET", "/", "", nil)
	if got.Status != 200 || !strings.Contains(string(got.Body), `"console":"/console/"`) || !strings.Contains(string(got.Body), `"openapi":"/api/v1/openapi.json"`) {
		t.Errorf("GET /: %d %s, want where the console and the API are", got.Status, got.Body)
	}
}
