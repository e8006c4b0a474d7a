package process

import (
	"bytes"
	"testing"
)

// FuzzParse: whatever the bytes, Parse and Check never panic, and a
// document Parse accepts survives a canonical round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		validDoc,
		assignDoc,
		reorderedDoc,
		`{"inputs": {"fields": []}, "start": "a", "nodes": {"a": {"kind": "end"}}}`,
		`{"inputs": {"fields": []}, "start": "a", "nodes": {
		  "a": {"kind": "pull", "definition": "noop", "revision": 1, "next": "b", "on_error": "a"},
		  "b": {"kind": "push", "definition": "noop", "revision": 1, "destination": "slow-api", "timeout": "PT9S", "next": "a"}}}`,
		`{"inputs": {"fields": [{"name": "x", "type": "list", "items": {"type": "object", "fields": [{"name": "y", "type": "text"}]}}]},
		  "start": "n", "nodes": {"n": {"kind": "pull", "definition": "notify", "revision": 1,
		  "inputs": {"reference": {"from": "input.x.y"}, "tier": {"value": ["gold"]}, "note": {"from": "nodes.n.output.delivered"}},
		  "routes": {}, "next": "z"}}}`,
		`{"inputs": {"fields": []}, "start": "a", "nodes": {"a": {"kind": "pull", "policy": {"max_attempts": 1e3, "deadline": "P1W"}}}}`,
		`{"nodes": {"a~b/c": {"kind": "end", "status": null}}, "start": null, "inputs": null}`,
		`{"inputs": {"fields": []}, "start": "a", "nodes": {
		  "a": {"kind": "pull", "definition": "noop", "revision": 1, "next": "b", "on_error": {"E1": "b", "*": "hold", "x/y": "c", "": 1}},
		  "b": {"kind": "pull", "definition": "notify", "revision": 1, "inputs": {"reference": {"from": "nodes.a.error.code"}, "label": {"from": "nodes.a.error.message"}},
		        "next": "c", "on_error": {"*": "c"}},
		  "hold": {"kind": "end"}, "c": {"kind": "end"}}}`,
		`[1, {"a": "b"}, null]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, vs := Parse(data)
		if p == nil {
			if len(vs) == 0 {
				t.Fatalf("Parse: got neither a process nor violations")
			}
			return
		}
		if vs != nil {
			t.Fatalf("Parse: got a process and violations %v", vs)
		}
		_ = Check(p, resolver, testLimits)
		c1 := p.Canonical()
		p2, vs := Parse(c1)
		if vs != nil {
			t.Fatalf("Parse(Canonical()): got violations %v for %s", vs, c1)
		}
		if c2 := p2.Canonical(); !bytes.Equal(c1, c2) {
			t.Fatalf("canonical round trip:\n got %s\nwant %s", c2, c1)
		}
		for name := range p.Nodes {
			_, _ = p.EvaluateInputs(name, Scope{InstanceID: "id", Input: data})
			_, _ = p.NextOnSuccess(name, "")
			_, _ = p.NextOnFailure(name, "")
			_, _ = p.NextOnFailure(name, "PAYMENT_DECLINED")
			_, _ = p.EndStatus(name)
		}
	})
}
