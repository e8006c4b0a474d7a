package longpoll

import (
	"context"
	"fmt"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/pgfault"
)

// dueSlack is added to a due time before re-checking: due times come from
// the database clock (a replica's own may run behind) and are announced to
// the millisecond, so a claim made exactly at the announced time may find
// the occurrence still a fraction of a millisecond ahead, and then nothing
// is due "later" either: the waiter would sleep until its fallback poll.
const dueSlack = 5 * time.Millisecond

// fallbackPoll bounds how long a waiter trusts notifications alone: they
// are hints, so a waiter re-checks the database at least this often.
const fallbackPoll = 5 * time.Second

// stoppingFault refuses a fetch on a stopping replica.
func stoppingFault() *fault.Error {
	fe := fault.New(fault.Unavailable, CodeReplicaStopping, "this replica is shutting down; fetch again (another replica will serve you)")
	fe.RetryAfter = time.Second
	return fe
}

// CodeReplicaStopping is the code of the refusal of a fetch that arrives
// while the replica shuts down.
const CodeReplicaStopping = "replica_stopping"

// CodeTooManyWaiters is the code of the refusal of a fetch that would wait
// while the hub is full.
const CodeTooManyWaiters = "too_many_waiters"

// ClaimOrWait claims at once, or waits up to wait for a matching occurrence
// to become claimable: woken by notifications (any replica), by the time
// the earliest deferred occurrence becomes due, and by a bounded fallback
// poll. A client that disconnects stops the wait. A fetch that would wait
// while the hub is full is refused (429 too_many_waiters, Retry-After). A
// fetch arriving once the hub is closed (the replica stopping) is refused
// with 503 replica_stopping and claims nothing: the worker could not
// report what it was handed once the replica is gone, and the work would
// wait for its lock to lapse.
//
// still, when set, checks before every claim after a wait that the
// caller's credentials still hold: a token revoked or rotated while its
// fetch waits must not be handed work it could never settle (its answer
// is still's error).
func (h *Hub) ClaimOrWait(ctx context.Context, eng *engine.Engine, claim engine.ClaimRequest, wait time.Duration, still func(context.Context) error) ([]engine.Reservation, error) {
	if h.Stopping() {
		return nil, stoppingFault()
	}
	if wait <= 0 {
		return claimFor(ctx, eng, claim)
	}
	deadline := time.Now().Add(wait)
	// Register before the first claim: an occurrence committed between a
	// claim that found nothing and the registration would otherwise be
	// missed until the fallback poll.
	wt, ok := h.register(claim.Pairs)
	if !ok && h.Stopping() {
		// Closed since the check above.
		return nil, stoppingFault()
	}
	if !ok {
		// Only a fetch that would wait is refused: work that is available
		// now is delivered whatever the number of waiters.
		if got, err := claimFor(ctx, eng, claim); err != nil || len(got) > 0 {
			return got, err
		}
		fe := fault.New(fault.TooManyRequests, CodeTooManyWaiters, "this replica holds its maximum of %d long-polling fetches (RELAIS_PULL_MAX_WAITERS); retry shortly", h.max)
		fe.RetryAfter = time.Second
		return nil, fe
	}
	defer h.unregister(wt)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for waited := false; ; waited = true {
		if waited && still != nil {
			if err := still(ctx); err != nil {
				return nil, err
			}
		}
		mark := eng.ClaimMark()
		got, err := claimFor(ctx, eng, claim)
		if err != nil || len(got) > 0 {
			return got, err
		}
		now := time.Now()
		if !now.Before(deadline) {
			return nil, nil
		}
		next := now.Add(fallbackPoll)
		if deadline.Before(next) {
			next = deadline
		}
		if due, ok, err := eng.NextClaimable(ctx, claim.Pairs, mark); err != nil {
			return nil, err
		} else if ok && due.Before(next) {
			next = due.Add(dueSlack)
		}
		timer.Reset(max(time.Until(next), time.Millisecond))
		select {
		case <-ctx.Done():
			// The client left: nothing was claimed for it, and its going is
			// not a server error, but not an empty answer either (499,
			// counted abandoned: a proxy cutting long polls shows). Or the
			// replica cut the wait short as PostgreSQL stopped answering:
			// 503, so that the worker backs off instead of fetching again
			// at once.
			return nil, cutShort(ctx)
		case <-h.closing:
			return nil, nil
		case <-timer.C:
		case at := <-wt.C():
			// Only a time still ahead is slept until (with the slack): an
			// occurrence announced as available now is claimed at once.
			if d := time.Until(at.Add(dueSlack)); !at.IsZero() && time.Until(at) > 0 {
				// Announced for later (a retry delay): sleep until then
				// unless something sooner wakes us, the occurrence due
				// first (next) included.
				if !timer.Stop() {
					<-timer.C
				}
				timer.Reset(max(min(d, time.Until(next)), time.Millisecond))
				select {
				case <-ctx.Done():
					return nil, cutShort(ctx)
				case <-h.closing:
					return nil, nil
				case <-timer.C:
				case <-wt.C():
				}
			} else if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

// claimFor claims for a fetch. A client that left while its claim ran
// (a worker shutting down cancels the fetch it had waiting) would never
// receive what was claimed: it is released at once, the attempt given
// back, instead of staying locked to a worker that is gone until the lock
// lapses and counting as a spent attempt.
func claimFor(ctx context.Context, eng claimer, claim engine.ClaimRequest) ([]engine.Reservation, error) {
	got, err := eng.Claim(ctx, claim)
	if err != nil || len(got) == 0 || ctx.Err() == nil {
		return got, err
	}
	if _, err := eng.ReleaseUnseen(ctx, claim.ConsumerID, claim.WorkerID, got); err != nil {
		return nil, fmt.Errorf("release what a departed client's fetch claimed: %w", err)
	}
	return nil, nil
}

// claimer is what claimFor needs of the engine.
type claimer interface {
	Claim(ctx context.Context, req engine.ClaimRequest) ([]engine.Reservation, error)
	ReleaseUnseen(ctx context.Context, consumerID int64, workerID string, unseen []engine.Reservation) (int, error)
}

// cutShort is why a wait ended with ctx: the database stopped answering
// (503), or the client left (ctx's own error).
func cutShort(ctx context.Context) error {
	if err := pgfault.CutShort(ctx); err != nil {
		return err
	}
	return ctx.Err()
}
