package canary_test

// The classification canary (DESIGN §5): a process whose inputs and outputs
// carry distinctive sensitive and secret strings runs through pull
// (success, failure echoing them, lock expiry) and push (success, 500
// echoing them, timeout). Then everything an observer can see — the
// observation API as operator and admin, every console page in English and
// French, the server's logs, /metrics and a dump of every table — is
// collected into one corpus, which must hold no protected value at all.
// Deliveries (what the consumer fetched, what the destination received)
// are kept apart and must hold them: the scenario really carried them.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// canaryLead is the part every canary shares; what follows it is distinctive.
const canaryLead = "CANARY-"

// The protected values. secretHdr is a destination header value: secret by
// design (stored encrypted, never returned).
const (
	secretIn     = "CANARY-SECRET-IN-7f3a9c"
	sensitiveIn  = "CANARY-SENSITIVE-IN-91bd2e"
	secretOut    = "CANARY-SECRET-OUT-44aa10"
	sensitiveOut = "CANARY-SENSITIVE-OUT-c0ffee"
	secretHdr    = "CANARY-SECRET-HDR-5e5e5e"
)

// Normal values, which observers must see (sanity of the collection).
const (
	normalRef        = "REF-NORMAL-4242"
	normalChannel    = "NORMAL-CHANNEL-web"
	normalPullDetail = "NORMAL-DETAIL-PULL-31"
	normalPushDetail = "NORMAL-DETAIL-PUSH-57"
)

const (
	pullKey     = "canary_pull"
	pushKey     = "canary_push"
	pullProcess = "canary_pull_flow"
	pushProcess = "canary_push_flow"
	destName    = "canary-dest"
)

// working is a test definition: inputs with a secret text, a sensitive
// object with a nested text, and normal fields; outputs with a secret
// text, a sensitive text, a normal text and the normal routing choice.
// Revision 2 adds an optional normal output, so that there is a diff.
func working(name string, rev int) map[string]any {
	outputs := []any{
		map[string]any{"name": "result", "type": "choice", "required": true, "values": []string{"ok", "ko"}},
		map[string]any{"name": "token", "type": "text", "classification": "secret", "description": "Issued credential"},
		map[string]any{"name": "note", "type": "text", "classification": "sensitive"},
		map[string]any{"name": "ref", "type": "text", "max_length": 40},
	}
	if rev >= 2 {
		outputs = append(outputs, map[string]any{"name": "comment", "type": "text"})
	}
	return map[string]any{
		"name": name, "description": "Classification canary definition.",
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "company", "type": "text", "required": true, "max_length": 100},
			map[string]any{"name": "api_key", "type": "text", "required": true, "classification": "secret"},
			map[string]any{"name": "contact", "type": "object", "required": true, "classification": "sensitive", "fields": []any{
				map[string]any{"name": "name", "type": "text", "required": true}}},
			map[string]any{"name": "channel", "type": "text"},
		}},
		"outputs":        map[string]any{"fields": outputs},
		"routing_output": "result",
	}
}

// process pins revision 2 of definition in one pull or push node whose
// secret and sensitive inputs come from the process's own secret and
// sensitive inputs (classification never decreases).
func process(mode, definition string) map[string]any {
	node := map[string]any{"kind": mode, "definition": definition, "revision": 2,
		"inputs": map[string]any{
			"company": map[string]any{"from": "input.company"},
			"api_key": map[string]any{"from": "input.api_key"},
			"contact": map[string]any{"from": "input.contact"},
			"channel": map[string]any{"value": normalChannel},
		},
		"routes":   map[string]any{"ok": "done", "ko": "refused"},
		"on_error": "failed"}
	if mode == "pull" {
		node["policy"] = map[string]any{"max_attempts": 1, "retry_delay": "PT1S"}
	} else {
		node["destination"], node["timeout"] = destName, "PT1S"
	}
	return map[string]any{
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "company", "type": "text", "required": true},
			map[string]any{"name": "api_key", "type": "text", "required": true, "classification": "secret"},
			map[string]any{"name": "contact", "type": "object", "required": true, "classification": "sensitive", "fields": []any{
				map[string]any{"name": "name", "type": "text", "required": true}}},
		}},
		"start": "work",
		"nodes": map[string]any{
			"work":    node,
			"done":    map[string]any{"kind": "end"},
			"refused": map[string]any{"kind": "end"},
			"failed":  map[string]any{"kind": "end", "status": "failed"},
		},
	}
}

// protectedOutputs are valid outputs carrying the output canaries.
func protectedOutputs() map[string]any {
	return map[string]any{"result": "ok", "token": secretOut, "note": sensitiveOut, "ref": normalRef}
}

// scenario is one instance of the run, named for failure messages.
type scenario struct {
	name, company, instance, occurrence string
	wantStatus, wantCode                string // the instance's end and its occurrence's error code ("" when completed)
}

func TestCanary(t *testing.T) {
	t.Parallel()
	began := time.Now()
	env := relaistest.New(t)

	// ------------------------------------------------------------ design
	for _, key := range []string{pullKey, pushKey} {
		env.Must(201, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, working("Canary "+key, 1))
		env.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", env.Designer, nil)
		env.Must(201, "POST", "/api/v1/definitions/"+key+"/releases", env.Designer, map[string]any{"name": "2026.1", "revision": 1, "notes": "First."})
		env.Must(200, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, working("Canary "+key, 2))
		env.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", env.Designer, nil)
	}
	env.Process(pullProcess, process("pull", pullKey))

	dest := newDestination(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var call struct {
			Inputs struct {
				Company string `json:"company"`
				APIKey  string `json:"api_key"`
				Contact struct {
					Name string `json:"name"`
				} `json:"contact"`
			} `json:"inputs"`
		}
		_ = json.Unmarshal(body, &call)
		in := call.Inputs
		switch in.Company {
		case "Normal-Acme-push-ok":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"outputs": protectedOutputs()})
		case "Normal-Acme-push-500":
			// A destination echoing the values it received in its error.
			w.WriteHeader(500)
			fmt.Fprintf(w, `{"error": "refused api key %s for contact %s", "detail": %q}`, in.APIKey, in.Contact.Name, normalPushDetail)
		case "Normal-Acme-push-500-header":
			// A destination echoing the credential Relais sent it.
			w.WriteHeader(500)
			fmt.Fprintf(w, "bad credential X-Api-Key=%s (%s)", r.Header.Get("X-Api-Key"), normalPushDetail)
		case "Normal-Acme-push-slow":
			// Sleeps past the node's budget (PT1S): Relais hangs up first.
			select {
			case <-r.Context().Done():
			case <-time.After(8 * time.Second):
			}
		default:
			w.WriteHeader(400)
		}
	})
	env.Must(201, "PUT", "/api/v1/destinations/"+destName, env.Admin, map[string]any{"url": dest.URL + "/hook", "max_timeout": "PT2S",
		"headers": map[string]string{"X-Api-Key": secretHdr}})
	env.Process(pushProcess, process("push", pushKey))

	created := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "canary-worker",
		"grants": []any{map[string]any{"definition": pullKey, "revisions": "all"}}}).JSON(t)
	consumer, consumerID := created["token"].(string), idString(created["id"])

	// Deliveries, kept apart from the corpus: they may (must) carry the
	// protected inputs.
	var deliveries []item
	// Answers to settlements: observation surfaces (error messages) like
	// any other.
	var c corpus

	start := func(name, processKey string) *scenario {
		t.Helper()
		s := &scenario{name: name, company: "Normal-Acme-" + name}
		inst := env.Must(201, "POST", "/api/v1/processes/"+processKey+"/instances", env.Operator, map[string]any{
			"inputs":       map[string]any{"company": s.company, "api_key": secretIn, "contact": map[string]any{"name": sensitiveIn}},
			"business_key": "BK-" + name}).JSON(t)
		s.instance = inst["id"].(string)
		path, _ := inst["path"].([]any)
		if len(path) != 1 {
			t.Fatalf("%s: started instance %v, want one occurrence on its path", name, inst)
		}
		s.occurrence = path[0].(map[string]any)["occurrence_id"].(string)
		return s
	}
	fetch := func(s *scenario, worker, lock string) {
		t.Helper()
		res := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": worker,
			"subscriptions": []any{map[string]any{"definition": pullKey}}, "max_tasks": 1, "lock_duration": lock, "wait": "PT5S"})
		occs, _ := res.JSON(t)["occurrences"].([]any)
		if len(occs) != 1 || occs[0].(map[string]any)["id"] != s.occurrence {
			t.Fatalf("%s: fetched %s, want occurrence %s", s.name, res.Body, s.occurrence)
		}
		deliveries = append(deliveries, item{kind: "delivery", label: "fetch-and-lock answer (" + s.name + ")", text: string(res.Body)})
	}
	settle := func(s *scenario, action string, want int, body map[string]any) relaistest.Response {
		t.Helper()
		res := env.Do("POST", "/api/v1/pull/occurrences/"+s.occurrence+"/"+action, consumer, body)
		if res.Status != want {
			t.Fatalf("%s: %s answered %d, want %d: %s", s.name, action, res.Status, want, res.Body)
		}
		c.add(kindPull, fmt.Sprintf("POST %s answer %d (%s)", action, res.Status, s.name), string(res.Body))
		return res
	}

	// ----------------------------------------------------------- pull
	// (a) Success: a first completion breaks the contract (an unknown
	// route value) while carrying the output canaries, then the right one.
	pullOK := start("pull-ok", pullProcess)
	pullOK.wantStatus = "completed"
	fetch(pullOK, "w-ok", "PT1M")
	bad := protectedOutputs()
	bad["result"] = "maybe"
	if r := settle(pullOK, "complete", 422, map[string]any{"worker_id": "w-ok", "outputs": bad}); r.Code() != "invalid_outputs" {
		t.Fatalf("invalid completion: %s", r.Body)
	}
	settle(pullOK, "complete", 200, map[string]any{"worker_id": "w-ok", "outputs": protectedOutputs()})
	settle(pullOK, "complete", 200, map[string]any{"worker_id": "w-ok", "outputs": protectedOutputs()}) // replay

	// (b) Failure whose worker message echoes the protected inputs.
	pullFail := start("pull-fail", pullProcess)
	pullFail.wantStatus, pullFail.wantCode = "failed", "WORKER_REFUSED"
	fetch(pullFail, "w-fail", "PT1M")
	settle(pullFail, "fail", 200, map[string]any{"worker_id": "w-fail", "error_code": "WORKER_REFUSED", "retryable": false,
		"message": "the vault refused api key " + secretIn + " of contact " + sensitiveIn + " (" + normalPullDetail + ")"})

	// (c) Lock expiry on the only attempt: the timer fails it.
	pullExpiry := start("pull-expiry", pullProcess)
	pullExpiry.wantStatus = "failed"
	fetch(pullExpiry, "w-dead", "PT1S")
	env.WaitEnded(pullExpiry.instance, 15*time.Second)
	// The dead worker comes back with protected outputs: refused.
	settle(pullExpiry, "complete", 409, map[string]any{"worker_id": "w-dead", "outputs": protectedOutputs()})

	// ----------------------------------------------------------- push
	pushOK := start("push-ok", pushProcess)
	pushOK.wantStatus = "completed"
	push500 := start("push-500", pushProcess)
	push500.wantStatus, push500.wantCode = "failed", "destination_http_500"
	push500Hdr := start("push-500-header", pushProcess)
	push500Hdr.wantStatus, push500Hdr.wantCode = "failed", "destination_http_500"
	pushSlow := start("push-slow", pushProcess)
	pushSlow.wantStatus, pushSlow.wantCode = "failed", "deadline_exceeded"

	scenarios := []*scenario{pullOK, pullFail, pullExpiry, pushOK, push500, push500Hdr, pushSlow}
	names := map[string]string{} // instance and occurrence ids → scenario
	for _, s := range scenarios {
		names[s.instance], names[s.occurrence] = s.name, s.name
	}
	for _, s := range scenarios {
		inst := env.WaitEnded(s.instance, 15*time.Second)
		occ := env.Must(200, "GET", "/api/v1/occurrences/"+s.occurrence, env.Operator, nil).JSON(t)
		if inst["status"] != s.wantStatus || (s.wantCode != "" && occ["error_code"] != s.wantCode) {
			t.Fatalf("%s: instance %v, occurrence %v %v (%v); want instance %s, code %q",
				s.name, inst["status"], occ["status"], occ["error_code"], occ["error_message"], s.wantStatus, s.wantCode)
		}
	}
	if occ := env.Must(200, "GET", "/api/v1/occurrences/"+pullExpiry.occurrence, env.Operator, nil).JSON(t); !attemptOutcome(occ, "expired") {
		t.Errorf("pull-expiry: attempts %v, want one expired", occ["attempts"])
	}
	for _, r := range dest.requests() {
		deliveries = append(deliveries, item{kind: "delivery", label: "request received by the destination",
			text: fmt.Sprintf("X-Api-Key: %s\n%s", r.header.Get("X-Api-Key"), r.body)})
	}
	if n := len(dest.requests()); n != 4 {
		t.Errorf("the destination received %d calls, want 4", n)
	}
	t.Logf("scenarios ran in %v", time.Since(began).Round(time.Millisecond))

	// The deliveries really carried the protected inputs (and the push
	// calls the header).
	for _, d := range deliveries {
		for _, want := range []string{secretIn, sensitiveIn} {
			if !strings.Contains(d.text, want) {
				t.Errorf("delivery %s lacks %q: %.300s", d.label, want, d.text)
			}
		}
		if strings.HasPrefix(d.label, "request received") && !strings.HasPrefix(d.text, "X-Api-Key: "+secretHdr+"\n") {
			t.Errorf("delivery %s lacks the header canary: %.300s", d.label, d.text)
		}
	}
	if len(deliveries) != 3+4 {
		t.Errorf("%d deliveries recorded, want 7", len(deliveries))
	}

	// -------------------------------------------------------- collect
	collectAPI(t, env, &c, names, consumerID)
	collectConsole(t, env, &c, scenarios, consumerID)
	m := env.Do("GET", "/metrics", "", nil)
	if m.Status != 200 {
		t.Fatalf("/metrics: %d", m.Status)
	}
	c.add(kindMetrics, "GET /metrics", string(m.Body))
	tables := dumpTables(t, env, &c)
	// The sealed columns were dumped raw (escape encoding), not only as hex.
	for _, col := range []string{"instances.sealed_inputs", "occurrences.sealed_inputs", "occurrences.sealed_outputs", "destinations.sealed_headers"} {
		if !slices.ContainsFunc(c.items, func(it item) bool {
			return strings.HasPrefix(it.label, "bytea "+col+" ") && !strings.Contains(it.label, "(0 values)")
		}) {
			t.Errorf("sanity: the dump has no sealed value of %s", col)
		}
	}
	// Last, so that the logs of the collection itself are in.
	c.add(kindLogs, "server logs (env.Logs)", env.Logs.String())
	t.Logf("corpus: %d items, %d bytes, %d tables", len(c.items), c.size(), tables)

	// ----------------------------------------------------------- assert
	fs := []forbidden{
		secretNeedles("secret input", secretIn),
		secretNeedles("secret output", secretOut),
		secretNeedles("secret destination header", secretHdr),
		sensitiveNeedles("sensitive input", sensitiveIn),
		sensitiveNeedles("sensitive output", sensitiveOut),
		tokenNeedles("consumer token", consumer),
		tokenNeedles("admin token", env.Admin),
		tokenNeedles("operator token", env.Operator),
		tokenNeedles("designer token", env.Designer),
	}
	c.assertAbsent(t, fs)

	// Sanity: the collection is real. Normal values show everywhere they
	// belong; masking and scrubbing left their marks.
	for _, kind := range []string{kindAPI, kindConsole, kindDB} {
		for _, want := range []string{pullOK.company, pushOK.company, normalRef, normalChannel, normalPullDetail, normalPushDetail,
			"WORKER_REFUSED", "destination_http_500", "deadline_exceeded", "[redacted]", "canary-worker"} {
			c.assertPresent(t, kind, want)
		}
		for _, s := range scenarios {
			c.assertPresent(t, kind, s.instance)
			c.assertPresent(t, kind, s.occurrence)
		}
	}
	c.assertPresent(t, kindAPI, `"$masked":"secret"`)
	c.assertPresent(t, kindAPI, `"$masked":"sensitive"`)
	c.assertPresent(t, kindAPI, `"X-Api-Key"`)
	c.assertPresent(t, kindDB, `$masked`)
	c.assertPresent(t, kindConsole, "Tâches externes")
	c.assertPresent(t, kindConsole, "External tasks")
	c.assertPresent(t, kindMetrics, "relais_push_calls_total")
	c.assertPresent(t, kindLogs, "/api/v1/pull/occurrences/"+pullFail.occurrence+"/fail")
	c.assertPresent(t, kindLogs, "console: signed in")
	c.assertPresent(t, kindPull, "invalid_outputs")
	c.assertPresent(t, kindPull, `"route":"ok"`)
	t.Logf("total %v", time.Since(began).Round(time.Millisecond))
}

func attemptOutcome(occ map[string]any, want string) bool {
	as, _ := occ["attempts"].([]any)
	return len(as) == 1 && as[0].(map[string]any)["outcome"] == want
}

// collectAPI reads every observation route as operator and as admin: lists
// (with every filter), and the detail of everything they list.
func collectAPI(t *testing.T, env *relaistest.Env, c *corpus, names map[string]string, consumerID string) {
	t.Helper()
	note := func(path string) string {
		for id, n := range names {
			if strings.Contains(path, id) {
				return " (" + n + ")"
			}
		}
		return ""
	}
	for _, role := range []struct{ name, token string }{{"operator", env.Operator}, {"admin", env.Admin}} {
		get := func(path string, adminOnly bool) relaistest.Response {
			t.Helper()
			res := env.Do("GET", path, role.token, nil)
			want := 200
			if adminOnly && role.name != "admin" {
				want = 403
			}
			if res.Status != want {
				t.Fatalf("[%s] GET %s: %d, want %d: %.300s", role.name, path, res.Status, want, res.Body)
			}
			c.add(kindAPI, fmt.Sprintf("[%s] GET %s%s", role.name, path, note(path)), string(res.Body))
			return res
		}
		// Instances.
		var instances []string
		for _, it := range items(t, get("/api/v1/instances?limit=500", false)) {
			instances = append(instances, it["id"].(string))
		}
		if len(instances) != 7 {
			t.Fatalf("[%s] %d instances listed, want 7", role.name, len(instances))
		}
		for _, q := range []string{"status=completed", "status=failed", "process=" + pullProcess, "process=" + pushProcess, "business_key=BK-pull-fail"} {
			get("/api/v1/instances?"+q, false)
		}
		for _, id := range instances {
			get("/api/v1/instances/"+id, false)
		}
		// Occurrences.
		var occurrences []string
		for _, it := range items(t, get("/api/v1/occurrences?limit=500", false)) {
			occurrences = append(occurrences, it["id"].(string))
		}
		if len(occurrences) != 7 {
			t.Fatalf("[%s] %d occurrences listed, want 7", role.name, len(occurrences))
		}
		for _, q := range []string{"definition=" + pullKey, "definition=" + pushKey, "status=completed", "status=failed",
			"definition=" + pullKey + "&status=failed", "definition=" + pullKey + "&revision=2", "consumer=" + consumerID} {
			get("/api/v1/occurrences?"+q, false)
		}
		for _, id := range instances {
			get("/api/v1/occurrences?instance="+id, false)
		}
		for _, id := range occurrences {
			get("/api/v1/occurrences/"+id, false)
		}
		// Definitions.
		for _, d := range items(t, get("/api/v1/definitions", false)) {
			key := d["key"].(string)
			detail := get("/api/v1/definitions/"+key, false).JSON(t)
			var revs []int
			for _, r := range detail["revisions"].([]any) {
				revs = append(revs, int(r.(map[string]any)["revision"].(float64)))
			}
			for _, n := range revs {
				base := fmt.Sprintf("/api/v1/definitions/%s/revisions/%d", key, n)
				get(base, false)
				get(base+"/schemas/inputs", false)
				get(base+"/schemas/outputs", false)
				for _, m := range revs {
					if m != n {
						get(fmt.Sprintf("%s/diff/%d", base, m), false)
					}
				}
			}
			for _, rel := range items(t, get("/api/v1/definitions/"+key+"/releases", false)) {
				get("/api/v1/definitions/"+key+"/releases/"+url.PathEscape(rel["name"].(string)), false)
			}
		}
		// Processes.
		for _, p := range items(t, get("/api/v1/processes", false)) {
			key := p["key"].(string)
			for _, v := range get("/api/v1/processes/"+key, false).JSON(t)["versions"].([]any) {
				get(fmt.Sprintf("/api/v1/processes/%s/versions/%d", key, int(v.(map[string]any)["version"].(float64))), false)
			}
		}
		// Consumers and destinations (admin only; the operator's 403 is
		// recorded too).
		res := get("/api/v1/consumers", true)
		if role.name == "admin" {
			for _, it := range items(t, res) {
				get("/api/v1/consumers/"+idString(it["id"]), true)
			}
		}
		res = get("/api/v1/destinations", true)
		if role.name == "admin" {
			for _, it := range items(t, res) {
				get("/api/v1/destinations/"+it["name"].(string), true)
			}
		} else {
			get("/api/v1/destinations/"+destName, true)
		}
		get("/api/v1/whoami", false)
	}
}

// collectConsole reads every console page in English and French, signed
// in as operator and as admin.
func collectConsole(t *testing.T, env *relaistest.Env, c *corpus, scenarios []*scenario, consumerID string) {
	t.Helper()
	type page struct {
		path, scenario string
		redirect       bool // GET stop on an ended instance redirects to it
	}
	pages := []page{
		{path: "/console/occurrences"},
		{path: "/console/occurrences?definition=" + pullKey + "&status=failed"},
		{path: "/console/occurrences?definition=" + pushKey},
		{path: "/console/occurrences?status=completed"},
		{path: "/console/occurrences?definition=" + pullKey + "&revision=2"},
		{path: "/console/occurrences?consumer=" + consumerID},
		{path: "/console/definitions"},
	}
	for _, key := range []string{pullKey, pushKey} {
		pages = append(pages, page{path: "/console/definitions/" + key}, page{path: "/console/definitions/" + key + "?from=1&to=2"})
	}
	for _, s := range scenarios {
		pages = append(pages,
			page{path: "/console/occurrences/" + s.occurrence, scenario: s.name},
			page{path: "/console/instances/" + s.instance, scenario: s.name},
			page{path: "/console/occurrences?instance=" + s.instance, scenario: s.name},
			page{path: "/console/instances/" + s.instance + "/stop", scenario: s.name, redirect: true})
	}
	for _, lang := range []string{"en", "fr"} {
		for _, role := range []struct{ name, token string }{{"operator", env.Operator}, {"admin", env.Admin}} {
			b := newBrowser(t, env.URL, lang)
			c.add(kindConsole, fmt.Sprintf("[%s,%s] GET /console/sign-in", lang, role.name), b.signIn(role.token))
			for _, p := range pages {
				status, h, body := b.do("GET", p.path, nil)
				want := 200
				if p.redirect {
					want = http.StatusSeeOther
				}
				if status != want {
					t.Fatalf("[%s,%s] GET %s: %d, want %d: %.300s", lang, role.name, p.path, status, want, body)
				}
				if lang == "fr" && status == 200 && !slices.Contains([]string{"fr"}, htmlLang(body)) {
					t.Errorf("[%s,%s] GET %s: page language %q", lang, role.name, p.path, htmlLang(body))
				}
				label := fmt.Sprintf("[%s,%s] GET %s", lang, role.name, p.path)
				if p.scenario != "" {
					label += " (" + p.scenario + ")"
				}
				c.add(kindConsole, label, fmt.Sprintf("Location: %s\n%s", h.Get("Location"), body))
			}
		}
	}
}

// htmlLang is the lang attribute of a page's html element.
func htmlLang(page string) string {
	i := strings.Index(page, `<html lang="`)
	if i < 0 {
		return ""
	}
	rest := page[i+len(`<html lang="`):]
	return rest[:max(strings.IndexByte(rest, '"'), 0)]
}
