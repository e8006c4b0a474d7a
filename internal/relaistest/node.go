package relaistest

import (
	"os"
	"os/exec"
	"testing"
)

// RequireNode skips a test that needs Node.js and npm when the machine
// lacks them, saying what it would have run, except under CI=true, where
// it fails: CI must run every such test.
func RequireNode(t testing.TB, what string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; CI=true runs %s, which needs Node.js 20 and npm", tool, what)
			}
			t.Skipf("%s is not installed: skipping %s (install Node.js 20 and npm to run it)", tool, what)
		}
	}
}
