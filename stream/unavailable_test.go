package stream

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/relais/relais/internal/fault"
)

// An outage refuses the worker protocol's calls as it does REST's: the
// throttled "dependency unavailable" line counts them too, naming the
// procedure, where before only REST refusals wrote it and an outage seen
// by stream workers alone left the log silent but for access lines.
func TestUnavailableCallIsLogged(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	fe := fault.New(fault.Unavailable, "unavailable", "the database is unavailable")
	fe.Cause = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	procedure := "/relais.worker.v1.WorkerService/Complete"
	if err := toConnect(context.Background(), logger, procedure, fe); err == nil {
		t.Fatal("toConnect answered nil")
	}
	if out := logs.String(); !strings.Contains(out, "dependency unavailable") || !strings.Contains(out, "procedure="+procedure) {
		t.Errorf("log after an unavailable call:\n%s\nwant a dependency unavailable line naming the procedure", out)
	}
}
