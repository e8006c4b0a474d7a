package engine

import (
	"context"
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

// MissingKeysError is CheckKeys's refusal of a keyring that lacks keys the
// database recorded and no rotation retired: Used sealed values still
// stored (only they open them); Unused sealed none still stored (a replica
// started with them, say, and was given another key since).
type MissingKeysError struct {
	Used, Unused []string
}

func (e *MissingKeysError) Error() string {
	if len(e.Used) > 0 {
		return fmt.Sprintf("values sealed with data key(s) %s may still be stored, and the data keys given lack them: give them too, after the primary (the keys this database was used with: after a restore, those its backup was taken with); to move the values off them, `relais keys rotate` with all of them",
			strings.Join(e.Used, ", "))
	}
	return fmt.Sprintf("data key(s) %s were recorded (a replica started with them) but no stored value is sealed with them: if no replica runs with them any more, `relais keys rotate` with these data keys retires them; otherwise give them to this replica too",
		strings.Join(e.Unused, ", "))
}

// CheckKeys verifies the keyring against the database before a replica
// serves: every key it holds must open its recorded probe (a wrong key is
// caught now, not when a consumer asks for inputs), the primary key is
// recorded, and no recorded key may be missing (a *MissingKeysError).
// Without a keyring, it refuses once secret values exist.
func CheckKeys(ctx context.Context, pool *pgxpool.Pool, ring *keyring.Keyring) error {
	return checkKeys(ctx, pool, ring, false)
}

// CheckKeysForRotation is CheckKeys for `relais keys rotate`, which may
// lack recorded keys that sealed nothing still stored: it retires them
// with the others.
func CheckKeysForRotation(ctx context.Context, pool *pgxpool.Pool, ring *keyring.Keyring) error {
	return checkKeys(ctx, pool, ring, true)
}

func checkKeys(ctx context.Context, pool *pgxpool.Pool, ring *keyring.Keyring, unusedMayLack bool) error {
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
			// Named, so that the operator knows which keys to look for (a
			// restore's, say: those the backup was taken with).
			var ids []string
			for _, r := range rows {
				if r.RetiredAt == nil {
					ids = append(ids, r.ID)
				}
			}
			sealedWith := ""
			if len(ids) > 0 {
				sealedWith = " (with data key(s) " + strings.Join(ids, ", ") + ")"
			}
			return fmt.Errorf("sensitive or secret values are stored encrypted%s but no data key is configured: set RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE to the keys this database was used with", sealedWith)
		}
		return nil
	}
	ids := ring.IDs()
	missing := liveKeysMissing(rows, ids)
	known := map[string]bool{}
	for _, r := range rows {
		known[r.ID] = true
		if !slices.Contains(ids, r.ID) {
			continue
		}
		if r.ID == ring.Primary() && r.RetiredAt != nil {
			return fmt.Errorf("data key %q was retired by a key rotation: the key that rotation sealed with must come first among the data keys (add it if it is missing)", r.ID)
		}
		if _, err := ring.Open(r.Probe, []byte(probeAAD)); err != nil {
			return fmt.Errorf("data key %q does not match the key that was used under that id (give the one this database was used with: after a restore, the backup's): %w", r.ID, err)
		}
	}
	if len(missing) > 0 {
		// Which ones sealed values still stored: a full read of the sealed
		// columns, only when a key is missing.
		var refusal MissingKeysError
		for _, id := range missing {
			used, err := q.SealedUnderKeyExists(ctx, id)
			if err != nil {
				return fmt.Errorf("data keys: %w", err)
			}
			if used {
				refusal.Used = append(refusal.Used, id)
			} else {
				refusal.Unused = append(refusal.Unused, id)
			}
		}
		if len(refusal.Used) > 0 || !unusedMayLack {
			return &refusal
		}
	}
	if !known[ring.Primary()] {
		if err := q.DataKeyInsert(ctx, queries.DataKeyInsertParams{ID: ring.Primary(), Probe: ring.Seal(probePlain, []byte(probeAAD))}); err != nil {
			return fmt.Errorf("data keys: record %q: %w", ring.Primary(), err)
		}
	}
	return nil
}

// liveKeysMissing names the recorded keys not retired that held lacks:
// values sealed with them stay closed to whoever holds only held.
func liveKeysMissing(rows []queries.DataKey, held []string) []string {
	var missing []string
	for _, r := range rows {
		if r.RetiredAt == nil && !slices.Contains(held, r.ID) {
			missing = append(missing, r.ID)
		}
	}
	return missing
}
