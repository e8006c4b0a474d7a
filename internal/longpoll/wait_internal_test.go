package longpoll

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
)

// fakeClaimer claims one occurrence, as the client's context ends while
// the claim runs (a worker shutting down cancels its waiting fetch), and
// records what is handed back.
type fakeClaimer struct {
	leave    context.CancelFunc
	got      []engine.Reservation
	released []engine.Reservation
}

func (f *fakeClaimer) Claim(context.Context, engine.ClaimRequest) ([]engine.Reservation, error) {
	if f.leave != nil {
		f.leave()
	}
	return f.got, nil
}

func (f *fakeClaimer) ReleaseUnseen(_ context.Context, _ int64, _ string, unseen []engine.Reservation) (int, error) {
	f.released = append(f.released, unseen...)
	return len(unseen), nil
}

// What a fetch claimed for a client that left meanwhile is released at
// once (the attempt given back), not left locked to nobody; a client still
// there gets it.
func TestAClaimForADepartedClientIsReleased(t *testing.T) {
	id := uuid.New()
	got := []engine.Reservation{{ID: id, Attempt: 1}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := &fakeClaimer{leave: cancel, got: got}
	if out, err := claimFor(ctx, left, engine.ClaimRequest{ConsumerID: 1, WorkerID: "w"}); err != nil || len(out) != 0 {
		t.Fatalf("claim for a departed client answered %v, %v; want nothing", out, err)
	}
	if len(left.released) != 1 || left.released[0].ID != id || left.released[0].Attempt != 1 {
		t.Errorf("released %v, want the claimed occurrence's attempt 1", left.released)
	}

	there := &fakeClaimer{got: got}
	if out, err := claimFor(context.Background(), there, engine.ClaimRequest{ConsumerID: 1, WorkerID: "w"}); err != nil || len(out) != 1 || len(there.released) != 0 {
		t.Errorf("claim for a client still there: %v, %v, released %v", out, err, there.released)
	}
}
