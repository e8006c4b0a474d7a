package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsTheExamplesAsTheyAre: the documents the README shows in
// full are the example files, byte for byte, which the walkthrough's test
// applies: the reference a reader copies from cannot drift from what works.
func TestReadmeShowsTheExamplesAsTheyAre(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"examples/definitions/add_company_to_crm.yaml", "examples/definitions/releases.yaml", "examples/processes/checkout.yaml"} {
		doc, err := os.ReadFile("../../" + path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "```yaml\n"+string(doc)+"```\n") {
			t.Errorf("the README does not show %s as it is", path)
		}
	}
}
