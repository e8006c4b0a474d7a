package contracts

import (
	"reflect"
	"strings"
	"testing"
)

// diffDocs builds two working copies that differ in one input or output
// field definition ("" leaves the field out).
func diffPair(t *testing.T, section, before, after string) (Working, Working) {
	t.Helper()
	doc := func(field string) string {
		other := `{"name":"keep","type":"text"}`
		fields := other
		if field != "" {
			fields = other + "," + field
		}
		if section == "inputs" {
			return `{"name":"D","inputs":{"fields":[` + fields + `]},"outputs":{"fields":[]}}`
		}
		return `{"name":"D","inputs":{"fields":[]},"outputs":{"fields":[` + fields + `]}}`
	}
	return mustParseWorking(t, doc(before)), mustParseWorking(t, doc(after))
}

func TestDiffRules(t *testing.T) {
	t.Parallel()
	type flags struct{ processes, workers bool }
	none, procs, workers, both := flags{}, flags{true, false}, flags{false, true}, flags{true, true}
	text := `{"name":"f","type":"text"}`
	tests := []struct {
		name    string
		section string
		before  string
		after   string
		kind    ChangeKind
		path    string
		detail  string
		want    flags
	}{
		// Inputs: processes produce them, workers read them.
		{"in added required", "inputs", "", `{"name":"f","type":"text","required":true}`, ChangeAdded, "/inputs/f", "added required text field", procs},
		{"in added optional", "inputs", "", text, ChangeAdded, "/inputs/f", "added optional text field", none},
		{"in removed", "inputs", text, "", ChangeRemoved, "/inputs/f", "removed optional text field", both},
		{"in type changed", "inputs", text, `{"name":"f","type":"integer"}`, ChangeTypeChanged, "/inputs/f", "type text → integer", both},
		{"in made required", "inputs", text, `{"name":"f","type":"text","required":true}`, ChangeRequiredChanged, "/inputs/f", "optional → required", procs},
		{"in made optional", "inputs", `{"name":"f","type":"text","required":true}`, text, ChangeRequiredChanged, "/inputs/f", "required → optional", workers},
		{"in choices added", "inputs", `{"name":"f","type":"choice","values":["a"]}`, `{"name":"f","type":"choice","values":["a","b"]}`, ChangeChoicesChanged, "/inputs/f", `values added: "b"`, workers},
		{"in choices removed", "inputs", `{"name":"f","type":"choice","values":["a","b"]}`, `{"name":"f","type":"choice","values":["a"]}`, ChangeChoicesChanged, "/inputs/f", `values removed: "b"`, procs},
		{"in choices swapped", "inputs", `{"name":"f","type":"choice","values":["a","b"]}`, `{"name":"f","type":"choice","values":["a","c"]}`, ChangeChoicesChanged, "/inputs/f", `values added: "c"; values removed: "b"`, both},
		{"in choices reordered", "inputs", `{"name":"f","type":"choice","values":["a","b"]}`, `{"name":"f","type":"choice","values":["b","a"]}`, ChangeChoicesChanged, "/inputs/f", "values reordered", none},
		{"in classification lowered", "inputs", `{"name":"f","type":"text","classification":"secret"}`, text, ChangeClassificationChanged, "/inputs/f", "classification secret → normal", procs},
		// A literal bound to it is refused once it is protected.
		{"in classification raised", "inputs", text, `{"name":"f","type":"text","classification":"sensitive"}`, ChangeClassificationChanged, "/inputs/f", "classification normal → sensitive", procs},
		// Integers still feed it; workers may receive fractions.
		{"in type widened", "inputs", `{"name":"f","type":"integer"}`, `{"name":"f","type":"number"}`, ChangeTypeChanged, "/inputs/f", "type integer → number", workers},
		{"in type narrowed", "inputs", `{"name":"f","type":"number"}`, `{"name":"f","type":"integer"}`, ChangeTypeChanged, "/inputs/f", "type number → integer", procs},
		{"in choice to text", "inputs", `{"name":"f","type":"choice","values":["a"]}`, text, ChangeTypeChanged, "/inputs/f", "type choice → text", workers},
		{"in min added", "inputs", text, `{"name":"f","type":"text","min_length":2}`, ChangeConstraintChanged, "/inputs/f", "min_length none → 2", procs},
		{"in min raised", "inputs", `{"name":"f","type":"text","min_length":1}`, `{"name":"f","type":"text","min_length":2}`, ChangeConstraintChanged, "/inputs/f", "min_length 1 → 2", procs},
		{"in min lowered", "inputs", `{"name":"f","type":"text","min_length":2}`, `{"name":"f","type":"text","min_length":1}`, ChangeConstraintChanged, "/inputs/f", "min_length 2 → 1", workers},
		{"in min removed", "inputs", `{"name":"f","type":"text","min_length":2}`, text, ChangeConstraintChanged, "/inputs/f", "min_length 2 → none", workers},
		{"in max added", "inputs", text, `{"name":"f","type":"text","max_length":200}`, ChangeConstraintChanged, "/inputs/f", "max_length none → 200", procs},
		{"in max lowered", "inputs", `{"name":"f","type":"text","max_length":200}`, `{"name":"f","type":"text","max_length":100}`, ChangeConstraintChanged, "/inputs/f", "max_length 200 → 100", procs},
		{"in max raised", "inputs", `{"name":"f","type":"text","max_length":100}`, `{"name":"f","type":"text","max_length":200}`, ChangeConstraintChanged, "/inputs/f", "max_length 100 → 200", workers},
		{"in max removed", "inputs", `{"name":"f","type":"text","max_length":100}`, text, ChangeConstraintChanged, "/inputs/f", "max_length 100 → none", workers},
		{"in minimum raised", "inputs", `{"name":"f","type":"number","minimum":0.5}`, `{"name":"f","type":"number","minimum":0.75}`, ChangeConstraintChanged, "/inputs/f", "minimum 0.5 → 0.75", procs},
		{"in maximum raised", "inputs", `{"name":"f","type":"integer","maximum":10}`, `{"name":"f","type":"integer","maximum":1e2}`, ChangeConstraintChanged, "/inputs/f", "maximum 10 → 1e2", workers},
		{"in pattern added", "inputs", text, `{"name":"f","type":"text","pattern":"^a"}`, ChangeConstraintChanged, "/inputs/f", `pattern none → "^a"`, procs},
		{"in pattern changed", "inputs", `{"name":"f","type":"text","pattern":"^a"}`, `{"name":"f","type":"text","pattern":"^b"}`, ChangeConstraintChanged, "/inputs/f", `pattern "^a" → "^b"`, both},
		{"in pattern removed", "inputs", `{"name":"f","type":"text","pattern":"^a"}`, text, ChangeConstraintChanged, "/inputs/f", `pattern "^a" → none`, workers},
		{"in format added", "inputs", text, `{"name":"f","type":"text","format":"email"}`, ChangeConstraintChanged, "/inputs/f", `format none → "email"`, procs},
		{"in format changed", "inputs", `{"name":"f","type":"text","format":"uri"}`, `{"name":"f","type":"text","format":"email"}`, ChangeConstraintChanged, "/inputs/f", `format "uri" → "email"`, both},
		{"in format removed", "inputs", `{"name":"f","type":"text","format":"uri"}`, text, ChangeConstraintChanged, "/inputs/f", `format "uri" → none`, workers},
		{"in min_items added", "inputs", `{"name":"f","type":"list","items":{"type":"text"}}`, `{"name":"f","type":"list","items":{"type":"text"},"min_items":1}`, ChangeConstraintChanged, "/inputs/f", "min_items none → 1", procs},
		{"in max_items raised", "inputs", `{"name":"f","type":"list","items":{"type":"text"},"max_items":1}`, `{"name":"f","type":"list","items":{"type":"text"},"max_items":5}`, ChangeConstraintChanged, "/inputs/f", "max_items 1 → 5", workers},
		{"in nested added", "inputs", `{"name":"f","type":"object","fields":[]}`, `{"name":"f","type":"object","fields":[{"name":"g","type":"date","required":true}]}`, ChangeAdded, "/inputs/f/g", "added required date field", procs},
		{"in list items type", "inputs", `{"name":"f","type":"list","items":{"type":"text"}}`, `{"name":"f","type":"list","items":{"type":"integer"}}`, ChangeTypeChanged, "/inputs/f/[]", "type text → integer", both},
		{"in list items nested", "inputs", `{"name":"f","type":"list","items":{"type":"object","fields":[{"name":"g","type":"text"}]}}`, `{"name":"f","type":"list","items":{"type":"object","fields":[]}}`, ChangeRemoved, "/inputs/f/[]/g", "removed optional text field", both},

		// Outputs: workers produce them, processes read and route on them.
		{"out added required", "outputs", "", `{"name":"f","type":"text","required":true}`, ChangeAdded, "/outputs/f", "added required text field", workers},
		{"out added optional", "outputs", "", text, ChangeAdded, "/outputs/f", "added optional text field", none},
		{"out removed", "outputs", text, "", ChangeRemoved, "/outputs/f", "removed optional text field", both},
		{"out type changed", "outputs", text, `{"name":"f","type":"boolean"}`, ChangeTypeChanged, "/outputs/f", "type text → boolean", both},
		{"out made required", "outputs", text, `{"name":"f","type":"text","required":true}`, ChangeRequiredChanged, "/outputs/f", "optional → required", workers},
		{"out made optional", "outputs", `{"name":"f","type":"text","required":true}`, text, ChangeRequiredChanged, "/outputs/f", "required → optional", procs},
		{"out choices added", "outputs", `{"name":"f","type":"choice","values":["a"]}`, `{"name":"f","type":"choice","values":["a","b"]}`, ChangeChoicesChanged, "/outputs/f", `values added: "b"`, procs},
		{"out choices removed", "outputs", `{"name":"f","type":"choice","values":["a","b"]}`, `{"name":"f","type":"choice","values":["a"]}`, ChangeChoicesChanged, "/outputs/f", `values removed: "b"`, workers},
		{"out classification raised", "outputs", text, `{"name":"f","type":"text","classification":"secret"}`, ChangeClassificationChanged, "/outputs/f", "classification normal → secret", procs},
		// Workers' integers still pass; a process binding it to an
		// integer input no longer publishes.
		{"out type widened", "outputs", `{"name":"f","type":"integer"}`, `{"name":"f","type":"number"}`, ChangeTypeChanged, "/outputs/f", "type integer → number", procs},
		{"out type narrowed", "outputs", `{"name":"f","type":"number"}`, `{"name":"f","type":"integer"}`, ChangeTypeChanged, "/outputs/f", "type number → integer", workers},
		{"out classification lowered", "outputs", `{"name":"f","type":"text","classification":"secret"}`, text, ChangeClassificationChanged, "/outputs/f", "classification secret → normal", none},
		{"out tightened", "outputs", `{"name":"f","type":"text","max_length":100}`, `{"name":"f","type":"text","max_length":10}`, ChangeConstraintChanged, "/outputs/f", "max_length 100 → 10", workers},
		{"out loosened", "outputs", `{"name":"f","type":"integer","minimum":1}`, `{"name":"f","type":"integer"}`, ChangeConstraintChanged, "/outputs/f", "minimum 1 → none", procs},
		{"out pattern changed", "outputs", `{"name":"f","type":"text","pattern":"^a"}`, `{"name":"f","type":"text","pattern":"^b"}`, ChangeConstraintChanged, "/outputs/f", `pattern "^a" → "^b"`, both},
		{"out format changed", "outputs", `{"name":"f","type":"text","format":"email"}`, `{"name":"f","type":"text","format":"uuid"}`, ChangeConstraintChanged, "/outputs/f", `format "email" → "uuid"`, both},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := diffPair(t, tt.section, tt.before, tt.after)
			got := Diff(a, b)
			want := []Change{{Kind: tt.kind, Path: tt.path, Detail: tt.detail, BreaksProcesses: tt.want.processes, BreaksWorkers: tt.want.workers,
				LowersProtection: strings.HasSuffix(tt.name, "classification lowered")}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Diff:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDiffRouting(t *testing.T) {
	t.Parallel()
	outs := `"outputs":{"fields":[{"name":"d","type":"choice","required":true,"values":["a","b"]},{"name":"e","type":"choice","required":true,"values":["x"]}]}`
	plain := mustParseWorking(t, `{"name":"D","inputs":{"fields":[]},`+outs+`}`)
	routedD := mustParseWorking(t, `{"name":"D","inputs":{"fields":[]},`+outs+`,"routing_output":"d"}`)
	routedE := mustParseWorking(t, `{"name":"Renamed","description":"new","inputs":{"fields":[]},`+outs+`,"routing_output":"e"}`)
	tests := []struct {
		a, b   Working
		detail string
	}{
		{plain, routedD, `routing_output none → "d"`},
		{routedD, plain, `routing_output "d" → none`},
		{routedD, routedE, `routing_output "d" → "e"`},
	}
	for _, tt := range tests {
		got := Diff(tt.a, tt.b)
		want := []Change{{Kind: ChangeRoutingChanged, Path: "/routing_output", Detail: tt.detail, BreaksProcesses: true}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Diff:\n got %+v\nwant %+v", got, want)
		}
	}
	if got := Diff(routedD, routedD); got != nil {
		t.Errorf("Diff of identical revisions: got %+v, want nil", got)
	}
}

// A value removed from the routing output breaks the processes routing on
// it (their publish is refused), not only the workers writing it.
func TestDiffRoutingValues(t *testing.T) {
	t.Parallel()
	routed := func(values string) Working {
		return mustParseWorking(t, `{"name":"D","inputs":{"fields":[]},"outputs":{"fields":[`+
			`{"name":"d","type":"choice","required":true,"values":[`+values+`]},`+
			`{"name":"e","type":"choice","required":true,"values":[`+values+`]}]},"routing_output":"d"}`)
	}
	tests := []struct {
		name string
		a, b Working
		want []Change
	}{
		{"removed", routed(`"a","b"`), routed(`"a"`), []Change{
			{Kind: ChangeChoicesChanged, Path: "/outputs/d", Detail: `values removed: "b"`, BreaksProcesses: true, BreaksWorkers: true},
			{Kind: ChangeChoicesChanged, Path: "/outputs/e", Detail: `values removed: "b"`, BreaksWorkers: true},
		}},
		{"added", routed(`"a"`), routed(`"a","b"`), []Change{
			{Kind: ChangeChoicesChanged, Path: "/outputs/d", Detail: `values added: "b"`, BreaksProcesses: true},
			{Kind: ChangeChoicesChanged, Path: "/outputs/e", Detail: `values added: "b"`, BreaksProcesses: true},
		}},
		{"reordered", routed(`"a","b"`), routed(`"b","a"`), []Change{
			{Kind: ChangeChoicesChanged, Path: "/outputs/d", Detail: "values reordered"},
			{Kind: ChangeChoicesChanged, Path: "/outputs/e", Detail: "values reordered"},
		}},
	}
	for _, tt := range tests {
		if got := Diff(tt.a, tt.b); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestDiffOrderAndCombination(t *testing.T) {
	t.Parallel()
	a := mustParseWorking(t, richWorking)
	bDoc := strings.NewReplacer(
		`"max_length": 200},`, `"max_length": 100},`,
		`{"name": "is_customer", "type": "boolean"},`, ``,
		`"required": true, "values": ["gold", "silver", "bronze"]`, `"values": ["gold", "silver", "platinum"]`,
		`{"name": "postcode", "type": "text", "max_length": 10}`, `{"name": "postcode", "type": "integer"}`,
		`"routing_output": "decision"`, `"routing_output": "decision", "description": "x"`,
	).Replace(richWorking)
	// The description key is now duplicated; drop the original one.
	bDoc = strings.Replace(bDoc, `"description": "Creates or updates the company record",`, "", 1)
	b := mustParseWorking(t, bDoc)
	got := Diff(a, b)
	want := []Change{
		{ChangeTypeChanged, "/inputs/address/postcode", "type text → integer", true, true, false},
		{ChangeConstraintChanged, "/inputs/company_name", "max_length 200 → 100", true, false, false},
		{ChangeRemoved, "/inputs/is_customer", "removed optional boolean field", true, true, false},
		{ChangeChoicesChanged, "/inputs/tier", `values added: "platinum"; values removed: "bronze"`, true, true, false},
		{ChangeRequiredChanged, "/inputs/tier", "required → optional", false, true, false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %+v\nwant %+v", got, want)
	}
	// Deterministic: same input, same output.
	if again := Diff(a, b); !reflect.DeepEqual(again, got) {
		t.Fatalf("Diff not deterministic")
	}
}

// A list raised to sensitive is one change, its items following it: the
// diff counted /outputs/reasons and /outputs/reasons/[] (designer QA). An
// item's own classification changed is still its own change.
func TestDiffListClassificationOnce(t *testing.T) {
	t.Parallel()
	list := func(listClass, itemClass string) string {
		item := `{"type":"text"` + itemClass + `}`
		return `{"name":"reasons","type":"list","items":` + item + listClass + `}`
	}
	a, b := diffPair(t, "outputs", list("", ""), list(`,"classification":"sensitive"`, ""))
	var paths []string
	for _, c := range Diff(a, b) {
		paths = append(paths, c.Path+" "+c.Detail)
	}
	if want := []string{"/outputs/reasons classification normal → sensitive"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("list raised: %q, want %q", paths, want)
	}
	a, b = diffPair(t, "outputs", list("", ""), list("", `,"classification":"secret"`))
	paths = nil
	for _, c := range Diff(a, b) {
		paths = append(paths, c.Path+" "+c.Detail)
	}
	if want := []string{"/outputs/reasons/[] classification normal → secret"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("items raised: %q, want %q", paths, want)
	}
}
