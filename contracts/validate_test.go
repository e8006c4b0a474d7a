package contracts

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// independentSchema compiles the served JSON Schema document the way an
// API client would, with nothing from this package in the loop.
func independentSchema(t testing.TB, c Contract) *jsonschema.Schema {
	t.Helper()
	compiler := jsonschema.NewCompiler()
	compiler.Draft = jsonschema.Draft2020
	compiler.AssertFormat = true
	if err := compiler.AddResource("mem://independent.json", bytes.NewReader(c.JSONSchema())); err != nil {
		t.Fatalf("AddResource: %v", err)
	}
	s, err := compiler.Compile("mem://independent.json")
	if err != nil {
		t.Fatalf("independent compile: %v\nschema: %s", err, c.JSONSchema())
	}
	return s
}

// checkAgreement asserts that Validate, the library-only path and an
// independently compiled copy of the served schema agree on value.
func checkAgreement(t *testing.T, v *Validator, indep *jsonschema.Schema, value string) []Violation {
	t.Helper()
	got := v.Validate([]byte(value))
	slow := v.validateSlow([]byte(value))
	if (got == nil) != (slow == nil) {
		t.Errorf("Validate(%s) = %v but library path = %v, want the same verdict", value, got, slow)
	}
	if got != nil && !reflect.DeepEqual(got, slow) {
		t.Errorf("Validate(%s) = %v, library path = %v, want identical", value, got, slow)
	}
	if doc, err := decodeValue([]byte(value)); err == nil {
		if _, isObj := doc.(map[string]any); isObj && !hasOutOfRange(doc) {
			indepErr := indep.Validate(doc)
			if (indepErr == nil) != (got == nil) {
				t.Errorf("value %s: independent schema says valid=%v, Validate says %v", value, indepErr == nil, got)
			}
		}
	}
	return got
}

func hasOutOfRange(v any) bool {
	var vs []Violation
	sanitizeNumbers(v, nil, &vs)
	return len(vs) > 0
}

func TestValidateTypesAndOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		field   string // field definition; its name is always "v"
		value   string // JSON value of "v"
		path    string // expected violation path, when invalid
		message string // expected message; "" means valid
	}{
		{"text valid", `{"type":"text"}`, `"abc"`, "", ""},
		{"text escaped valid", `{"type":"text","max_length":3}`, `"a\né"`, "", ""},
		{"text wrong type", `{"type":"text"}`, `5`, "/v", "must be a string, not integer"},
		{"text null", `{"type":"text"}`, `null`, "/v", "must be a string, not null (an optional field is left out, never null)"},
		{"required text null", `{"type":"text","required":true}`, `null`, "/v", "must be a string, not null"},
		{"list item null", `{"type":"list","items":{"type":"text"}}`, `["a",null]`, "/v/1", "must be a string, not null"},
		{"object member null", `{"type":"object","fields":[{"name":"w","type":"integer"}]}`, `{"w":null}`, "/v/w", "must be an integer, not null (an optional field is left out, never null)"},
		{"min_length valid", `{"type":"text","min_length":2}`, `"ab"`, "", ""},
		{"min_length invalid", `{"type":"text","min_length":2}`, `"a"`, "/v", "must be at least 2 characters"},
		{"min_length one", `{"type":"text","min_length":1}`, `""`, "/v", "must be at least 1 character"},
		{"max_length counts characters", `{"type":"text","max_length":3}`, `"héé"`, "", ""},
		{"max_length invalid", `{"type":"text","max_length":3}`, `"abcd"`, "/v", "must be at most 3 characters"},
		{"pattern valid", `{"type":"text","pattern":"^[a-z]+$"}`, `"abc"`, "", ""},
		{"pattern invalid", `{"type":"text","pattern":"^[a-z]+$"}`, `"ABC"`, "/v", `must match pattern "^[a-z]+$"`},
		{"pattern with a backslash", `{"type":"text","pattern":"^CLM-\\d{8}$"}`, `"CLM-1"`, "/v", `must match pattern "^CLM-\d{8}$"`},
		{"pattern is unanchored", `{"type":"text","pattern":"[0-9]"}`, `"ab1cd"`, "", ""},
		{"pattern on escaped", `{"type":"text","pattern":"^a\\nb$"}`, `"a\nb"`, "", ""},
		{"email valid", `{"type":"text","format":"email"}`, `"jane@example.com"`, "", ""},
		{"email invalid", `{"type":"text","format":"email"}`, `"jane.example.com"`, "/v", "must be a valid email address"},
		// net/mail skips white space before an address.
		{"email leading space", `{"type":"text","format":"email"}`, `" jane@example.com"`, "/v", "must be a valid email address"},
		{"email leading tab", `{"type":"text","format":"email"}`, `"\tjane@example.com"`, "/v", "must be a valid email address"},
		{"email and pattern", `{"type":"text","format":"email","pattern":"@example[.]com$"}`, `"jane@example.com"`, "", ""},
		{"uri valid", `{"type":"text","format":"uri"}`, `"https://example.com/a?b=c"`, "", ""},
		{"uri invalid", `{"type":"text","format":"uri"}`, `"example.com/relative"`, "/v", "must be a valid absolute URI"},
		{"uuid valid", `{"type":"text","format":"uuid"}`, `"3f2b8c1e-6a4d-4e7b-9c0a-1d2e3f4a5b6c"`, "", ""},
		{"uuid invalid", `{"type":"text","format":"uuid"}`, `"3f2b8c1e"`, "/v", "must be a valid UUID"},

		{"integer valid", `{"type":"integer"}`, `42`, "", ""},
		{"integer with zero fraction", `{"type":"integer"}`, `42.0`, "", ""},
		{"integer exponent", `{"type":"integer"}`, `1e3`, "", ""},
		{"integer fraction", `{"type":"integer"}`, `4.5`, "/v", "must be an integer, not number"},
		{"integer string", `{"type":"integer"}`, `"42"`, "/v", "must be an integer, not string"},
		{"integer minimum valid", `{"type":"integer","minimum":10}`, `10`, "", ""},
		{"integer minimum invalid", `{"type":"integer","minimum":10}`, `9`, "/v", "must be at least 10"},
		{"integer maximum valid", `{"type":"integer","maximum":10}`, `10`, "", ""},
		{"integer maximum invalid", `{"type":"integer","maximum":10}`, `11`, "/v", "must be at most 10"},
		{"integer negative bound", `{"type":"integer","minimum":-5}`, `-6`, "/v", "must be at least -5"},
		{"integer huge", `{"type":"integer","maximum":9007199254740993}`, `9007199254740994`, "/v", "must be at most 9007199254740993"},

		{"number valid", `{"type":"number"}`, `1.5`, "", ""},
		{"number boolean", `{"type":"number"}`, `true`, "/v", "must be a number, not boolean"},
		{"number minimum invalid", `{"type":"number","minimum":0.5}`, `0.4999`, "/v", "must be at least 0.5"},
		{"number maximum exact", `{"type":"number","maximum":1e2}`, `100.000000000000000001`, "/v", "must be at most 1e2"},
		{"number maximum valid", `{"type":"number","maximum":1e2}`, `99.99`, "", ""},
		{"number out of range", `{"type":"number","maximum":1}`, `1e99999999`, "/v", "number is out of range: 0, or a magnitude from 1e-40 to below 1e41"},
		// PostgreSQL would write these out in full: 1e-999 as a thousand
		// digits.
		{"number underflowing", `{"type":"number"}`, `1e-999`, "/v", "number is out of range: 0, or a magnitude from 1e-40 to below 1e41"},
		{"number too small", `{"type":"number"}`, `-1.5e-41`, "/v", "number is out of range: 0, or a magnitude from 1e-40 to below 1e41"},
		{"number too large", `{"type":"number"}`, `1e41`, "/v", "number is out of range: 0, or a magnitude from 1e-40 to below 1e41"},
		{"number written out too large", `{"type":"number"}`, `100000000000000000000000000000000000000000`, "/v", "number is out of range: 0, or a magnitude from 1e-40 to below 1e41"},
		{"number written too long", `{"type":"number"}`, "0." + strings.Repeat("1", 511), "/v", "number is written with more than 512 characters"},
		{"number written at the longest", `{"type":"number"}`, "0." + strings.Repeat("1", 510), "", ""},
		// Its zeros do not count: PostgreSQL writes a value out with them,
		// and what one node stored must pass the next node's inputs.
		{"number with many trailing zeros", `{"type":"number"}`, "0.5" + strings.Repeat("0", 600), "", ""},
		{"number smallest", `{"type":"number"}`, `-1e-40`, "", ""},
		{"number largest", `{"type":"number"}`, `9.99e40`, "", ""},
		{"number zero with exponent", `{"type":"number"}`, `0.000e999`, "", ""},

		{"boolean valid", `{"type":"boolean"}`, `false`, "", ""},
		{"boolean string", `{"type":"boolean"}`, `"true"`, "/v", "must be a boolean, not string"},

		{"date valid", `{"type":"date"}`, `"2024-02-29"`, "", ""},
		{"date invalid", `{"type":"date"}`, `"2023-02-29"`, "/v", "must be a valid date (YYYY-MM-DD)"},
		{"date number", `{"type":"date"}`, `20240101`, "/v", "must be a date string (YYYY-MM-DD), not integer"},
		{"datetime valid", `{"type":"datetime"}`, `"2024-05-01T09:30:00+02:00"`, "", ""},
		// RFC 3339 takes these, the decoders workers use refuse them.
		{"datetime leap second", `{"type":"datetime"}`, `"2016-12-31T23:59:60Z"`, "/v", "must be a valid RFC 3339 date-time, its T and Z upper-case, its seconds at most 59"},
		{"datetime lower-case t", `{"type":"datetime"}`, `"2024-01-01t00:00:00Z"`, "/v", "must be a valid RFC 3339 date-time, its T and Z upper-case, its seconds at most 59"},
		{"datetime lower-case z", `{"type":"datetime"}`, `"2024-01-01T00:00:00.5z"`, "/v", "must be a valid RFC 3339 date-time, its T and Z upper-case, its seconds at most 59"},
		{"datetime fraction and offset", `{"type":"datetime"}`, `"2024-01-01T00:00:00.123456789-09:30"`, "", ""},
		{"datetime beyond nanoseconds", `{"type":"datetime"}`, `"2024-01-01T00:00:00.1234567891Z"`, "/v", "must be a valid RFC 3339 date-time, its T and Z upper-case, its seconds at most 59"},
		{"datetime invalid", `{"type":"datetime"}`, `"2024-05-01 09:30:00 CET"`, "/v", "must be a valid RFC 3339 date-time, its T and Z upper-case, its seconds at most 59"},
		// The usual slips are named: no offset (Python's utcnow().isoformat()), no time.
		{"datetime without offset", `{"type":"datetime"}`, `"2026-12-07T10:00:00.123456"`, "/v", "must be an RFC 3339 date-time with its offset, which this one lacks: end it with Z for UTC, or +01:00 and the like (2026-12-07T10:00:00Z)"},
		{"datetime with a space, without offset", `{"type":"datetime"}`, `"2024-05-01 09:30"`, "/v", "must be an RFC 3339 date-time, which needs its seconds; a T between date and time, not a space; its offset (Z for UTC, or +01:00 and the like): 2026-12-07T10:00:00Z"},
		{"datetime without seconds nor offset", `{"type":"datetime"}`, `"2026-12-07T10:00"`, "/v", "must be an RFC 3339 date-time, which needs its seconds; its offset (Z for UTC, or +01:00 and the like): 2026-12-07T10:00:00Z"},
		{"datetime with a space, without offset, with seconds", `{"type":"datetime"}`, `"2026-12-07 10:00:00"`, "/v", "must be an RFC 3339 date-time, which needs a T between date and time, not a space; its offset (Z for UTC, or +01:00 and the like): 2026-12-07T10:00:00Z"},
		{"datetime without seconds", `{"type":"datetime"}`, `"2026-12-07T10:00Z"`, "/v", "must be an RFC 3339 date-time, whose seconds this one lacks (2026-12-07T10:00:00Z)"},
		{"datetime with a space", `{"type":"datetime"}`, `"2026-12-07 10:00:00Z"`, "/v", "must be an RFC 3339 date-time, which puts a T between date and time, not a space (2026-12-07T10:00:00Z)"},
		{"datetime with an offset without its colon", `{"type":"datetime"}`, `"2026-12-07T10:00:00+0100"`, "/v", "must be an RFC 3339 date-time, whose offset has a colon (+01:00, not +0100)"},
		{"datetime without time", `{"type":"datetime"}`, `"2026-12-07"`, "/v", "must be an RFC 3339 date-time, which this date lacks the time of (2026-12-07T10:00:00Z); a date alone is a field of type date"},

		{"choice valid", `{"type":"choice","values":["a","b"]}`, `"b"`, "", ""},
		{"choice invalid", `{"type":"choice","values":["a","b"]}`, `"z"`, "/v", `must be one of "a", "b"`},
		{"choice wrong type", `{"type":"choice","values":["a","b"]}`, `1`, "/v", "must be a string, not integer"},

		{"object valid", `{"type":"object","fields":[{"name":"x","type":"text","required":true}]}`, `{"x":"1"}`, "", ""},
		{"object additional", `{"type":"object","fields":[{"name":"x","type":"text"}]}`, `{"x":"1","y":2}`, "/v/y", "is not a field of the contract"},
		{"object misspelt field", `{"type":"object","fields":[{"name":"email","type":"text"},{"name":"mail_id","type":"text"}]}`, `{"emial":"a","mail_id":"b"}`, "/v/emial", `is not a field of the contract (did you mean "email"?)`},
		{"object missing required", `{"type":"object","fields":[{"name":"x","type":"text","required":true}]}`, `{}`, "/v/x", "is required"},
		{"object nested type", `{"type":"object","fields":[{"name":"x","type":"integer"}]}`, `{"x":"1"}`, "/v/x", "must be an integer, not string"},
		{"object wrong type", `{"type":"object","fields":[]}`, `"x"`, "/v", "must be an object, not string"},
		{"empty object valid", `{"type":"object","fields":[]}`, `{}`, "", ""},

		{"list valid", `{"type":"list","items":{"type":"text"}}`, `["a","b"]`, "", ""},
		{"list empty valid", `{"type":"list","items":{"type":"text"}}`, `[]`, "", ""},
		{"list item type", `{"type":"list","items":{"type":"text"}}`, `["a",1]`, "/v/1", "must be a string, not integer"},
		{"list wrong type", `{"type":"list","items":{"type":"text"}}`, `"a"`, "/v", "must be an array, not string"},
		{"min_items valid", `{"type":"list","min_items":1,"items":{"type":"text"}}`, `["a"]`, "", ""},
		{"min_items invalid", `{"type":"list","min_items":1,"items":{"type":"text"}}`, `[]`, "/v", "must have at least 1 item"},
		{"max_items invalid", `{"type":"list","max_items":2,"items":{"type":"text"}}`, `["a","b","c"]`, "/v", "must have at most 2 items"},
		{"list of objects", `{"type":"list","items":{"type":"object","fields":[{"name":"n","type":"text","required":true}]}}`, `[{"n":"a"},{}]`, "/v/1/n", "is required"},
		{"list item option", `{"type":"list","items":{"type":"text","max_length":1}}`, `["a","bc"]`, "/v/1", "must be at most 1 character"},
		{"nested lists", `{"type":"list","items":{"type":"list","items":{"type":"integer","minimum":0}}}`, `[[1],[2,-1]]`, "/v/1/1", "must be at least 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			field := strings.Replace(tt.field, "{", `{"name":"v",`, 1)
			c := mustParseContract(t, `{"fields":[`+field+`]}`)
			v := mustCompile(t, c)
			indep := independentSchema(t, c)
			got := checkAgreement(t, v, indep, `{"v":`+tt.value+`}`)
			if tt.message == "" {
				if got != nil {
					t.Fatalf("Validate(%s): got %v, want valid", tt.value, got)
				}
				return
			}
			want := []Violation{{Path: tt.path, Message: tt.message}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Validate(%s):\n got %v\nwant %v", tt.value, got, want)
			}
		})
	}
}

func TestValidateDocumentLevel(t *testing.T) {
	t.Parallel()
	v := mustCompile(t, mustParseContract(t, `{"fields":[{"name":"a","type":"text","required":true}]}`))
	tests := []struct {
		value, prefix string
	}{
		{`{"a":`, "invalid json"},
		{``, "invalid json: empty document"},
		{`{"a":"x"} {}`, "invalid json: unexpected data"},
		{`["a"]`, "must be an object, not array"},
		{`"a"`, "must be an object, not string"},
		{`null`, "must be an object, not null"},
	}
	for _, tt := range tests {
		got := v.Validate([]byte(tt.value))
		if len(got) != 1 || got[0].Path != "" || !strings.HasPrefix(got[0].Message, tt.prefix) {
			t.Errorf("Validate(%q): got %v, want one violation at \"\" starting with %q", tt.value, got, tt.prefix)
		}
	}
	if got := v.Validate([]byte(" \n{\"a\":\"x\"}\t ")); got != nil {
		t.Errorf("Validate with surrounding whitespace: got %v, want valid", got)
	}
}

func TestValidateReportsEveryViolationSorted(t *testing.T) {
	t.Parallel()
	w := mustParseWorking(t, richWorking)
	v := mustCompile(t, w.Inputs)
	payload := `{"company_name": 5, "y": 2, "x": 1, "website": "nope", "employees": 1.5, "tier": "iron",
	  "address": {"street": "a", "zz": 1}, "tags": ["a", 3, "0123456789012345678901234567890123"],
	  "contacts": [{"email": "bad"}], "scores": [1e99999999, 101], "founded": "2020-13-01",
	  "last_contact": "x", "crm_id": "abc", "request_id": "zz", "priority": 0, "api_key": "sk_live_XYZ"}`
	got := v.Validate([]byte(payload))
	want := []Violation{
		{"/address/city", "is required", Invalid},
		{"/address/zz", "is not a field of the contract", Invalid},
		{"/company_name", "must be a string, not integer", Invalid},
		{"/contact_email", "is required", Invalid},
		{"/contacts/0/email", "must be a valid email address", Invalid},
		{"/contacts/0/name", "is required", Invalid},
		{"/crm_id", `must match pattern "^[A-Z]{3}-[0-9]{6}$"`, Invalid},
		{"/employees", "must be an integer, not number", Invalid},
		{"/founded", "must be a valid date (YYYY-MM-DD)", Invalid},
		{"/last_contact", "must be a valid RFC 3339 date-time, its T and Z upper-case, its seconds at most 59", Invalid},
		{"/priority", "must be at least 1", Invalid},
		{"/request_id", "must be a valid UUID", Invalid},
		{"/scores/0", "number is out of range: 0, or a magnitude from 1e-40 to below 1e41", Invalid},
		{"/scores/1", "must be at most 100", Invalid},
		{"/tags/1", "must be a string, not integer", Invalid},
		{"/tags/2", "must be at most 30 characters", Invalid},
		{"/tier", `must be one of "gold", "silver", "bronze"`, Invalid},
		{"/website", "must be a valid absolute URI", Invalid},
		{"/x", "is not a field of the contract", Invalid},
		{"/y", "is not a field of the contract", Invalid},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Validate:\n got %v\nwant %v", got, want)
	}
	for _, x := range got {
		if strings.Contains(x.Message, "sk_live") || strings.Contains(x.Message, "nope") {
			t.Errorf("violation %v quotes the submitted value, want values never echoed", x)
		}
	}
}

func TestValidateSortsIndexesNumerically(t *testing.T) {
	t.Parallel()
	v := mustCompile(t, mustParseContract(t, `{"fields":[{"name":"l","type":"list","items":{"type":"integer"}}]}`))
	items := make([]string, 12)
	for i := range items {
		items[i] = `"x"`
	}
	got := v.Validate([]byte(`{"l":[` + strings.Join(items, ",") + `]}`))
	if len(got) != 12 {
		t.Fatalf("got %d violations, want 12: %v", len(got), got)
	}
	for i, x := range got {
		if want := fmt.Sprintf("/l/%d", i); x.Path != want {
			t.Errorf("violation %d: got path %q, want %q", i, x.Path, want)
		}
	}
}

// TestFastPathAgreesWithLibrary feeds near-miss payloads to both paths.
func TestFastPathAgreesWithLibrary(t *testing.T) {
	t.Parallel()
	w := mustParseWorking(t, richWorking)
	v := mustCompile(t, w.Inputs)
	if v.fast == nil {
		t.Fatal("rich contract did not get a fast path")
	}
	indep := independentSchema(t, w.Inputs)
	variants := []string{
		richPayload,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold"}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","employees":1e0}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","employees":0.5e1}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","employees":-0}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","employees":01}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","scores":[100.0,0e5,1E+2]}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","scores":[100.0000001]}`,
		`{"company_name":"\u0041\ud83d\ude00","contact_email":"a@b.co","tier":"gold"}`,
		`{"company_name":"A\ud800","contact_email":"a@b.co","tier":"gold"}`,
		`{"company_name":"","contact_email":"a@b.co","tier":"gold"}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gol\u0064"}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold",}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold"`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","is_customer":tru}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","tags":[]}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","tags":[,]}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","address":{"street":"s","city":"c"}}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","address":{"street":"s"}}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","owner":{"id":1.0}}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","crm_id":"ACM-123456\n"}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","card":{"expiry":"1/27"}}`,
		"{\"company_name\":\"A\xff\",\"contact_email\":\"a@b.co\",\"tier\":\"gold\"}",
		"{\"company_name\":\"A\tB\",\"contact_email\":\"a@b.co\",\"tier\":\"gold\"}",
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","priority":5.000}`,
		`{"company_name":"A","contact_email":"a@b.co","tier":"gold","priority":5.001}`,
	}
	for _, p := range variants {
		checkAgreement(t, v, indep, p)
	}
	// Duplicate keys are left to the library, which keeps the last one.
	dup := `{"company_name":1,"company_name":"A","contact_email":"a@b.co","tier":"gold"}`
	if v.fast.accepts([]byte(dup)) {
		t.Errorf("fast path accepted duplicate keys, want it to defer to the library")
	}
	if got := v.Validate([]byte(dup)); got != nil {
		t.Errorf("Validate(duplicate keys): got %v, want the library's verdict (valid, last key wins)", got)
	}
}

func TestCompileRejectsBadHandBuiltContract(t *testing.T) {
	t.Parallel()
	c := Contract{Fields: []Field{{Name: "x", Type: TypeText, Pattern: "("}}}
	if v, err := Compile(c); err == nil {
		t.Fatalf("Compile with invalid pattern: got %v, nil; want an error", v)
	}
}

func TestCacheCompilesOncePerDigest(t *testing.T) {
	t.Parallel()
	w := mustParseWorking(t, richWorking)
	cache := NewCache()
	var wg sync.WaitGroup
	got := make([]*Validator, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := cache.Validator(w.Digest(), "inputs", w.Inputs)
			if err != nil {
				t.Errorf("Validator: %v", err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	for i, v := range got {
		if v != got[0] {
			t.Fatalf("validator %d is %p, want the single cached %p", i, v, got[0])
		}
	}
	other, err := cache.Validator(w.Outputs.Digest(), "outputs", w.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	if other == got[0] {
		t.Fatal("different digests share a validator, want one per digest")
	}
	// One revision digest, two parts: two validators.
	outputs, err := cache.Validator(w.Digest(), "outputs", w.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	if outputs == got[0] {
		t.Fatal("a revision's inputs and outputs share a validator, want one per part")
	}
	if vs := other.Validate([]byte(`{"decision":"approved"}`)); vs != nil {
		t.Fatalf("outputs validator: got %v, want valid", vs)
	}
}

func TestValidatorConcurrentUse(t *testing.T) {
	t.Parallel()
	w := mustParseWorking(t, richWorking)
	v := mustCompile(t, w.Inputs)
	invalid := `{"company_name":1,"contact_email":"x","tier":"iron"}`
	want := v.Validate([]byte(invalid))
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if got := v.Validate([]byte(richPayload)); got != nil {
					t.Errorf("valid payload: got %v", got)
					return
				}
				if got := v.Validate([]byte(invalid)); !reflect.DeepEqual(got, want) {
					t.Errorf("invalid payload: got %v, want %v", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
