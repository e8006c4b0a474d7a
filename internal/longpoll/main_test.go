package longpoll

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine the package started outlives
// its tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
