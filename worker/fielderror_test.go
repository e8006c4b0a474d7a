package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A contract's refusal reads in a log as pointers and messages, not as
// Go's struct syntax (a newcomer's log showed {Path:… Message:…}).
func TestFieldErrorsInALog(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Error("outputs violate the contract", "errors",
		[]FieldError{{Path: "/outputs/result", Message: `must be one of "created", "existing"`}})
	if got := buf.String(); !strings.Contains(got, `/outputs/result: must be one of`) || strings.Contains(got, "Path:") {
		t.Errorf("log line %q, want the pointer and its message", got)
	}
}
