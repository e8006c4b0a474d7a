package console

import (
	"context"
	"encoding/json"
	"strings"
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
	// A long value is cut: what is shown of it too.
	long, _ := json.Marshal("\u202e" + strings.Repeat("x", maxValueChars+10))
	if got := scalar(ctx, long); !strings.HasPrefix(got, "⟨U+202E⟩xxx") {
		t.Errorf("a long value shows %.20q", got)
	}
	if got := errorMessage(ctx, "file \u202efdp.exe refused"); got != "file ⟨U+202E⟩fdp.exe refused" {
		t.Errorf("errorMessage = %q", got)
	}
}
