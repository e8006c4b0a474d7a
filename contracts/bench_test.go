package contracts

import (
	"testing"
)

// BenchmarkValidate20Fields validates a realistic 20-field payload with
// nested objects and lists through a cached validator, as the API does on
// every task submission.
func BenchmarkValidate20Fields(b *testing.B) {
	w := mustParseWorking(b, richWorking)
	cache := NewCache()
	payload := []byte(richPayload)
	if _, err := cache.Validator(w.Digest(), "inputs", w.Inputs); err != nil {
		b.Fatal(err)
	}
	digest := w.Digest()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := cache.Validator(digest, "inputs", w.Inputs)
		if err != nil {
			b.Fatal(err)
		}
		if vs := v.Validate(payload); vs != nil {
			b.Fatalf("Validate: got %v, want no violations", vs)
		}
	}
}

// BenchmarkParseWorking parses the rich definition document.
func BenchmarkParseWorking(b *testing.B) {
	doc := []byte(richWorking)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, vs := ParseWorking(doc); vs != nil {
			b.Fatal(vs)
		}
	}
}

// BenchmarkValidate20FieldsLibrary is the same payload through the schema
// library alone: the path every rejected value takes, kept to show what the
// fast path saves.
func BenchmarkValidate20FieldsLibrary(b *testing.B) {
	w := mustParseWorking(b, richWorking)
	v := mustCompile(b, w.Inputs)
	payload := []byte(richPayload)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if vs := v.validateSlow(payload); vs != nil {
			b.Fatalf("validateSlow: got %v, want no violations", vs)
		}
	}
}
