package openapi_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/relais/relais/api/openapi"
	"github.com/relais/relais/internal/relaistest"
)

// RecordingsEnv names a folder of exchanges already recorded (by .ci/run's
// test run, with relaistest.RecordEnv set) for TestRecordedExchanges to
// validate instead of recording its own.
const RecordingsEnv = "RELAIS_OPENAPI_RECORDINGS"

func newValidator(t *testing.T) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(openapi.JSON())
	if err != nil {
		t.Fatalf("libopenapi cannot read the document: %v", err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("libopenapi-validator cannot build a validator: %v", errs)
	}
	return v
}

func describe(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n    %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      at %s: %s", se.FieldPath, se.Reason)
		}
	}
	return b.String()
}

// The document is valid OpenAPI 3.1 (checked against the specification's
// own schema, offline), and every operation says who may call it.
func TestDocumentIsValidOpenAPI(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	if ok, errs := v.ValidateDocument(); !ok {
		t.Fatalf("the document is not valid OpenAPI 3.1:%s", describe(errs))
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	ops, err := openapi.Operations()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		var o map[string]any
		if err := json.Unmarshal(doc.Paths[op.Path][strings.ToLower(op.Method)], &o); err != nil {
			t.Fatal(err)
		}
		if security, ok := o["security"].([]any); ok && len(security) == 0 {
			// The probes and metrics: no token, no role.
			if !strings.HasPrefix(op.Path, "/healthz") && !strings.HasPrefix(op.Path, "/readyz") && !strings.HasPrefix(op.Path, "/metrics") {
				t.Errorf("%s %s needs no token: only the probes and metrics may", op.Method, op.Path)
			}
			continue
		}
		if roles, _ := o["x-relais-roles"].([]any); len(roles) == 0 {
			t.Errorf("%s %s has no x-relais-roles", op.Method, op.Path)
		}
		responses, _ := o["responses"].(map[string]any)
		if _, ok := responses["401"]; !ok {
			t.Errorf("%s %s does not document 401: every route needs a token", op.Method, op.Path)
		}
	}
}

// operation is one documented route, as a pattern over request paths.
type operation struct {
	openapi.Operation
	pattern *regexp.Regexp
	params  int
}

func operations(t *testing.T) []operation {
	t.Helper()
	ops, err := openapi.Operations()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]operation, len(ops))
	param := regexp.MustCompile(`\\\{[^}]+\\\}`)
	for i, op := range ops {
		quoted := regexp.QuoteMeta(op.Path)
		out[i] = operation{Operation: op, params: strings.Count(op.Path, "{"),
			pattern: regexp.MustCompile("^" + param.ReplaceAllString(quoted, `[^/]+`) + "$")}
	}
	return out
}

// match returns the documented operation of a request (the most literal
// path when several match, as routers do), or false.
func match(ops []operation, method, path string) (operation, bool) {
	// The API ignores one trailing slash (middleware.StripSlashes).
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	// As OpenAPI resolves a path: the most literal documented path that
	// matches wins, whatever its methods (GET /instances/actions is the
	// bulk action's path, which has no GET, not an instance's).
	fewest := -1
	for _, op := range ops {
		if op.pattern.MatchString(path) && (fewest < 0 || op.params < fewest) {
			fewest = op.params
		}
	}
	for _, op := range ops {
		if op.Method == method && op.params == fewest && op.pattern.MatchString(path) {
			return op, true
		}
	}
	return operation{}, false
}

// TestRecordedExchanges replays the suite's real requests and responses
// through libopenapi-validator and fails on any mismatch in either
// direction: a response that breaks its documented schema, status or media
// type; a request the document refuses that the server accepted (the
// suite's deliberately bad requests are fine when they are refused, and
// the document refuses deliberatelyStricter's bodies on purpose); a route
// the document lacks that answered anything but 401, 404 or 405.
// It also fails for every documented operation the suite never called, and
// for every success status an operation documents that the suite never got
// (a 200 documented for a request the server answers 409 misleads a
// client into handling it).
//
// The exchanges come from RELAIS_OPENAPI_RECORDINGS (.ci/run records the
// whole suite), or else from a run of the API test packages this test
// starts itself.
func TestRecordedExchanges(t *testing.T) {
	dir := os.Getenv(RecordingsEnv)
	if dir == "" {
		switch {
		case os.Getenv(relaistest.RecordEnv) != "":
			t.Skipf("this run records exchanges (%s is set); run this test afterwards with %s set to that folder", relaistest.RecordEnv, RecordingsEnv)
		case testing.Short():
			t.Skip("-short: recording the API test packages' exchanges takes minutes")
		}
		dir = recordSuite(t)
	}
	exchanges := readExchanges(t, dir)
	if len(exchanges) < 100 {
		t.Fatalf("%d exchanges recorded in %s: the suite's traffic is missing", len(exchanges), dir)
	}
	v := newValidator(t)
	ops := operations(t)
	full := document(t)
	called, succeeded := map[string]int{}, map[string]map[string]bool{}
	problems := map[string]int{}
	var order []string
	report := func(format string, args ...any) {
		p := fmt.Sprintf(format, args...)
		if problems[p] == 0 {
			order = append(order, p)
		}
		problems[p]++
	}
	for _, ex := range exchanges {
		if ex.Status == 499 {
			// The client had gone (a test cancelling a long poll): nobody
			// received this answer, so no client relies on its shape.
			continue
		}
		if ex.Method == http.MethodHead {
			// Every GET route answers HEAD as GET without a body (the
			// document's description says so); its GET is validated.
			continue
		}
		path, _, _ := strings.Cut(ex.URL, "?")
		op, ok := match(ops, ex.Method, path)
		if !ok {
			if ex.Status != 401 && ex.Status != 404 && ex.Status != 405 {
				report("%s %s is not documented, yet it answered %d", ex.Method, path, ex.Status)
			}
			continue
		}
		name := op.Method + " " + op.Path
		called[name]++
		if ex.Status >= 200 && ex.Status < 300 {
			if succeeded[name] == nil {
				succeeded[name] = map[string]bool{}
			}
			succeeded[name][strconv.Itoa(ex.Status)] = true
		}
		// Problems are told once per operation: the concrete path (ids)
		// gives way to the documented one.
		general := func(errs []*liberrors.ValidationError) string {
			return strings.ReplaceAll(describe(errs), path, op.Path)
		}
		req, _ := ex.http(t)
		ok, errs := v.ValidateHttpRequestSync(req)
		if _, deliberate := deliberatelyStricter[string(ex.RequestBody)]; !ok && ex.Status < 400 && !deliberate {
			report("%s: the document refuses a request the server accepted (%d):%s", name, ex.Status, general(errs))
		}
		if ok && ex.Status == http.StatusBadRequest {
			// The other direction, where the server says so: a member it
			// requires that the document lets a generated client leave out.
			for _, at := range missingRequired(ex.RequestBody, ex.ResponseBody) {
				if _, conditional := conditionallyRequired[name+" "+at]; !conditional {
					report("%s: the server requires %s, which the document lets a request leave out", name, at)
				}
			}
		}
		// The headers a generated client would read, which the validator
		// only checks when the document declares them.
		documented := at(full, "paths/"+pathKey(op.Path)+"/"+strings.ToLower(op.Method)+"/responses/"+strconv.Itoa(ex.Status))
		headers, _ := documented["headers"].(map[string]any)
		for sent := range ex.ResponseHeaders {
			if documented != nil && slices.ContainsFunc(watchedHeaders, func(h string) bool { return strings.EqualFold(h, sent) }) &&
				!slices.ContainsFunc(slices.Collect(maps.Keys(headers)), func(h string) bool { return strings.EqualFold(h, sent) }) {
				report("%s: its %d answer carries %s, which the document does not declare", name, ex.Status, sent)
			}
		}
		// A fresh pair: validating the request read its body.
		req, res := ex.http(t)
		// A 304 has no body, so no content type for the validator to
		// look up: its headers are checked above.
		if ok, errs := v.ValidateHttpResponse(req, res); !ok && ex.Status != http.StatusNotModified {
			report("%s: the %d response breaks the document:%s", name, ex.Status, general(errs))
		}
		// A replica that is not ready says so with a 503: that is /readyz's
		// answer, not a fault.
		if ex.Status >= 500 && op.Path != "/readyz" && ex.RequestHeaders[relaistest.InjectedFaultHeader] == "" && !(ex.Status == http.StatusServiceUnavailable && (strings.Contains(string(ex.ResponseBody), `"database_unavailable"`) ||
			strings.Contains(string(ex.ResponseBody), `"replica_stopping"`) || strings.Contains(string(ex.ResponseBody), `"data_key_missing"`))) {
			// A lost database, a stopping replica or one without a data key
			// (tests cause each on purpose) is a documented 503, a fault a
			// test injected its own; any other 5xx is a bug.
			report("%s answered %d: %s", name, ex.Status, clip(ex.ResponseBody))
		}
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	var never, unsuccessful []string
	for _, op := range ops {
		name := op.Method + " " + op.Path
		if called[name] == 0 {
			never = append(never, name)
			continue
		}
		var o struct {
			Responses map[string]any `json:"responses"`
		}
		if err := json.Unmarshal(doc.Paths[op.Path][strings.ToLower(op.Method)], &o); err != nil {
			t.Fatal(err)
		}
		for status := range o.Responses {
			if strings.HasPrefix(status, "2") && !succeeded[name][status] {
				unsuccessful = append(unsuccessful, name+" "+status)
			}
		}
	}
	slices.Sort(never)
	slices.Sort(unsuccessful)
	for _, p := range order {
		t.Errorf("%s (%d times)", p, problems[p])
	}
	for _, name := range never {
		t.Errorf("%s: no test calls it (each documented route needs at least one recorded exchange)", name)
	}
	for _, name := range unsuccessful {
		t.Errorf("%s: no test gets this documented success", name)
	}
	t.Logf("%d exchanges, %d operations called", len(exchanges), len(called))
}

// watchedHeaders are the response headers a client reads, which an answer
// carrying one must declare (the validator only judges declared ones).
var watchedHeaders = []string{"Location", "X-Request-Id", "ETag", "Relais-Applied", "Retry-After"}

// conditionallyRequired are the members the server requires of some
// callers only, which the document cannot say: it describes them.
var conditionallyRequired = map[string]string{
	"POST /api/v1/pull/occurrences/{id}/complete /worker_id": "required, but for a settle token",
	"POST /api/v1/pull/occurrences/{id}/fail /worker_id":     "required, but for a settle token",
}

// requiredAt finds the pointers a Camunda exception's message says are
// required.
var requiredAt = regexp.MustCompile(`(?:^|: |; )(/[^ ;:]+) is required`)

// missingRequired lists the pointers a 400 answer (problem+json, or a
// Camunda exception) says are required and that its request body did not
// have at all (an empty value that is
// refused is another matter: the document's types say what a value may be).
func missingRequired(request, response []byte) []string {
	var answer struct {
		// A string in a problem, the number 0 in a Camunda exception.
		Code    any    `json:"code"`
		Message string `json:"message"`
		Errors  []struct {
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(response, &answer) != nil {
		return nil
	}
	// Only a malformed request: a contract's own required fields
	// (invalid_inputs, invalid_outputs) are no business of the document.
	var at []string
	if answer.Code == "invalid_request" {
		for _, e := range answer.Errors {
			if strings.HasPrefix(e.Message, "is required") {
				at = append(at, e.Path)
			}
		}
	}
	if rest, ok := strings.CutPrefix(answer.Message, "invalid_request: "); ok {
		// A Camunda exception: its message starts with the Relais code.
		// A completion's conversions name the contract's problems after
		// theirs: not the document's either.
		rest, _, _ = strings.Cut(rest, "; and the variables violate revision")
		for _, m := range requiredAt.FindAllStringSubmatch(rest, -1) {
			at = append(at, m[1])
		}
	}
	var body any
	if json.Unmarshal(request, &body) != nil {
		return nil
	}
	var missing []string
	for _, p := range at {
		if !present(body, p) {
			missing = append(missing, p)
		}
	}
	return missing
}

// present says whether the JSON pointer p names a member of doc (one whose
// parent is missing or not a container is not there either).
func present(doc any, p string) bool {
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		switch v := doc.(type) {
		case map[string]any:
			next, ok := v[part]
			if !ok {
				return false
			}
			doc = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return false
			}
			doc = v[i]
		default:
			return false
		}
	}
	return true
}

func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

// exchange is a recorded relaistest.Exchange.
type exchange relaistest.Exchange

func (ex exchange) http(t *testing.T) (*http.Request, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(ex.Method, "http://relais.test"+ex.URL, bytes.NewReader(ex.RequestBody))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ex.RequestHeaders {
		req.Header.Set(k, v)
	}
	body := ex.ResponseBody
	if strings.EqualFold(ex.ResponseHeaders["Content-Encoding"], "gzip") {
		// What the document describes is what the client reads once it
		// decoded the content coding (the OpenAPI document's own).
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s %s: a gzip answer that does not decode: %v", ex.Method, ex.URL, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s %s: a gzip answer that does not decode: %v", ex.Method, ex.URL, err)
		}
	}
	res := &http.Response{StatusCode: ex.Status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), Request: req}
	for k, v := range ex.ResponseHeaders {
		if !strings.EqualFold(k, "Content-Encoding") {
			res.Header.Set(k, v)
		}
	}
	return req, res
}

func readExchanges(t *testing.T, dir string) []exchange {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []exchange
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var ex exchange
			if err := json.Unmarshal(sc.Bytes(), &ex); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, ex)
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		fh.Close()
	}
	return out
}

// recordedPackages are the test packages whose traffic covers the
// documented routes; .ci/run records every package instead.
var recordedPackages = []string{"./api/...", "./pull/...", "./camunda/..."}

// recordSuite runs the API test packages with recording on and returns
// the folder of their exchanges.
func recordSuite(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", append([]string{"test", "-count=1"}, recordedPackages...)...)
	cmd.Dir = relaistest.Root()
	cmd.Env = append(os.Environ(), relaistest.RecordEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("recording run of %s failed: %v\n%s", strings.Join(recordedPackages, " "), err, out)
	}
	return dir
}

// TestNoProseBecameAKey: in a YAML flow mapping an unquoted comma ends a
// description, and the rest becomes a key without a value; the served
// document then carried members such as "or a query parameter's name":
// null. A key holding a space is such a fragment.
func TestNoProseBecameAKey(t *testing.T) {
	var doc any
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if x == nil && strings.Contains(k, " ") {
					t.Errorf("%s: %q is prose cut off by a comma (quote the description)", at, k)
				}
				walk(x, at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(doc, "")
}

// Every operation has its own operationId and its own summary: a generated
// client names its methods after the ids (one left without is named by the
// generator's guess, apiV1InstancesIdStopPost) and documents them with the
// summaries. The writes that only ever answer 405 (immutable resources)
// too: their ids say so (putRevisionNotAllowed).
func TestEveryOperationHasAnID(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	ids, summaries := map[string]string{}, map[string]string{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string                     `json:"operationId"`
				Summary     string                     `json:"summary"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s and %s share the operationId %s", where, other, op.OperationID)
			}
			ids[op.OperationID] = where
			succeeds := slices.ContainsFunc(slices.Collect(maps.Keys(op.Responses)), func(s string) bool { return strings.HasPrefix(s, "2") })
			if !succeeds && !strings.HasSuffix(op.OperationID, "NotAllowed") {
				t.Errorf("%s never succeeds, yet its operationId %s does not say so (…NotAllowed)", where, op.OperationID)
			}
			if op.Summary == "" {
				t.Errorf("%s has no summary", where)
			} else if other, dup := summaries[op.Summary]; dup {
				t.Errorf("%s and %s share the summary %q", where, other, op.Summary)
			}
			summaries[op.Summary] = where
		}
	}
}
