// Command gen writes api/openapi/openapi.json, the document as indented
// JSON, from openapi.yaml: the file tools read from the repository. The
// YAML is written with YAML 1.1 merge keys (<<:) for its shared
// operations, which YAML 1.2 parsers (some client generators') read as a
// key named "<<"; the JSON has them expanded, as the server serves it.
//
// Run it with go generate ./api/openapi after changing the YAML; a test
// fails while the two differ.
package main

import (
	"fmt"
	"os"

	"github.com/relais/relais/api/openapi"
)

func main() {
	if err := os.WriteFile("openapi.json", openapi.Indented(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "openapi gen:", err)
		os.Exit(1)
	}
}
