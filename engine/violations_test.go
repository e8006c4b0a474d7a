package engine

import (
	"testing"

	"github.com/relais/relais/contracts"
)

// Violations are described pointer first, sorted; one about the document
// itself has no pointer to show, and no dangling ": " either.
func TestDescribeViolations(t *testing.T) {
	got := describeViolations([]contracts.Violation{
		{Path: "/score", Message: "must be at most 100"},
		{Path: "", Message: "must be an object, not array"},
	})
	if want := `/score: must be at most 100; must be an object, not array`; got != want {
		t.Errorf("describeViolations = %q, want %q", got, want)
	}
}
