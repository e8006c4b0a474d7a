package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/keyring"
)

// marker stands in the stored (public) JSON where a protected value was: it
// is what every observation surface shows, and Merge replaces it with the
// real value only on delivery.
func marker(class contracts.Classification) json.RawMessage {
	return json.RawMessage(`{"` + contracts.MaskedKey + `":"` + string(class) + `"}`)
}

// seal splits the protected values of value (per contract c) out of it and
// encrypts them, bound to aad. DESIGN §5 asks this of secret values;
// sensitive ones are sealed too, so that a database dump or backup shows
// neither. It returns the public JSON to store in clear (protected values
// replaced by their masked marker) and the sealed blob (nil when value
// holds nothing protected).
// sealable refuses to seal without a key, or with a first key that a
// rotation retired since this replica started: retired keys may be
// removed from the configuration, and what this replica sealed with one
// would then be unreadable. The replica must restart with the newer key
// first; until then its writes of protected values fail, loudly, rather
// than store values that cannot be opened later.
func (e *Engine) sealable() error {
	if e.keys == nil {
		return fault.New(fault.Unavailable, "encryption_unavailable",
			"this value holds sensitive or secret fields but no data key is configured (RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE)")
	}
	if e.primaryRetired.Load() {
		fe := fault.New(fault.Unavailable, "data_key_retired",
			"this replica's first data key %q was retired by a key rotation: restart it with the newer key first (in RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE, whichever it reads)", e.keys.Primary())
		// Another replica, already restarted, can take the request.
		fe.RetryAfter = time.Second
		return fe
	}
	return nil
}

// DataKeys is how many data keys this replica has: with none, it refuses
// every sensitive and secret value (encryption_unavailable).
func (e *Engine) DataKeys() int {
	if e.keys == nil {
		return 0
	}
	return len(e.keys.IDs())
}

// PrimaryKeyRetired says whether a key rotation retired this replica's
// first data key: it then refuses to seal sensitive and secret values
// until it restarts with the newer key first.
func (e *Engine) PrimaryKeyRetired() bool { return e.primaryRetired.Load() }

// MissingDataKeys names the data keys the database records as live that
// this replica lacks: another replica, started since with a newer key
// first, seals with it, and this one can open none of those values (it
// hands such tasks back, and refuses their reveals) until it restarts with
// that key. Empty without a keyring: such a replica seals and opens
// nothing.
func (e *Engine) MissingDataKeys(ctx context.Context) ([]string, error) {
	if e.keys == nil {
		return nil, nil
	}
	rows, err := e.q.DataKeyList(ctx)
	if err != nil {
		return nil, wrap("data keys", err)
	}
	return liveKeysMissing(rows, e.keys.IDs()), nil
}

// CheckPrimaryKey notes whether a rotation retired this replica's first
// data key, which then refuses to seal (see sealable), and logs it. Run at
// a keys notification, and whenever the replica starts listening again
// (one may have been missed).
func (e *Engine) CheckPrimaryKey(ctx context.Context) error {
	if e.keys == nil {
		return nil
	}
	rows, err := e.q.DataKeyList(ctx)
	if err != nil {
		return wrap("data keys", err)
	}
	for _, r := range rows {
		if r.ID == e.keys.Primary() {
			retired := r.RetiredAt != nil
			if retired && !e.primaryRetired.Swap(true) {
				e.logger.Error("this replica's first data key was retired by a key rotation: it refuses to seal sensitive and secret values until it restarts with the newer key first",
					"key", r.ID, "retired_at", r.RetiredAt)
			}
			if !retired {
				e.primaryRetired.Store(false)
			}
		}
	}
	return nil
}

func (e *Engine) seal(c contracts.Contract, value json.RawMessage, aad string) (json.RawMessage, []byte, error) {
	public, secrets := c.SplitFrom(value, contracts.ClassSensitive)
	if len(secrets) == 0 {
		return public, nil, nil
	}
	if err := e.sealable(); err != nil {
		return nil, nil, err
	}
	plain, err := json.Marshal(secrets)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: seal: %w", err)
	}
	markers := make(map[string]json.RawMessage, len(secrets))
	for p := range secrets {
		markers[p] = marker(classAt(c, p))
	}
	public, err = contracts.Merge(public, markers)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: seal: %w", err)
	}
	return public, e.keys.Seal(plain, []byte(aad)), nil
}

// unseal returns the full value: public with the sealed secrets put back.
// Only deliveries (to an authorized consumer or destination, or to a
// binding evaluated inside the engine) call it, and an admin's recorded
// reveal of one sensitive value (reveal.go), which re-masks the secrets.
func (e *Engine) unseal(public json.RawMessage, sealed []byte, aad string) (json.RawMessage, error) {
	if len(sealed) == 0 {
		return public, nil
	}
	if e.keys == nil {
		return nil, fault.New(fault.Unavailable, "encryption_unavailable", "secret values are stored but no data key is configured")
	}
	plain, err := e.keys.Open(sealed, []byte(aad))
	if err != nil {
		return nil, fmt.Errorf("engine: unseal %s: %w", aad, err)
	}
	var secrets map[string]json.RawMessage
	if err := json.Unmarshal(plain, &secrets); err != nil {
		return nil, fmt.Errorf("engine: unseal %s: %w", aad, err)
	}
	return contracts.Merge(public, secrets)
}

func aadInstanceInputs(id fmt.Stringer) string   { return "instance/" + id.String() + "/inputs" }
func aadOccurrenceInputs(id fmt.Stringer) string { return "occurrence/" + id.String() + "/inputs" }
func aadOccurrenceOutputs(id fmt.Stringer) string {
	return "occurrence/" + id.String() + "/outputs"
}

// classAt is the effective classification of the value at a JSON pointer.
func classAt(c contracts.Contract, pointer string) contracts.Classification {
	var path []string
	for _, seg := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		path = append(path, strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~"))
	}
	if f, class, ok := c.Lookup(path); ok {
		// A list of protected items is taken out whole: its marker says
		// their class (it said the list's own, normal).
		return contracts.WholeClass(f, class)
	}
	return contracts.ClassSecret
}

// digest identifies a request or outputs document for replay detection.
// Both may hold protected values, and a plain hash of them in the database
// would let anyone with a dump confirm a guessed value (a PIN, say): with a
// data key it is keyed. Without one no protected value can be stored, and a
// plain hash gives nothing away.
func (e *Engine) digest(canonical []byte) string {
	if e.keys != nil {
		return e.keys.Digest(canonical)
	}
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sameDigest reports whether stored is the digest of canonical, under
// whichever key made it; a digest whose key was removed matches nothing.
func (e *Engine) sameDigest(canonical []byte, stored string) bool {
	if keyring.IsKeyedDigest(stored) {
		return e.keys != nil && e.keys.MatchDigest(canonical, stored)
	}
	sum := sha256.Sum256(canonical)
	return stored == "sha256:"+hex.EncodeToString(sum[:])
}
