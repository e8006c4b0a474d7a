package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// TestEveryAnswerNamesItsRequest: every answer carries X-Request-Id (the
// client's own when it sent a sane one), and a problem document quotes it
// as http_request_id, so that a user can hand an operator what finds the log
// line; a client's id that could bend a log line or a header is replaced.
func TestEveryAnswerNamesItsRequest(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	ok := env.Do("GET", "/api/v1/whoami", env.Admin, nil)
	first := ok.Header.Get("X-Request-Id")
	if ok.Status != 200 || first == "" || strings.Contains(first, "/") {
		t.Fatalf("whoami: %d, X-Request-Id %q", ok.Status, first)
	}
	if next := env.Do("GET", "/api/v1/whoami", env.Admin, nil).Header.Get("X-Request-Id"); next == first {
		t.Errorf("two requests share the id %q", next)
	}
	mine := env.Do("GET", "/api/v1/definitions/nope", env.Admin, nil, "X-Request-Id", "client-42.a:b")
	if mine.Header.Get("X-Request-Id") != "client-42.a:b" || mine.JSON(t)["http_request_id"] != "client-42.a:b" {
		t.Errorf("a client's id: header %q, problem %s", mine.Header.Get("X-Request-Id"), mine.Body)
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "quote\"d"} {
		r := env.Do("GET", "/api/v1/whoami", env.Admin, nil, "X-Request-Id", bad)
		if got := r.Header.Get("X-Request-Id"); got == bad || got == "" {
			t.Errorf("client id %q answered as %q; want one of ours", bad, got)
		}
	}
	if r := env.Do("GET", "/api/v1/whoami", "", nil); r.Status != 401 || r.JSON(t)["http_request_id"] != r.Header.Get("X-Request-Id") {
		t.Errorf("a 401 problem: %s with X-Request-Id %q", r.Body, r.Header.Get("X-Request-Id"))
	}
}

// TestTrailingSlashesAreIgnored: every API path answers the same with a
// trailing slash as without.
func TestTrailingSlashesAreIgnored(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	for _, path := range []string{"/api/v1/definitions/", "/api/v1/workers/", "/api/v1/audit/actions/", "/api/v1/definitions/" + key + "/", "/api/v1/instances/"} {
		with, without := env.Do("GET", path, env.Admin, nil), env.Do("GET", strings.TrimSuffix(path, "/"), env.Admin, nil)
		if with.Status != 200 || without.Status != 200 {
			t.Errorf("GET %s: %d, without its slash %d; want 200 both", path, with.Status, without.Status)
		}
	}
	if r := env.Do("POST", "/api/v1/definitions/"+key+"/revisions/", env.Designer, nil); r.Status != 200 && r.Status != 201 {
		t.Errorf("a snapshot with a trailing slash: %d %s", r.Status, r.Body)
	}
	// A 405 lists what the path takes, slash or not.
	if r := env.Do("DELETE", "/api/v1/instances/0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e0f/", env.Admin, nil); r.Status != 405 || r.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE of an instance with a trailing slash: %d, Allow %q; want 405 with GET, HEAD", r.Status, r.Header.Get("Allow"))
	}
}

// TestTheAccessLogNamesTheTokenThatAsked: a request's log line names the
// token that made it, by id, so that a refused attempt at personal data
// (an operator's reveal, refused 403) is traced to a person.
func TestTheAccessLogNamesTheTokenThatAsked(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	var id int64
	if err := env.Pool.QueryRow(context.Background(), "select id from tokens where role = 'operator'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	r := env.Do("POST", "/api/v1/occurrences/0195f0c1-0000-7000-8000-000000000000/reveal", env.Operator, map[string]any{"path": "/x", "reason": "curious"})
	if r.Status != 403 {
		t.Fatalf("an operator's reveal: %d %s, want 403", r.Status, r.Body)
	}
	want := fmt.Sprintf("actor_token_id=%d", id)
	relaistest.WaitFor(t, 5*time.Second, "the refused reveal's log line", func() (bool, string) {
		for _, line := range strings.Split(env.Logs.String(), "\n") {
			if strings.Contains(line, "route=/api/v1/occurrences/{id}/reveal") && strings.Contains(line, "status=403") {
				return strings.Contains(line, want), line
			}
		}
		return false, "no line"
	})
	// A consumer's token is not in the token list: its consumer is named.
	env.Definition("add_company_to_crm.yaml")
	consumer := env.Consumer("snoop", "add_company_to_crm")
	if r := env.Do("GET", "/api/v1/occurrences", consumer, nil); r.Status != 403 {
		t.Fatalf("a consumer's observation: %d, want 403", r.Status)
	}
	want = fmt.Sprintf("actor_consumer_id=%d", env.ConsumerID("snoop"))
	relaistest.WaitFor(t, 5*time.Second, "the refused observation's log line", func() (bool, string) {
		for _, line := range strings.Split(env.Logs.String(), "\n") {
			if strings.Contains(line, "route=/api/v1/occurrences ") && strings.Contains(line, "status=403") {
				return strings.Contains(line, want), line
			}
		}
		return false, "no line"
	})
}

// TestTheAccessLogDoesNotMeasureAnswers: the access log gives an answer's
// size in KiB, not bytes: two reveals' lines in bytes told the lengths of
// the values they carried apart (a 6- and a 55-character email).
func TestTheAccessLogDoesNotMeasureAnswers(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	short, long := "p1", "p"+strings.Repeat("x", 60)
	for _, key := range []string{short, long} {
		if r := env.Do("GET", "/api/v1/processes/"+key, env.Operator, nil); r.Status != 404 || !strings.Contains(string(r.Body), key) {
			t.Fatalf("GET process %s: %d %s, want 404 naming it", key, r.Status, r.Body)
		}
	}
	sizes := map[string]string{}
	relaistest.WaitFor(t, 5*time.Second, "both lines", func() (bool, string) {
		for _, line := range strings.Split(env.Logs.String(), "\n") {
			for _, key := range []string{short, long} {
				if strings.Contains(line, "path=/api/v1/processes/"+key+" ") {
					if strings.Contains(line, "bytes=") {
						t.Fatalf("the access log measures answers in bytes: %s", line)
					}
					_, size, _ := strings.Cut(line, "kib=")
					sizes[key], _, _ = strings.Cut(size, " ")
				}
			}
		}
		return len(sizes) == 2, fmt.Sprint(sizes)
	})
	if sizes[short] != "1" || sizes[long] != "1" {
		t.Errorf("kib %v, want 1 for both answers", sizes)
	}
}

// A path given without the API's prefix that names an API route says so:
// /openapi.json was a bare 404 (evaluator QA).
func TestAnAPIPathWithoutItsPrefixIsPointedAt(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	r := env.Do("GET", "/openapi.json", "", nil)
	if r.Status != 404 || !strings.Contains(string(r.Body), "(did you mean /api/v1/openapi.json?)") {
		t.Errorf("/openapi.json: %d %s", r.Status, r.Body)
	}
	if r := env.Do("GET", "/nowhere", "", nil); r.Status != 404 || strings.Contains(string(r.Body), "did you mean") {
		t.Errorf("/nowhere: %d %s", r.Status, r.Body)
	}
}

// A dry run's access line says so: its path leaves the query out, and
// relais apply's checks read as refusals and creations (soak QA).
func TestTheAccessLogSaysADryRun(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	r := env.Do("PUT", "/api/v1/definitions/dry_one/working?dry_run=true", env.Designer, map[string]any{"name": "d", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}})
	if r.Status/100 != 2 {
		t.Fatalf("dry run: %d %s", r.Status, r.Body)
	}
	env.Do("PUT", "/api/v1/definitions/dry_two/working", env.Designer, map[string]any{"name": "d", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}})
	relaistest.WaitFor(t, 5*time.Second, "both lines", func() (bool, string) {
		var dry, real string
		for _, line := range strings.Split(env.Logs.String(), "\n") {
			switch {
			case strings.Contains(line, "path=/api/v1/definitions/dry_one/working"):
				dry = line
			case strings.Contains(line, "path=/api/v1/definitions/dry_two/working"):
				real = line
			}
		}
		if dry == "" || real == "" {
			return false, "lines missing"
		}
		if !strings.Contains(dry, "dry_run=true") || strings.Contains(real, "dry_run") {
			t.Errorf("dry run %q, real %q: want dry_run=true on the first only", dry, real)
		}
		return true, ""
	})
}
