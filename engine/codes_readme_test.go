package engine

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeListsEveryFailureCode: the README's list of the error codes
// Relais fails occurrences with is FailureCodes and a destination's
// status, no more and no fewer.
func TestReadmeListsEveryFailureCode(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	_, list, ok := strings.Cut(text, "or one Relais made (")
	if !ok {
		t.Fatal(`the README has no "or one Relais made (…)" list of error codes`)
	}
	list, _, _ = strings.Cut(list, ")")
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(list, -1) {
		listed = append(listed, m[1])
	}
	want := append([]string{CodeDestinationHTTP + "503"}, FailureCodes...)
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("the README lists %v; the engine makes %v", listed, want)
	}
}
