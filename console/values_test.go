package console

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/relais/relais/contracts"
)

func TestValueRowsNeverShowProtectedValues(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{
		{Name: "name", Type: contracts.TypeText},
		{Name: "key", Type: contracts.TypeText, Classification: contracts.ClassSecret},
		{Name: "card", Type: contracts.TypeObject, Classification: contracts.ClassSensitive, Fields: []contracts.Field{
			{Name: "number", Type: contracts.TypeText}}},
		{Name: "items", Type: contracts.TypeList, Items: &contracts.Field{Type: contracts.TypeObject, Fields: []contracts.Field{
			{Name: "pin", Type: contracts.TypeText, Classification: contracts.ClassSecret},
			{Name: "label", Type: contracts.TypeText}}}},
		{Name: "absent", Type: contracts.TypeInteger},
	}}
	// Unmasked protected values, as if masking had failed upstream, and an
	// undeclared property: none of them may be shown.
	raw := json.RawMessage(`{"name": "Acme", "key": "TOPSECRET-1", "card": {"number": "4111-SENSITIVE"},
		"items": [{"pin": "PIN-SECRET", "label": "first"}], "extra": "UNDECLARED"}`)
	rows := valueRows(en, c, raw)
	var shown strings.Builder
	for _, r := range rows {
		shown.WriteString(r.Label + r.Within + "=" + r.Value + "\n")
	}
	for _, leak := range []string{"TOPSECRET", "4111", "SENSITIVE", "PIN-SECRET", "UNDECLARED", "extra"} {
		if strings.Contains(shown.String(), leak) {
			t.Errorf("rows show %q:\n%s", leak, shown.String())
		}
	}
	// A nested row names its parent for screen readers (Within).
	want := "name=Acme\nkey=hidden (secret)\ncard=hidden (sensitive)\nitems=1 item\n#1(in items)=\npin(in #1)=hidden (secret)\nlabel(in #1)=first\nabsent=not provided\n"
	if shown.String() != want {
		t.Errorf("rows:\n%s\nwant:\n%s", shown.String(), want)
	}
	// A marker the engine wrote is honoured even on a field the contract
	// calls normal, and an unknown marker counts as secret.
	rows = valueRows(fr, contracts.Contract{Fields: []contracts.Field{{Name: "a", Type: contracts.TypeText}, {Name: "b", Type: contracts.TypeText}}},
		json.RawMessage(`{"a": {"$masked": "sensitive"}, "b": {"$masked": "whatever"}}`))
	if len(rows) != 2 || rows[0].Value != "masqué (sensible)" || rows[1].Value != "masqué (secret)" {
		t.Errorf("markers: %+v", rows)
	}
}

// TestValueRowPointers checks the JSON pointer each row carries (what a
// reveal names) and which masked rows an admin may reveal.
func TestValueRowPointers(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{
		{Name: "name", Type: contracts.TypeText},
		{Name: "key", Type: contracts.TypeText, Classification: contracts.ClassSecret},
		{Name: "card", Type: contracts.TypeObject, Classification: contracts.ClassSensitive, Fields: []contracts.Field{
			{Name: "number", Type: contracts.TypeText}}},
		{Name: "items", Type: contracts.TypeList, Items: &contracts.Field{Type: contracts.TypeObject, Fields: []contracts.Field{
			{Name: "pin", Type: contracts.TypeText, Classification: contracts.ClassSecret},
			{Name: "phone", Type: contracts.TypeText, Classification: contracts.ClassSensitive}}}},
		{Name: "absent", Type: contracts.TypeInteger},
	}}
	raw := json.RawMessage(`{"name":"Acme","key":{"$masked":"secret"},"card":{"$masked":"sensitive"},
		"items":[{"pin":{"$masked":"secret"},"phone":{"$masked":"sensitive"}},{"phone":{"$masked":"sensitive"}}]}`)
	var got []string
	for _, r := range valueRows(en, c, raw) {
		s := r.Pointer
		if r.Sensitive {
			s += " (revealable)"
		}
		got = append(got, s)
	}
	want := []string{"/name", "/key", "/card (revealable)", "/items", "/items/0", "/items/0/pin", "/items/0/phone (revealable)",
		"/items/1", "/items/1/pin", "/items/1/phone (revealable)", "/absent"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("pointers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDescribeChangeInBothLanguages(t *testing.T) {
	t.Parallel()
	older := contracts.Working{Name: "x",
		Inputs: contracts.Contract{Fields: []contracts.Field{
			{Name: "a", Type: contracts.TypeText, Required: true},
			{Name: "c", Type: contracts.TypeChoice, Values: []string{"x", "y"}},
			{Name: "gone", Type: contracts.TypeInteger},
			{Name: "mail", Type: contracts.TypeText}}},
		Outputs:       contracts.Contract{Fields: []contracts.Field{{Name: "r", Type: contracts.TypeChoice, Required: true, Values: []string{"ok"}}}},
		RoutingOutput: "r"}
	newer := contracts.Working{Name: "x",
		Inputs: contracts.Contract{Fields: []contracts.Field{
			{Name: "a", Type: contracts.TypeInteger},
			{Name: "c", Type: contracts.TypeChoice, Values: []string{"y", "z"}, Classification: contracts.ClassSecret},
			{Name: "new", Type: contracts.TypeText, Required: true},
			{Name: "key", Type: contracts.TypeText, Classification: contracts.ClassSecret},
			{Name: "mail", Type: contracts.TypeText, Format: "email"}}},
		Outputs: contracts.Contract{Fields: []contracts.Field{{Name: "r", Type: contracts.TypeChoice, Required: true, Values: []string{"ok"}}}}}
	got := map[string][2]string{}
	for _, ch := range contracts.Diff(older, newer) {
		got[string(ch.Kind)+" "+ch.Path] = [2]string{describeChange(en, ch, older, newer), describeChange(fr, ch, older, newer)}
	}
	want := map[string][2]string{
		"required_changed /inputs/a":       {"required → optional", "obligatoire → facultatif"},
		"type_changed /inputs/a":           {"text → integer", "texte → entier"},
		"choices_changed /inputs/c":        {"values added: z; values removed: x", "valeurs ajoutées\u202f: z\u202f; valeurs retirées\u202f: x"},
		"classification_changed /inputs/c": {"normal → secret", "normale → secrète"},
		"removed /inputs/gone":             {"optional field of type integer", "champ facultatif de type entier"},
		"added /inputs/new":                {"required field of type text", "champ obligatoire de type texte"},
		"added /inputs/key":                {"optional secret field of type text", "champ facultatif de type texte (classification secrète)"},
		"routing_changed /routing_output":  {"routing output r → none", "sortie de routage r → aucune"},
		// An option's "none" whatever its gender in French (evolution QA:
		// "format : aucune").
		"constraint_changed /inputs/mail": {`format: not set → "email"`, "format\u202f: néant → \"email\""},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("changes %v", got)
	}
}

// A value table shows the first maxValueRows rows and says how many more
// there are; a long text shows its first maxValueChars characters and its
// length.
func TestValueRowsAreBounded(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{
		{Name: "note", Type: contracts.TypeText},
		{Name: "tags", Type: contracts.TypeList, Items: &contracts.Field{Type: contracts.TypeText}},
	}}
	tags := make([]string, 2*maxValueRows)
	for i := range tags {
		tags[i] = "t"
	}
	doc, err := json.Marshal(map[string]any{"note": strings.Repeat("é", maxValueChars+10), "tags": tags})
	if err != nil {
		t.Fatal(err)
	}
	rows := valueRows(en, c, doc)
	if len(rows) != maxValueRows+1 {
		t.Fatalf("%d rows, want %d and one saying what is left out", len(rows), maxValueRows+1)
	}
	// note, tags, then the items: 2 + 2×maxValueRows rows in all.
	if last := rows[maxValueRows].Value; !strings.HasPrefix(last, "502 more values not shown") {
		t.Errorf("last row %q", last)
	}
	note := rows[0].Value
	if !strings.HasPrefix(note, strings.Repeat("é", maxValueChars)+"… (") || strings.Contains(note, strings.Repeat("é", maxValueChars+1)) ||
		!strings.HasSuffix(note, "(2,010 characters in all)") {
		t.Errorf("a long text shows as %.40q…%q", note, note[len(note)-40:])
	}
}

// Past maxOptions keys, a filter is a text field suggesting the known
// keys, not a menu that would stop at maxOptions without saying so.
func TestKeyMenuTakesAnyKeyPastItsBound(t *testing.T) {
	t.Parallel()
	render := func(n int) string {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "key" + strconv.Itoa(i)
		}
		var b strings.Builder
		if err := keyMenu("f-definition", "definition", "filter-definition", menuOptions("All definitions", keys, ""), "", nil).Render(en, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if small := render(3); !strings.Contains(small, "<select") || strings.Contains(small, "<datalist") {
		t.Errorf("3 keys: %s; want a menu", small)
	}
	large := render(maxOptions)
	if !strings.Contains(large, `<input id="f-definition" name="definition" type="text" list="f-definition-keys"`) ||
		!strings.Contains(large, `<datalist id="f-definition-keys">`) || strings.Count(large, "<option") != maxOptions {
		t.Errorf("%d keys: %.300s…; want a text field suggesting every key", maxOptions, large)
	}
}
