package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
)

type body struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		wantCode string
		wantPath string
	}{
		{`{"name":"a","count":1}`, "", ""},
		{`{"name":"a","colour":"red"}`, "unknown_field", "/colour"},
		{`{"name":`, "invalid_json", ""},
		{``, "invalid_json", ""},
		{`{"name":"a"} {"name":"b"}`, "invalid_json", ""},
		{`{"count":"three"}`, "invalid_json", "/count"},
		{`{"name":"` + strings.Repeat("x", 200) + `"}`, "body_too_large", ""},
		{"\ufeff{\"name\":\"a\"}", "invalid_json", ""},
		{" \ufeff{\"name\":\"a\"}", "invalid_json", ""},
		{"\xff\xfe{\x00}\x00", "invalid_json", ""},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("POST", "/", strings.NewReader(tt.in))
		_, err := Decode[body](httptest.NewRecorder(), req, 100)
		if tt.wantCode == "" {
			if err != nil {
				t.Errorf("%.40s: %v", tt.in, err)
			}
			continue
		}
		fe, ok := fault.As(err)
		if !ok || fe.Code != tt.wantCode {
			t.Errorf("%.40s: error %v; want code %s", tt.in, err, tt.wantCode)
			continue
		}
		// A byte order mark is named, not shown as the character 'ï'.
		if bom := strings.HasPrefix(strings.TrimLeft(tt.in, " "), "\ufeff") || strings.HasPrefix(tt.in, "\xff\xfe"); bom {
			if !strings.Contains(fe.Detail, "byte order mark") {
				t.Errorf("a body after a BOM: %q, want the mark named", fe.Detail)
			}
			if err := CheckBody([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), "byte order mark") {
				t.Errorf("CheckBody of a body after a BOM: %v, want the mark named", err)
			}
		}
		if tt.wantPath != "" && (len(fe.Errors) == 0 || fe.Errors[0].Path != tt.wantPath) {
			t.Errorf("%.40s: errors %v; want path %s", tt.in, fe.Errors, tt.wantPath)
		}
	}
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	fe := fault.New(fault.TooManyRequests, "too_many_waiters", "full")
	fe.RetryAfter = 1500 * time.Millisecond
	fe.Extra = map[string]any{"ceiling": 10, "code": "must not override"}
	WriteError(rec, httptest.NewRequest("GET", "/", nil), nil, fe)
	var p map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" || rec.Header().Get("Content-Type") != ProblemContentType {
		t.Errorf("status %d, Retry-After %q, type %q", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Content-Type"))
	}
	if p["type"] != "urn:relais:problem:too_many_waiters" || p["code"] != "too_many_waiters" || p["ceiling"] != 10.0 || p["status"] != 429.0 {
		t.Errorf("problem = %v", p)
	}

	// Errors that are not faults are internal: their text is not shown.
	rec = httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/", nil), nil, errors.New("pq: secret table detail"))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "secret table") {
		t.Errorf("internal error shown: %d %s", rec.Code, rec.Body)
	}
	// A statement its statement_timeout cancelled (a URL may set one) is
	// the database too slow right now: 503 to retry, not a 500 bug.
	rec = httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/", nil), nil, fmt.Errorf("lookup: %w", &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "database_unavailable") || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a statement past its statement_timeout: %d %s, want 503 database_unavailable with Retry-After", rec.Code, rec.Body)
	}
}

type nulInner struct {
	Note string `json:"note"`
}

type NulEmbedded struct {
	Promoted string `json:"promoted"`
}

type nulBody struct {
	NulEmbedded
	Name   string            `json:"name"`
	Tags   []string          `json:"tags"`
	Labels map[string]string `json:"labels"`
	Inner  *nulInner         `json:"inner"`
	Any    any               `json:"any"`
	Plain  string
	Raw    json.RawMessage `json:"raw"`
}

// TestDecodeRefusesNUL: PostgreSQL stores the NUL character in neither text
// nor jsonb, so Decode refuses it in every decoded string, with a pointer
// to each (a map key at its map); json.RawMessage values are left to the
// contract that validates them.
func TestDecodeRefusesNUL(t *testing.T) {
	t.Parallel()
	in := `{"name":"a\u0000b","tags":["ok","\u0000"],"labels":{"k":"\u0000","x\u0000":"v","fine":"f"},
	  "inner":{"note":"\u0000"},"any":{"deep":["\u0000",{"k\u0000":1}]},"Plain":"\u0000","promoted":"\u0000",
	  "raw":{"value":"\u0000"}}`
	_, err := Decode[nulBody](httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(in)), 1000)
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.BadRequest || fe.Code != "invalid_json" {
		t.Fatalf("Decode: %v; want 400 invalid_json", err)
	}
	var got []string
	for _, e := range fe.Errors {
		got = append(got, e.Path)
		if e.Message != `the NUL character (\u0000) is not allowed` {
			t.Errorf("%s: message %q", e.Path, e.Message)
		}
	}
	want := []string{"/promoted", "/name", "/tags/1", "/labels/k", "/labels", "/inner/note", "/any/deep/0", "/any/deep/1", "/Plain"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pointers %q, want %q", got, want)
	}

	for _, ok := range []string{`{"name":"\\u0000","raw":{"value":"\u0000"}}`, `{"name":"caf\u00e9"}`} {
		if _, err := Decode[nulBody](httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(ok)), 1000); err != nil {
			t.Errorf("Decode(%s): %v; want it accepted", ok, err)
		}
	}
}

type grant struct {
	Definition string `json:"definition"`
	Revisions  []int  `json:"revisions"`
}

type nested struct {
	Name   string                `json:"name"`
	Grants []grant               `json:"grants"`
	Wait   *isoduration.Duration `json:"wait"`
	Lock   isoduration.Duration  `json:"lock"`
	Labels map[string]string     `json:"labels"`
	Raw    json.RawMessage       `json:"raw"`
	At     *time.Time            `json:"at"`
}

// Every problem of a body comes back at once, each at its pointer:
// encoding/json stops at the first, and names no field for a custom type.
func TestDecodeReportsEveryProblemWithItsPointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		code     string
		problems map[string]string // pointer → part of the message
	}{
		{`{"name":"a","colour":"red","grants":[{"definition":"x","bar":1}],"Extra":true}`, "unknown_field",
			map[string]string{"/colour": "unknown field", "/grants/0/bar": "unknown field", "/Extra": "unknown field"}},
		{`{"wait":"60s","lock":"PT1M","grants":[{"definition":1,"revisions":[1,"2",3.5]}],"labels":{"a":2}}`, "invalid_json",
			map[string]string{"/wait": "ISO-8601", "/grants/0/definition": "must be a string", "/grants/0/revisions/1": "must be a number",
				"/grants/0/revisions/2": "must be an integer", "/labels/a": "must be a string"}},
		// Members match as encoding/json matches them; raw values are left
		// to their contract.
		{`{"NAME":"a","wait":"PT1S","raw":{"anything":[1]},"lock":"1 minute"}`, "invalid_json", map[string]string{"/lock": "ISO-8601"}},
		// null leaves a pointer unset, but a value with its own decoding
		// is asked, as encoding/json asks it.
		{`{"wait":null,"lock":null,"labels":{"a":"60s"},"grants":[{"revisions":[1e400]}]}`, "invalid_json",
			map[string]string{"/lock": "ISO-8601", "/grants/0/revisions/0": "must be an integer"}},
		// A time in another form is told the form, not Go's layout.
		{`{"lock":"PT1S","at":"2030-01-01"}`, "invalid_json", map[string]string{"/at": "must be an RFC 3339 time, such as 2026-12-01T15:04:05Z"}},
		// null for an object that is no pointer (the body, a list's item)
		// would act on an empty one.
		{`null`, "invalid_json", map[string]string{"": "must be an object, not null"}},
		{`{"lock":"PT1S","grants":[null,{"definition":"x"}]}`, "invalid_json", map[string]string{"/grants/0": "must be an object, not null"}},
		// A misspelt member is told the one meant.
		{`{"nmae":"a","lock":"PT1S","grants":[{"Definiton":"x"}]}`, "unknown_field",
			map[string]string{"/nmae": `unknown field (did you mean "name"?)`, "/grants/0/Definiton": `(did you mean "definition"?)`}},
		// Another platform's name for a member is told the member, when
		// the body has it (the top level has no definition).
		{`{"lock":"PT1S","topicName":"x","grants":[{"topicName":"x"}]}`, "unknown_field",
			map[string]string{"/topicName": "unknown field", "/grants/0/topicName": `unknown field (did you mean "definition"?)`}},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("POST", "/", strings.NewReader(tt.in))
		_, err := Decode[nested](httptest.NewRecorder(), req, 1<<20)
		fe, ok := fault.As(err)
		if !ok || fe.Code != tt.code {
			t.Errorf("%.50s: %v; want %s", tt.in, err, tt.code)
			continue
		}
		got := map[string]string{}
		for _, e := range fe.Errors {
			got[e.Path] = e.Message
		}
		if len(got) != len(tt.problems) {
			t.Errorf("%.50s: errors %v; want exactly %v", tt.in, fe.Errors, tt.problems)
		}
		for at, part := range tt.problems {
			if !strings.Contains(got[at], part) {
				t.Errorf("%.50s: at %s got %q, want it to say %q", tt.in, at, got[at], part)
			}
		}
	}
	// A body the type accepts decodes as before, nulls for pointers,
	// lists, maps and raw values included.
	for _, in := range []string{`{"name":"a","wait":"PT1S","lock":"PT2M","grants":[{"definition":"x","revisions":[1]}]}`,
		`{"name":"a","wait":null,"lock":"PT2M","grants":[{"definition":"x","revisions":null}],"labels":null,"raw":null,"at":null}`,
		`{"name":"a","lock":"PT2M","grants":null,"raw":{"x":null}}`} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(in))
		if v, err := Decode[nested](httptest.NewRecorder(), req, 1<<20); err != nil || v.Lock.Std() != 2*time.Minute {
			t.Errorf("valid body %s: %+v, %v", in, v, err)
		}
	}
	req := httptest.NewRequest("POST", "/", strings.NewReader(`{"nmae":"a","lock":"PT1S"}`))
	if _, err := Decode[nested](httptest.NewRecorder(), req, 1<<20); err == nil || !strings.Contains(err.Error(), `/nmae (did you mean "name"?)`) {
		t.Errorf("the detail does not name the member meant: %v", err)
	}
}

// A body of many thousand mistakes gets an answer of a bounded size: the
// first MaxProblemErrors pointers, the rest counted, a detail naming ten.
func TestProblemsAreBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"name":"a"`)
	for i := range 5000 {
		fmt.Fprintf(&b, `,"k%d":1`, i)
	}
	b.WriteString("}")
	req := httptest.NewRequest("POST", "/", strings.NewReader(b.String()))
	_, err := Decode[nested](httptest.NewRecorder(), req, 1<<20)
	rec := httptest.NewRecorder()
	WriteError(rec, req, slog.New(slog.DiscardHandler), err)
	var doc struct {
		Code          string `json:"code"`
		Detail        string `json:"detail"`
		Errors        []any  `json:"errors"`
		ErrorsOmitted int    `json:"errors_omitted"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	// A batch item's problem is bounded alike.
	if _, item := ItemProblemOf(req, slog.New(slog.DiscardHandler), err, 3); len(item["errors"].([]fault.FieldError)) != MaxProblemErrors || item["errors_omitted"] != 5000-MaxProblemErrors {
		t.Errorf("a batch item's problem lists %d errors, omits %v; want %d, the rest counted", len(item["errors"].([]fault.FieldError)), item["errors_omitted"], MaxProblemErrors)
	}
	if doc.Code != "unknown_field" || len(doc.Errors) != MaxProblemErrors || doc.ErrorsOmitted != 5000-MaxProblemErrors ||
		!strings.HasSuffix(doc.Detail, "… (5000 in all)") || rec.Body.Len() > 20_000 {
		t.Errorf("5,000 unknown fields: %s %d errors, %d omitted, %d bytes, detail %.200q; want %d errors, the rest counted, ten named",
			doc.Code, len(doc.Errors), doc.ErrorsOmitted, rec.Body.Len(), doc.Detail, MaxProblemErrors)
	}
}

// JSON answers quote what clients sent; a browser must not sniff them into
// HTML.
func TestEncodeForbidsSniffing(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	Encode(rec, http.StatusOK, map[string]string{"name": "<script>alert(1)</script>"})
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
	}
}

// An empty or blank body is no document for DecodeOrZero: the zero value,
// so that the route names the member it misses.
func TestDecodeOrZeroTakesABlankBodyAsEmpty(t *testing.T) {
	t.Parallel()
	type req struct {
		Reason string `json:"reason"`
	}
	for _, body := range []string{"", " \n\t"} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		got, err := DecodeOrZero[req](httptest.NewRecorder(), r, 1<<10)
		if err != nil || got != (req{}) {
			t.Errorf("body %q: %+v, %v; want the zero value", body, got, err)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"reason": 1}`))
	if _, err := DecodeOrZero[req](httptest.NewRecorder(), r, 1<<10); err == nil {
		t.Error("a body of the wrong shape was accepted")
	}
}

// TestItemProblemOf: a batch item's problem points into the batch's body,
// and an item error that is no fault is answered as a response's would be
// (internal, its text kept from the client) rather than crashing the batch.
func TestItemProblemOf(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/", nil)
	status, doc := ItemProblemOf(r, nil, fault.New(fault.BadRequest, "invalid_outputs", "bad").WithErrors([]fault.FieldError{{Path: "/outputs/x", Message: "m"}}), 3)
	if errs, _ := doc["errors"].([]fault.FieldError); status != 400 || len(errs) != 1 || errs[0].Path != "/items/3/outputs/x" {
		t.Errorf("refused item: %d %v", status, doc)
	}
	status, doc = ItemProblemOf(r, nil, errors.New("pq: secret table detail"), 0)
	if status != 500 || doc["code"] != "internal" || strings.Contains(doc["detail"].(string), "secret") {
		t.Errorf("an item error that is no fault: %d %v", status, doc)
	}
}

// TestEncodeFailureIsAProblem: an answer that cannot be encoded is a 500
// problem+json like any internal error, not a plain-text one.
func TestEncodeFailureIsAProblem(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	Encode(rec, http.StatusOK, map[string]any{"x": func() {}})
	var p map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 500 || rec.Header().Get("Content-Type") != ProblemContentType || p["code"] != "internal" {
		t.Errorf("unencodable answer: %d %q %s (%v)", rec.Code, rec.Header().Get("Content-Type"), rec.Body, err)
	}
}

// NaN, Infinity and Python's None are named for what they are, where the
// decoder said only "invalid character".
func TestDecodeNamesNaNAndNone(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{"count":NaN}`, `{"count":-Infinity}`, `{"count":Infinity}`, `{"name":None}`} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(in))
		_, err := Decode[body](httptest.NewRecorder(), req, 100)
		if fe, ok := fault.As(err); !ok || fe.Code != "invalid_json" || !strings.Contains(fe.Detail, "NaN, Infinity and None are not JSON") {
			t.Errorf("%s: %v, want invalid_json naming NaN, Infinity and None", in, err)
		}
	}
}

// An outage fails every request alike: one "dependency unavailable" line
// is written every unavailableEvery, saying how many it held back, where
// each request wrote one.
func TestDependencyUnavailableIsLoggedOncePerPeriod(t *testing.T) {
	saved := unavailableLines
	unavailableLines = &throttle{every: unavailableEvery}
	t.Cleanup(func() { unavailableLines = saved })
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	cause := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	for range 100 {
		fe := fault.New(fault.Unavailable, "database_unavailable", "the database is unavailable")
		fe.Cause = cause
		WriteError(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/instances", nil), logger, fe)
	}
	if n := strings.Count(logs.String(), "dependency unavailable"); n != 1 {
		t.Errorf("%d lines for 100 refused requests, want 1:\n%s", n, logs.String())
	}

	th := &throttle{every: 10 * time.Second}
	at := time.Unix(1000, 0)
	for i, c := range []struct {
		after time.Duration
		held  int
		ok    bool
	}{{0, 0, true}, {time.Second, 0, false}, {5 * time.Second, 0, false}, {10 * time.Second, 2, true}, {11 * time.Second, 0, false}, {19 * time.Second, 0, false}, {20 * time.Second, 2, true},
		{21 * time.Second, 0, false}, {45 * time.Second, 0, true}} { // a burst that ended is not carried to the next
		if held, ok := th.allow(at.Add(c.after)); held != c.held || ok != c.ok {
			t.Errorf("line %d at +%v: held %d, ok %v; want %d, %v", i, c.after, held, ok, c.held, c.ok)
		}
	}
}
