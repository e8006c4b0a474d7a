package contracts

import (
	"encoding/json"
	"testing"
)

const projectedWorking = `{"name":"n","inputs":{"fields":[
  {"name":"ref","type":"text"},
  {"name":"contacts","type":"list","items":{"type":"object","fields":[
    {"name":"role","type":"text"},{"name":"phone","type":"text","classification":"secret"},
    {"name":"tags","type":"list","items":{"type":"object","fields":[{"name":"k","type":"text"},{"name":"v","type":"text"}]}}]}},
  {"name":"codes","type":"list","items":{"type":"text"}},
  {"name":"address","type":"object","fields":[{"name":"zip","type":"text"},{"name":"city","type":"text"}]}]},
 "outputs":{"fields":[]}}`

func TestFieldPointerThroughListItems(t *testing.T) {
	w, vs := ParseWorking([]byte(projectedWorking))
	if len(vs) > 0 {
		t.Fatal(vs)
	}
	for _, c := range []struct{ pointer, err string }{
		{"/contacts", ""},
		{"/contacts/[]/role", ""},
		{"/contacts/[]/tags/[]/k", ""},
		{"/address/zip", ""},
		{"/contacts/role", "goes inside /contacts, a list: select a member of its items as /contacts/[]/role, or the list whole as /contacts"},
		{"/contacts/[]", "selects every item of /contacts: declare the list whole as /contacts, or a member of its items"},
		{"/contacts/[]/rol", "has no input at /contacts/[]/rol (did you mean /contacts/[]/role?)"},
		{"/codes/[]/x", "goes inside /codes/[], a text: only objects have members to select"},
		{"/ref/x", "goes inside /ref, a text: only objects have members to select"},
	} {
		err := w.Inputs.FieldPointer(c.pointer)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.err {
				t.Errorf("%s: %q, want %q", c.pointer, got, c.err)
			}
		} else if c.err != "" {
			t.Errorf("%s: taken, want %q", c.pointer, c.err)
		}
	}
}

func TestProjectThroughListItems(t *testing.T) {
	in := json.RawMessage(`{"ref":"R","contacts":[{"role":"ceo","phone":"+33 6","tags":[{"k":"a","v":"1"}]},{"phone":"+33 7"},{"role":"cfo","phone":"+33 8","tags":[]}],"address":{"zip":"75001","city":"Paris"}}`)
	for _, c := range []struct {
		pointers []string
		want     string
	}{
		{[]string{"/contacts/[]/role"}, `{"contacts":[{"role":"ceo"},{},{"role":"cfo"}]}`},
		{[]string{"/contacts/[]/role", "/contacts/[]/tags/[]/k", "/address/zip"}, `{"address":{"zip":"75001"},"contacts":[{"role":"ceo","tags":[{"k":"a"}]},{},{"role":"cfo","tags":[]}]}`},
		// The list whole, before or after a member of its items: whole.
		{[]string{"/contacts", "/contacts/[]/role"}, `{"contacts":[{"phone":"+33 6","role":"ceo","tags":[{"k":"a","v":"1"}]},{"phone":"+33 7"},{"phone":"+33 8","role":"cfo","tags":[]}]}`},
		{[]string{"/contacts/[]/role", "/contacts"}, `{"contacts":[{"phone":"+33 6","role":"ceo","tags":[{"k":"a","v":"1"}]},{"phone":"+33 7"},{"phone":"+33 8","role":"cfo","tags":[]}]}`},
		{[]string{"/missing/[]/x", "/ref"}, `{"ref":"R"}`},
		// A parent present, its member absent: the parent, empty.
		{[]string{"/address/street"}, `{"address":{}}`},
	} {
		if got := string(Project(in, c.pointers)); got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.pointers, got, c.want)
		}
	}
}
