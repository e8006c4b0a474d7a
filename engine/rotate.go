package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/queries"
)

// rotateBatch is how many rows one rotation transaction re-encrypts: small
// enough to keep locks short on a live system, large enough to move fast.
const rotateBatch = 500

// rotateRetryPause is the first pause between passes that wait for rows
// locked by running work (settlements hold them for milliseconds); it
// doubles up to rotateMaxPause while nothing moves, since each pass scans
// the sealed tables. rotateStallLimit is how long passes may leave as many
// values under older keys before the rotation gives up.
const (
	rotateRetryPause = 100 * time.Millisecond
	rotateMaxPause   = 5 * time.Second
	rotateStallLimit = time.Minute
)

// RotationProgress reports a batch re-encrypted by RotateKeys.
type RotationProgress struct {
	Table string
	Rows  int
	Total int
}

// RotateKeys re-encrypts every sealed value that is not sealed with the
// primary key, in batches of one transaction each, so it can be
// interrupted and run again (it resumes where it stopped: rows already
// under the primary key are not selected). Once nothing is left under an
// older key, that key is marked retired and may be removed from the
// configuration; retired names the keys this run retired (none when
// every key but the primary was retired before). Replicas must already
// run with the new key first in their keyring, or they would keep sealing
// with the old one.
func (e *Engine) RotateKeys(ctx context.Context, progress func(RotationProgress)) (retired []string, err error) {
	if e.keys == nil {
		return nil, fmt.Errorf("engine: rotate: no data key configured")
	}
	primary := e.keys.Primary()
	totals := map[string]int{}
	// Batches skip rows that running work holds locked, so one pass may
	// leave some behind: passes repeat until a count that waits for no lock
	// finds nothing under another key. Only then may a key be retired, or
	// removing it would make those values unreadable.
	stalled, fewest, pause := time.Now(), int64(-1), rotateRetryPause
	for {
		if err := e.rotatePass(ctx, totals, progress); err != nil {
			return nil, err
		}
		left, err := e.q.SealedUnderOtherKeys(ctx, primary)
		if err != nil {
			return nil, fmt.Errorf("engine: rotate: %w", err)
		}
		if left == 0 {
			break
		}
		// Progress is fewer values left, not rows moved: a replica still
		// sealing with an old key keeps adding rows to move.
		if fewest < 0 || left < fewest {
			stalled, fewest, pause = time.Now(), left, rotateRetryPause
		} else if time.Since(stalled) > rotateStallLimit {
			return nil, fmt.Errorf("engine: rotate: %d values are still under older keys after %s without progress: rows held locked by running work, or a replica still sealing with an older key (every replica must run with %q first); no key was retired: run the rotation again", left, rotateStallLimit, primary)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("engine: rotate: %w (%d values still under older keys; no key was retired)", ctx.Err(), left)
		case <-time.After(pause):
		}
		pause = min(2*pause, rotateMaxPause)
	}
	return e.retireOlderKeys(ctx, primary)
}

// rotatePass re-encrypts, table by table and a batch per transaction,
// what it can take of the values under older keys; totals counts the rows
// moved per table across passes.
func (e *Engine) rotatePass(ctx context.Context, totals map[string]int, progress func(RotationProgress)) error {
	steps := []struct {
		table string
		batch func(context.Context, *queries.Queries) (int, error)
	}{
		{"instances", e.resealInstances},
		{"occurrences", e.resealOccurrences},
		{"destinations", e.resealDestinations},
	}
	for _, s := range steps {
		for {
			var n int
			err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
				var err error
				n, err = s.batch(ctx, q)
				return err
			})
			if err != nil {
				return fmt.Errorf("engine: rotate %s: %w", s.table, err)
			}
			totals[s.table] += n
			if n > 0 && progress != nil {
				progress(RotationProgress{Table: s.table, Rows: n, Total: totals[s.table]})
			}
			// A partial batch drained what this pass could take; rows
			// sealed since then wait for the next pass and its count, so
			// a replica sealing with an old key cannot keep one pass
			// going.
			if n < rotateBatch {
				break
			}
		}
	}
	return nil
}

// resealInstances re-encrypts a batch of instances' inputs.
func (e *Engine) resealInstances(ctx context.Context, q *queries.Queries) (int, error) {
	rows, err := q.InstanceSealedBatch(ctx, queries.InstanceSealedBatchParams{PrimaryKey: e.keys.Primary(), Max: rotateBatch})
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		b, err := reseal(e.keys, r.SealedInputs, aadInstanceInputs(r.ID))
		if err != nil {
			return 0, err
		}
		if err := q.InstanceReseal(ctx, queries.InstanceResealParams{ID: r.ID, SealedInputs: b}); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// resealOccurrences re-encrypts a batch of occurrences' inputs and outputs.
func (e *Engine) resealOccurrences(ctx context.Context, q *queries.Queries) (int, error) {
	rows, err := q.OccurrenceSealedBatch(ctx, queries.OccurrenceSealedBatchParams{PrimaryKey: e.keys.Primary(), Max: rotateBatch})
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		in, err := reseal(e.keys, r.SealedInputs, aadOccurrenceInputs(r.ID))
		if err != nil {
			return 0, err
		}
		out, err := reseal(e.keys, r.SealedOutputs, aadOccurrenceOutputs(r.ID))
		if err != nil {
			return 0, err
		}
		if err := q.OccurrenceReseal(ctx, queries.OccurrenceResealParams{ID: r.ID, SealedInputs: in, SealedOutputs: out}); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// resealDestinations re-encrypts a batch of destinations' headers, query
// parameters and signing secrets.
func (e *Engine) resealDestinations(ctx context.Context, q *queries.Queries) (int, error) {
	rows, err := q.DestinationSealedBatch(ctx, queries.DestinationSealedBatchParams{PrimaryKey: e.keys.Primary(), Max: rotateBatch})
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		headers, err := reseal(e.keys, r.SealedHeaders, aadDestinationHeaders(r.Name))
		if err != nil {
			return 0, err
		}
		query, err := reseal(e.keys, r.SealedUrlQuery, aadDestinationQuery(r.Name))
		if err != nil {
			return 0, err
		}
		secret, err := reseal(e.keys, r.SealedSigningSecret, aadDestinationSigning(r.Name))
		if err != nil {
			return 0, err
		}
		if err := q.DestinationReseal(ctx, queries.DestinationResealParams{Name: r.Name, SealedHeaders: headers, SealedUrlQuery: query,
			SealedSigningSecret: secret}); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// retireOlderKeys marks retired every key but primary, once no value is
// sealed under one, tells every replica, and returns the keys it retired.
func (e *Engine) retireOlderKeys(ctx context.Context, primary string) ([]string, error) {
	rows, err := e.q.DataKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: rotate: %w", err)
	}
	var retired []string
	for _, r := range rows {
		if r.ID != primary && r.RetiredAt == nil {
			if err := e.q.DataKeyRetire(ctx, r.ID); err != nil {
				return retired, fmt.Errorf("engine: rotate: retire %s: %w", r.ID, err)
			}
			retired = append(retired, r.ID)
		}
	}
	// A replica still running with a retired key first must stop sealing
	// with it (see sealable).
	if err := e.q.Notify(ctx, queries.NotifyParams{Channel: ChannelInvalidate, Payload: "keys"}); err != nil {
		return retired, fmt.Errorf("engine: rotate: announce the retired keys: %w", err)
	}
	return retired, nil
}

// reseal opens a value under whatever key sealed it and seals it under the
// primary key; values already under the primary key, and nil, are kept.
func reseal(k *keyring.Keyring, sealed []byte, aad string) ([]byte, error) {
	if len(sealed) == 0 {
		return sealed, nil
	}
	if id, err := keyring.KeyID(sealed); err == nil && id == k.Primary() {
		return sealed, nil
	}
	plain, err := k.Open(sealed, []byte(aad))
	if err != nil {
		return nil, err
	}
	return k.Seal(plain, []byte(aad)), nil
}
