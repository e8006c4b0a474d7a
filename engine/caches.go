package engine

import (
	"context"
	"time"

	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/relais/relais/internal/auth"

	"github.com/relais/relais/queries"
)

// ChannelInvalidate announces that cached knowledge changed: "grants:<id>"
// (a consumer's grants or its revocation), "revisions:<key>" (a new
// revision of a definition), "process:<key>" (a new version of a
// process), "tokens" (a token revoked or rotated), "keys" (a key rotation
// retired data keys). Every replica drops what
// it kept about it.
const ChannelInvalidate = "relais_invalidate"

// memo is what the hot paths (fetch, settle, start) would otherwise read
// from the database on every request: a consumer's grants, the revisions of
// a key or a namespace, the latest version of a process. Each entry is
// dropped by the notification its change commits (any replica), and the
// whole memo is bypassed while this replica's LISTEN connection is down,
// since notifications may be missed then: a change is seen by every replica
// within the notification's delivery (milliseconds), as the wake-ups of
// long polls are.
type memo struct {
	live atomic.Bool // set while the replica listens for invalidations

	mu sync.Mutex
	// gen counts invalidations: a value read from the database is kept
	// only if none happened since the read began, or a change committed
	// meanwhile could be hidden behind the older value.
	gen       uint64
	grants    map[int64][]Grant
	revisions map[string][]int32                              // by key
	prefixes  map[string][]queries.RevisionPairsWithPrefixRow // by namespace prefix
	latest    map[string]*ProcessVersion                      // by process key
	tokens    map[string]*cachedToken                         // by hash
}

// cachedToken is a token a lookup found usable; its expiry is checked at
// every use, its use recorded at most once a minute.
type cachedToken struct {
	principal auth.Principal
	hash      []byte
	expiresAt *time.Time
	touched   atomic.Int64 // unix nanoseconds of the last recorded use
}

func newMemo() *memo {
	return &memo{grants: map[int64][]Grant{}, revisions: map[string][]int32{},
		prefixes: map[string][]queries.RevisionPairsWithPrefixRow{}, latest: map[string]*ProcessVersion{}, tokens: map[string]*cachedToken{}}
}

// SetListening tells the engine whether this replica receives
// ChannelInvalidate notifications: caches are used only while it does, and
// are emptied when it starts or stops (what happened meanwhile is unknown).
func (e *Engine) SetListening(on bool) {
	e.memo.mu.Lock()
	defer e.memo.mu.Unlock()
	e.memo.gen++
	clear(e.memo.grants)
	clear(e.memo.revisions)
	clear(e.memo.prefixes)
	clear(e.memo.latest)
	clear(e.memo.tokens)
	e.memo.live.Store(on)
	if on {
		// A rotation's notification may have been missed meanwhile.
		go e.checkPrimaryKeySoon()
	}
}

// checkPrimaryKeySoon runs CheckPrimaryKey off the notification handler's
// goroutine, bounded in time.
func (e *Engine) checkPrimaryKeySoon() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.CheckPrimaryKey(ctx); err != nil {
		e.logger.Warn("checking whether this replica's data key was retired failed", "err", err)
	}
}

// Invalidate handles a ChannelInvalidate payload.
func (e *Engine) Invalidate(payload string) {
	kind, arg, _ := strings.Cut(payload, ":")
	m := e.memo
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	switch kind {
	case "grants":
		if id, err := strconv.ParseInt(arg, 10, 64); err == nil {
			delete(m.grants, id)
		} else {
			clear(m.grants)
		}
	case "revisions":
		delete(m.revisions, arg)
		// Namespaces matching the key hold its revisions too.
		for prefix := range m.prefixes {
			if strings.HasPrefix(arg, prefix) {
				delete(m.prefixes, prefix)
			}
		}
	case "process":
		delete(m.latest, arg)
	case "tokens":
		clear(m.tokens)
	case "keys":
		// A rotation retired keys: is this replica's first one of them?
		go e.checkPrimaryKeySoon()
	default:
		// An unknown kind (a newer replica's): forget everything.
		clear(m.grants)
		clear(m.revisions)
		clear(m.prefixes)
		clear(m.latest)
		clear(m.tokens)
	}
}

// memoGet returns the cached value of k, or the generation to hand to
// memoPut once the value is read from the database.
func memoGet[K comparable, V any](m *memo, from map[K]V, k K) (v V, ok bool, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live.Load() {
		return v, false, m.gen
	}
	v, ok = from[k]
	return v, ok, m.gen
}

// memoPut keeps v for k unless an invalidation happened since gen.
func memoPut[K comparable, V any](m *memo, into map[K]V, k K, v V, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live.Load() && m.gen == gen {
		into[k] = v
	}
}

// notifyInvalidate announces, in q's transaction, that what payload names
// changed: every replica drops it once the transaction commits. This
// replica drops it at once too, so that the request that made the change,
// once answered, is followed by requests that see it (the notification
// reaches this replica too, a moment later, and drops anything read from
// the database before the commit).
func (e *Engine) notifyInvalidate(ctx context.Context, q *queries.Queries, payload string) error {
	e.Invalidate(payload)
	return q.Notify(ctx, queries.NotifyParams{Channel: ChannelInvalidate, Payload: payload})
}
