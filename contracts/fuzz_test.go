package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/relais/relais/internal/jsontree"
)

func FuzzParseWorking(f *testing.F) {
	f.Add([]byte(richWorking))
	f.Add([]byte(`{"name":"x","inputs":{"fields":[]},"outputs":{"fields":[]}}`))
	f.Add([]byte(withInput(`{"name":"a","type":"list","items":{"type":"object","fields":[{"name":"b","type":"choice","values":["x","y"]}]},"max_items":3}`)))
	f.Add([]byte(withInput(`{"name":"a","type":"number","minimum":-1.5e3,"maximum":1E+3,"classification":"secret"}`)))
	f.Add([]byte(withInput(`{"name":"a","type":"text","pattern":"^[a-z]+\\d*$","format":"email","min_length":0}`)))
	f.Add([]byte(withOutputs(`{"name":"d","type":"choice","required":true,"values":["a","b"]}`, `"d"`)))
	f.Add([]byte(withInput(nested(MaxDepth))))
	f.Add([]byte(`{"name":"x","inputs":{"fields":[{"name":"A","type":"integer","max_length":-1}]},"outputs":[]}`))
	f.Add([]byte(`{"name":"\ud800\u2028<>","inputs":{"fields":[]},"outputs":{"fields":[]},"routing_output":""}`))
	f.Add([]byte(`{"name":"a\u0000","inputs":{"fields":[]},"outputs":{"fields":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The tree reader must accept exactly what encoding/json accepts,
		// but the NUL character.
		if _, err := jsontree.Read(data, maxJSONDepth); (err == nil) != json.Valid(data) && !errors.Is(err, jsontree.ErrTooDeep) && !errors.Is(err, jsontree.ErrNUL) {
			t.Fatalf("jsontree.Read error %v but json.Valid = %v", err, json.Valid(data))
		}
		w, vs := ParseWorking(data)
		if vs != nil {
			if !reflect.DeepEqual(w, Working{}) {
				t.Fatalf("violations %v came with a non-zero Working", vs)
			}
			for _, v := range vs {
				if v.Message == "" {
					t.Fatalf("violation at %q without message", v.Path)
				}
			}
			return
		}
		canon := w.Canonical()
		w2, vs := ParseWorking(canon)
		if vs != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", vs, canon)
		}
		if !reflect.DeepEqual(w, w2) {
			t.Fatalf("canonical round trip changed the model:\n%+v\n%+v", w, w2)
		}
		if again := w2.Canonical(); !bytes.Equal(canon, again) {
			t.Fatalf("canonical bytes unstable:\n%s\n%s", canon, again)
		}
		for _, c := range []Contract{w.Inputs, w.Outputs} {
			if s := c.JSONSchema(); !json.Valid(s) {
				t.Fatalf("JSONSchema is not valid JSON: %s", s)
			}
			v, err := Compile(c)
			if err != nil {
				t.Fatalf("Compile of a parsed contract failed: %v\n%s", err, c.JSONSchema())
			}
			v.Validate([]byte(`{}`))
			if c2, vs := ParseContract(c.Canonical()); vs != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("contract round trip: %v", vs)
			}
		}
		if d := Diff(w, w2); d != nil {
			t.Fatalf("Diff of a document with itself: %+v", d)
		}
		w.Routes()
	})
}

func FuzzValidate(f *testing.F) {
	w := mustParseWorking(f, richWorking)
	v := mustCompile(f, w.Inputs)
	c := w.Inputs
	f.Add([]byte(richPayload))
	f.Add([]byte(`{"company_name":"A","contact_email":"a@b.co","tier":"gold"}`))
	f.Add([]byte(`{"company_name":"A\u00e9\n","contact_email":"a@b.co","tier":"gold","scores":[1e2,0.5,-0]}`))
	f.Add([]byte(`{"company_name":5,"x":{"y":[1,2]},"tags":[null],"card":{"token":{"a":"b"}}}`))
	f.Add([]byte(`{"employees":1e99999999,"annual_revenue":-1e-99999999}`))
	f.Add([]byte(`{"contacts":[{"name":"n","phone":"+1"},{"name":"m","email":"x"}],"address":{"street":"s","city":"c"}}`))
	f.Add([]byte(`{"company_name":"A","company_name":"B"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"a":`))
	f.Fuzz(func(t *testing.T, data []byte) {
		vs := v.Validate(data)
		if v.fast.accepts(data) {
			if slow := v.validateSlow(data); slow != nil {
				t.Fatalf("fast path accepted what the library rejects: %v", slow)
			}
		}
		for i, x := range vs {
			if i > 0 && vs[i-1] == x {
				t.Fatalf("duplicate violation %v", x)
			}
		}

		masked := c.Mask(data)
		if !json.Valid(masked) {
			t.Fatalf("Mask produced invalid JSON: %s", masked)
		}
		c.ProtectedStrings(data)
		public, secrets := c.Split(data)
		if !json.Valid(public) {
			t.Fatalf("Split produced invalid JSON: %s", public)
		}
		merged, err := Merge(public, secrets)
		if err != nil {
			t.Fatalf("Merge(Split(v)): %v", err)
		}
		if doc, err := decodeValue(data); err == nil {
			if _, ok := doc.(map[string]any); ok && !jsonEqual(t, merged, data) {
				t.Fatalf("Merge(Split(v)) = %s, want %s", merged, data)
			}
		}
		// No secret stays behind in the public part.
		pub, err := decodeValue(public)
		if err != nil {
			t.Fatalf("public part does not decode: %v", err)
		}
		for p := range secrets {
			if _, found := resolve(pub, p); found {
				t.Fatalf("secret %s is still in the public part %s", p, public)
			}
		}
	})
}
