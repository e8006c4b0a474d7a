package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/queries"
)

var probePlain = []byte("relais data key probe")

const probeAAD = "data_keys/probe"

// RecordedDataKeys lists the data keys the database recorded and no
// rotation retired: values sealed with them may be stored, and only they
// open them.
func RecordedDataKeys(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, err := queries.New(pool).DataKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	var ids []string
	for _, r := range rows {
		if r.RetiredAt == nil {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// CheckKeys verifies the keyring against the database before a replica
// serves: every key it holds must open its recorded probe (a wrong key is
// caught now, not when a consumer asks for inputs), the primary key is
// recorded, and no key that sealed values still in the database may be
// missing. Without a keyring, it refuses once secret values exist.
func CheckKeys(ctx context.Context, pool *pgxpool.Pool, ring *keyring.Keyring) error {
	q := queries.New(pool)
	rows, err := q.DataKeyList(ctx)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if ring == nil {
		exists, err := q.SealedValuesExist(ctx)
		if err != nil {
			return fmt.Errorf("data keys: %w", err)
		}
		if exists {
			return errors.New("sensitive or secret values are stored encrypted but no data key is configured: set RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE")
		}
		return nil
	}
	ids := ring.IDs()
	var missing []string
	known := map[string]bool{}
	for _, r := range rows {
		known[r.ID] = true
		if !slices.Contains(ids, r.ID) {
			if r.RetiredAt == nil {
				missing = append(missing, r.ID)
			}
			continue
		}
		if r.ID == ring.Primary() && r.RetiredAt != nil {
			return fmt.Errorf("data key %q was retired by a key rotation: the key that rotation sealed with must come first among the data keys (add it if it is missing)", r.ID)
		}
		if _, err := ring.Open(r.Probe, []byte(probeAAD)); err != nil {
			return fmt.Errorf("data key %q does not match the key that was used under that id: %w", r.ID, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("values sealed with data key(s) %s may still be stored: keep them among the data keys (after the primary) until `relais keys rotate` has finished",
			strings.Join(missing, ", "))
	}
	if !known[ring.Primary()] {
		if err := q.DataKeyInsert(ctx, queries.DataKeyInsertParams{ID: ring.Primary(), Probe: ring.Seal(probePlain, []byte(probeAAD))}); err != nil {
			return fmt.Errorf("data keys: record %q: %w", ring.Primary(), err)
		}
	}
	return nil
}
