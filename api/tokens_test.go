package api_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// tokenList reads every page of GET /tokens, limit at a time.
func tokenList(t *testing.T, env *relaistest.Env, limit int) []map[string]any {
	t.Helper()
	var all []map[string]any
	cursor := ""
	for {
		page := env.Must(200, "GET", "/api/v1/tokens?limit="+strconv.Itoa(limit)+"&cursor="+cursor, env.Admin, nil).JSON(t)
		for _, it := range page["items"].([]any) {
			all = append(all, it.(map[string]any))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			return all
		}
		cursor = next
	}
}

func tokenByName(t *testing.T, env *relaistest.Env, name string) map[string]any {
	t.Helper()
	for _, tok := range tokenList(t, env, 50) {
		if tok["name"] == name {
			return tok
		}
	}
	t.Fatalf("token %q not listed", name)
	return nil
}

// TestStaffTokensListed: admins list staff tokens with their dates, page
// by page, never with a secret or hash, and without consumer tokens.
func TestStaffTokensListed(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	env.Consumer("crm-sync", key)
	created := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "ci", "role": "designer", "expires_in": "P30D"}).JSON(t)
	if created["token"] == "" || created["id"] == nil || created["expires_at"] == nil {
		t.Fatalf("create answered %v; want the token once, its id and expiry", created)
	}

	all := tokenList(t, env, 1)
	names := map[string]bool{}
	for _, tok := range all {
		names[tok["name"].(string)] = true
		for _, k := range []string{"id", "name", "role", "created_at", "last_used_at", "expires_at"} {
			if _, ok := tok[k]; !ok {
				t.Errorf("token %v has no %s", tok["name"], k)
			}
		}
		for _, k := range []string{"token", "hash"} {
			if _, ok := tok[k]; ok {
				t.Errorf("token %v shows its %s", tok["name"], k)
			}
		}
		if tok["role"] == "consumer" {
			t.Errorf("a consumer token is listed: %v", tok)
		}
	}
	for _, want := range []string{"admin", "designer", "operator", "ci"} {
		if !names[want] {
			t.Errorf("token %q not listed; got %v", want, names)
		}
	}
	if len(all) != 4 {
		t.Errorf("%d tokens listed; want 4", len(all))
	}
	if r := env.Do("GET", "/api/v1/tokens", env.Operator, nil); r.Status != 403 {
		t.Errorf("an operator listing tokens: %d; want 403", r.Status)
	}
}

// TestStaffTokenRevokedAtOnce: a revoked token's next request is 401; the
// last usable admin token cannot be revoked; consumer tokens are not
// revoked here.
func TestStaffTokenRevokedAtOnce(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	op := tokenByName(t, env, "operator")
	env.Must(200, "GET", "/api/v1/instances", env.Operator, nil)
	env.Must(204, "DELETE", "/api/v1/tokens/"+id(op), env.Admin, nil)
	if r := env.Do("GET", "/api/v1/instances", env.Operator, nil); r.Status != 401 {
		t.Errorf("the revoked token's next request: %d; want 401", r.Status)
	}
	// A retried DELETE (its first answer lost) answers as the first did,
	// as a consumer's does.
	if r := env.Do("DELETE", "/api/v1/tokens/"+id(op), env.Admin, nil); r.Status != 204 {
		t.Errorf("revoking it again: %d; want 204", r.Status)
	}

	key := env.Definition("add_company_to_crm.yaml")
	env.Consumer("crm-sync", key)
	var consumerTokenID int64
	if err := env.Pool.QueryRow(context.Background(), "select id from tokens where consumer_id is not null").Scan(&consumerTokenID); err != nil {
		t.Fatal(err)
	}
	if r := env.Do("DELETE", "/api/v1/tokens/"+strconv.FormatInt(consumerTokenID, 10), env.Admin, nil); r.Status != 404 {
		t.Errorf("revoking a consumer's token here: %d %s; want 404", r.Status, r.Body)
	}

	admin := tokenByName(t, env, "admin")
	if r := env.Do("DELETE", "/api/v1/tokens/"+id(admin), env.Admin, nil); r.Status != 409 || r.Code() != "last_admin_token" {
		t.Fatalf("revoking the only admin token: %d %s; want 409 last_admin_token", r.Status, r.Body)
	}
	// An admin token that has expired does not keep an admin around.
	env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "short", "role": "admin", "expires_in": "PT1M"})
	env.Clock.Advance(2 * time.Minute)
	if r := env.Do("DELETE", "/api/v1/tokens/"+id(admin), env.Admin, nil); r.Status != 409 {
		t.Fatalf("revoking the only usable admin token beside an expired one: %d %s; want 409", r.Status, r.Body)
	}
	second := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "second", "role": "admin"}).JSON(t)
	env.Must(204, "DELETE", "/api/v1/tokens/"+id(admin), second["token"].(string), nil)
	if r := env.Do("GET", "/api/v1/whoami", env.Admin, nil); r.Status != 401 {
		t.Errorf("the revoked admin token: %d; want 401", r.Status)
	}
	if r := env.Do("DELETE", "/api/v1/tokens/"+id(second), second["token"].(string), nil); r.Status != 409 {
		t.Errorf("revoking the new last admin token: %d; want 409", r.Status)
	}
}

// TestStaffTokenExpiry: a token made with expires_in or expires_at is
// refused (401) once that time has passed; nonsense expiries are 400.
func TestStaffTokenExpiry(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	in := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "in", "role": "operator", "expires_in": "PT1H"}).JSON(t)["token"].(string)
	at := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "at", "role": "operator",
		"expires_at": env.Clock.Now().Add(2 * time.Hour).Format(time.RFC3339)}).JSON(t)["token"].(string)
	env.Must(200, "GET", "/api/v1/whoami", in, nil)
	env.Clock.Advance(61 * time.Minute)
	if r := env.Do("GET", "/api/v1/whoami", in, nil); r.Status != 401 {
		t.Errorf("a token past expires_in: %d; want 401", r.Status)
	}
	env.Must(200, "GET", "/api/v1/whoami", at, nil)
	env.Clock.Advance(time.Hour)
	if r := env.Do("GET", "/api/v1/whoami", at, nil); r.Status != 401 {
		t.Errorf("a token past expires_at: %d; want 401", r.Status)
	}
	for _, body := range []map[string]any{
		{"name": "x", "role": "operator", "expires_at": "2000-01-01T00:00:00Z"},
		{"name": "x", "role": "operator", "expires_in": "PT0S"},
		{"name": "x", "role": "operator", "expires_in": "1 hour"},
		{"name": "x", "role": "operator", "expires_in": "PT1H", "expires_at": "2999-01-01T00:00:00Z"},
	} {
		if r := env.Do("POST", "/api/v1/tokens", env.Admin, body); r.Status != 400 {
			t.Errorf("create %v: %d %s; want 400", body, r.Status, r.Body)
		}
	}
	// Every problem at once, not the first one per try.
	r := env.Do("POST", "/api/v1/tokens", env.Admin, map[string]any{"role": "wizard", "expires_in": "PT0S"})
	for _, at := range []string{"/name", "/role", "/expires_in"} {
		if !strings.Contains(string(r.Body), `"path":"`+at+`"`) {
			t.Errorf("a token request wrong three ways: %d %s; want a problem at %s", r.Status, r.Body, at)
		}
	}
}

// TestLastUsedWrittenAtMostOnceAMinute: last_used_at follows use, but is
// not rewritten within a minute of its last value.
func TestLastUsedWrittenAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	if tok := tokenByName(t, env, "designer"); tok["last_used_at"] != nil {
		t.Fatalf("an unused token has last_used_at %v", tok["last_used_at"])
	}
	env.Must(200, "GET", "/api/v1/whoami", env.Designer, nil)
	first := tokenByName(t, env, "designer")["last_used_at"]
	if first == nil {
		t.Fatal("last_used_at not set after a use")
	}
	env.Clock.Advance(30 * time.Second)
	env.Must(200, "GET", "/api/v1/whoami", env.Designer, nil)
	if got := tokenByName(t, env, "designer")["last_used_at"]; got != first {
		t.Errorf("last_used_at rewritten 30 s later: %v, then %v", first, got)
	}
	env.Clock.Advance(31 * time.Second)
	env.Must(200, "GET", "/api/v1/whoami", env.Designer, nil)
	if got := tokenByName(t, env, "designer")["last_used_at"]; got == first {
		t.Errorf("last_used_at not updated over a minute later: still %v", got)
	}
}

func id(tok map[string]any) string { return strconv.Itoa(int(tok["id"].(float64))) }

// Changes of who may do what, and of where data is sent, are logged once
// committed, as stable events naming the acting token; a destination's
// header values and query values never reach the log.
func TestAccessChangesAreLogged(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	staff := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "night-shift", "role": "operator"}).JSON(t)
	env.Must(204, "DELETE", fmt.Sprintf("/api/v1/tokens/%v", staff["id"]), env.Admin, nil)
	c := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm-sync",
		"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": "all"}}}).JSON(t)
	env.Must(200, "PUT", fmt.Sprintf("/api/v1/consumers/%v/grants", c["id"]), env.Admin, map[string]any{
		"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": []int{1}}}})
	env.Must(200, "POST", fmt.Sprintf("/api/v1/consumers/%v/rotate", c["id"]), env.Admin, nil)
	env.Must(204, "DELETE", fmt.Sprintf("/api/v1/consumers/%v", c["id"]), env.Admin, nil)
	// Revoked again: nothing changes, and nothing is logged as changed.
	env.Must(204, "DELETE", fmt.Sprintf("/api/v1/consumers/%v", c["id"]), env.Admin, nil)
	if n := strings.Count(env.Logs.String(), "event=consumer.revoked "); n != 1 {
		t.Errorf("%d consumer.revoked events for one revocation repeated; want 1", n)
	}
	env.Must(201, "PUT", "/api/v1/destinations/scoring", env.Admin, map[string]any{"url": "https://scoring.example/path-secret-3/v1?key=qs-secret-1",
		"headers": map[string]any{"Authorization": "Bearer hdr-secret-2"}, "max_timeout": "PT5S"})
	env.Must(204, "DELETE", "/api/v1/destinations/scoring", env.Admin, nil)
	logs := env.Logs.String()
	for _, event := range []string{"token.created", "token.revoked", "consumer.created", "consumer.grants_set", "consumer.token_rotated", "consumer.revoked",
		"destination.put", "destination.deleted"} {
		found := false
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `msg="access changed" event=`+event+" ") && strings.Contains(line, "actor_role=admin") {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s event naming the admin that acted:\n%s", event, logs)
		}
	}
	for _, secret := range []string{"qs-secret-1", "hdr-secret-2", "path-secret-3"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %s", secret)
		}
	}
}
