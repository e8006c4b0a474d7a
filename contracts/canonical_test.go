package contracts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
)

func TestCanonicalRoundTrip(t *testing.T) {
	t.Parallel()
	docs := map[string]string{
		"rich":    richWorking,
		"minimal": `{"name":"x","inputs":{"fields":[]},"outputs":{"fields":[]}}`,
		"escapes": `{"name":"Quote \" back\\slash \u00e9 <tag> & \u2028 \u0001 \ud800","description":"line\nbreak\ttab",
		  "inputs":{"fields":[{"name":"p","type":"text","pattern":"^\\d+\\.\\d+$","description":"/path?"}]},"outputs":{"fields":[]}}`,
		"numbers": `{"name":"n","inputs":{"fields":[{"name":"a","type":"number","minimum":-1.50E+3,"maximum":0.0001e-2}]},"outputs":{"fields":[]}}`,
		"nested":  `{"name":"n","inputs":{"fields":[{"name":"l","type":"list","classification":"sensitive","min_items":0,"items":{"type":"list","items":{"type":"object","fields":[]}}}]},"outputs":{"fields":[]}}`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := mustParseWorking(t, doc)
			canon := w.Canonical()
			w2, vs := ParseWorking(canon)
			if vs != nil {
				t.Fatalf("canonical document does not parse: %v\n%s", vs, canon)
			}
			if !reflect.DeepEqual(w, w2) {
				t.Fatalf("round trip changed the model:\n got %+v\nwant %+v", w2, w)
			}
			if again := w2.Canonical(); !bytes.Equal(again, canon) {
				t.Fatalf("canonical bytes not stable:\n got %s\nwant %s", again, canon)
			}
			if !json.Valid(canon) {
				t.Fatalf("canonical document is not valid JSON: %s", canon)
			}
			// encoding/json re-escapes <, > and & in MarshalJSON output;
			// the document is otherwise the canonical one.
			marshalled, err := json.Marshal(w)
			if err != nil || !jsonEqual(t, marshalled, canon) {
				t.Fatalf("json.Marshal: got %s, %v; want the canonical document %s", marshalled, err, canon)
			}
			if w3, vs := ParseWorking(marshalled); vs != nil || !bytes.Equal(w3.Canonical(), canon) {
				t.Fatalf("json.Marshal output does not parse back to the same document: %v", vs)
			}
			c2, vs := ParseContract(w.Inputs.Canonical())
			if vs != nil || !reflect.DeepEqual(c2, w.Inputs) {
				t.Fatalf("contract round trip: got %+v %v, want %+v", c2, vs, w.Inputs)
			}
		})
	}
}

func TestCanonicalForm(t *testing.T) {
	t.Parallel()
	doc := `{
	  "routing_output": "d",
	  "outputs": {"fields": [{"values": ["b","a"], "required": true, "type": "choice", "name": "d"}]},
	  "inputs": {"fields": [
	    {"type": "object", "name": "o", "required": false, "classification": "sensitive", "description": "",
	     "fields": [{"name": "s", "type": "text", "max_length": 0, "classification": "normal"}]},
	    {"type": "integer", "name": "i", "maximum": 10.0}
	  ]},
	  "name": "Doc"
	}`
	want := `{"name":"Doc","inputs":{"fields":[` +
		`{"name":"o","type":"object","classification":"sensitive","fields":[{"name":"s","type":"text","classification":"sensitive","max_length":0}]},` +
		`{"name":"i","type":"integer","classification":"normal","maximum":10.0}]},` +
		`"outputs":{"fields":[{"name":"d","type":"choice","required":true,"classification":"normal","values":["b","a"]}]},` +
		`"routing_output":"d"}`
	if got := string(mustParseWorking(t, doc).Canonical()); got != want {
		t.Fatalf("Canonical:\n got %s\nwant %s", got, want)
	}
}

func TestDigest(t *testing.T) {
	t.Parallel()
	a := `{"name":"Doc","inputs":{"fields":[{"name":"a","type":"text","max_length":10}]},"outputs":{"fields":[]}}`
	// Same meaning: other key order, whitespace, explicit defaults, nulls.
	b := "{\n  \"outputs\": {\"fields\": []},\n  \"inputs\": {\"fields\": [\n    {\"max_length\": 10, \"classification\": \"normal\", \"required\": false, \"type\": \"text\", \"name\": \"a\", \"pattern\": null}\n  ]},\n  \"description\": \"\",\n  \"name\": \"Doc\"\n}"
	// Different meaning: one option changed.
	c := `{"name":"Doc","inputs":{"fields":[{"name":"a","type":"text","max_length":11}]},"outputs":{"fields":[]}}`

	da, db, dc := mustParseWorking(t, a).Digest(), mustParseWorking(t, b).Digest(), mustParseWorking(t, c).Digest()
	if da != db {
		t.Errorf("equal documents: got digests %s and %s, want identical", da, db)
	}
	if da == dc {
		t.Errorf("different documents: both digest to %s, want different", da)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(da) {
		t.Errorf("digest %q, want sha256:<64 hex>", da)
	}
	sum := sha256.Sum256(mustParseWorking(t, a).Canonical())
	if want := "sha256:" + hex.EncodeToString(sum[:]); da != want {
		t.Errorf("digest %s, want sha256 of the canonical bytes %s", da, want)
	}
	if again := mustParseWorking(t, a).Digest(); again != da {
		t.Errorf("digest not stable: %s then %s", da, again)
	}
	// Effective classification is part of the content.
	sensitive := `{"name":"Doc","inputs":{"fields":[{"name":"a","type":"text","max_length":10,"classification":"sensitive"}]},"outputs":{"fields":[]}}`
	if mustParseWorking(t, sensitive).Digest() == da {
		t.Errorf("classification change did not change the digest")
	}
}

func TestCanonicalOfHandBuiltModel(t *testing.T) {
	t.Parallel()
	one := int64(1)
	w := Working{
		Name: "Hand",
		Inputs: Contract{Fields: []Field{
			{Name: "o", Type: TypeObject, Classification: ClassSecret, Fields: []Field{{Name: "x", Type: TypeText}}},
			// Options foreign to the type are not written.
			{Name: "n", Type: TypeInteger, MaxLength: &one},
		}},
	}
	want := `{"name":"Hand","inputs":{"fields":[{"name":"o","type":"object","classification":"secret","fields":[{"name":"x","type":"text","classification":"secret"}]},{"name":"n","type":"integer","classification":"normal"}]},"outputs":{"fields":[]}}`
	if got := string(w.Canonical()); got != want {
		t.Fatalf("Canonical:\n got %s\nwant %s", got, want)
	}
	if _, vs := ParseWorking(w.Canonical()); vs != nil {
		t.Fatalf("canonical form of a hand-built model does not parse: %v", vs)
	}
}
