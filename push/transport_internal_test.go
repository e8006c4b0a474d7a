package push

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/config"
)

// The transport's own timeouts are backstops past the longest budget: a
// call's deadline ends it first, so a call given the longest budget is
// deadline_exceeded, never an outcome_unknown raced by the transport's
// wait for headers (verifier QA: 3 of 8 such calls were).
func TestTheTransportWaitsPastTheLongestBudget(t *testing.T) {
	t.Parallel()
	r := NewRunner(nil, slog.New(slog.DiscardHandler), config.Default().Push, nil)
	tr := r.client.Transport.(*http.Transport)
	if tr.ResponseHeaderTimeout <= process.HardMaxPushTimeout || tr.TLSHandshakeTimeout <= process.HardMaxPushTimeout {
		t.Errorf("ResponseHeaderTimeout %v, TLSHandshakeTimeout %v: want both past the longest budget, %v",
			tr.ResponseHeaderTimeout, tr.TLSHandshakeTimeout, process.HardMaxPushTimeout)
	}
}
