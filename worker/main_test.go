package worker

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when goroutines outlive the tests: Run promises
// that none of its goroutines survive it. go.uber.org/goleak would do
// this, but the module does not require it (it is only in go.sum, through
// a dependency's tests), and this package may not add dependencies.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "%d goroutines leaked:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of goroutines other than the
// caller's, waiting up to within for them to end: some (a closed
// server's connections) take a moment.
func leakedGoroutines(within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		// The caller's goroutine comes first.
		stacks := strings.Split(strings.TrimSpace(string(buf)), "\n\n")[1:]
		var leaked []string
		for _, s := range stacks {
			if !strings.Contains(s, "os/signal.signal_recv") && !strings.Contains(s, "runtime.ensureSigM") {
				leaked = append(leaked, s)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(10 * time.Millisecond)
	}
}
