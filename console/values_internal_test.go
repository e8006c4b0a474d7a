package console

import (
	"context"
	"encoding/json"
	"testing"
)

// A value or a service's message holding a character that reorders text
// reads as stored: "invoice \u202efdp.exe" showed as "invoice exe.pdf".
// Right-to-left text and its marks are left alone.
func TestValuesShowTheCharactersThatReorderText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for raw, want := range map[string]string{
		`"invoice \u202efdp.exe"`: "invoice ⟨U+202E⟩fdp.exe",
		`"\u202e1.00 EUR"`:        "⟨U+202E⟩1.00 EUR",
		`"a \u2067b\u2069 c"`:     "a ⟨U+2067⟩b⟨U+2069⟩ c",
		`"שלום \u200f123"`:        "שלום \u200f123",
		`"مرحبا"`:                 "مرحبا",
	} {
		if got := scalar(ctx, json.RawMessage(raw)); got != want {
			t.Errorf("scalar(%s) = %q, want %q", raw, got, want)
		}
	}
	if got := errorMessage(ctx, "file \u202efdp.exe refused"); got != "file ⟨U+202E⟩fdp.exe refused" {
		t.Errorf("errorMessage = %q", got)
	}
}
