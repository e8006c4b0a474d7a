// Package engine is Relais's domain on PostgreSQL: tokens, definitions and
// revisions, processes and instances, occurrences, their settlement and
// timers. Every state change is one SQL transaction. Generated sqlc rows never
// leave this package; callers see domain types.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/internal/snapshot"
	"github.com/relais/relais/queries"
)

// Engine is the domain service shared by every surface of one replica.
type Engine struct {
	// instanceCounts are the instances this replica's transactions
	// started and ended (see InstanceCounts).
	instanceCounts instanceCounts

	pool *pgxpool.Pool
	q    *queries.Queries
	// hot runs a statement that moves occurrences alone (see HotPlans).
	hot    *queries.Queries
	logger *slog.Logger
	keys   *keyring.Keyring
	limits Limits
	now    func() time.Time // nil: the database's clock
	// replica names this process in the worker catalog.
	replica string
	// retentionWarned is when each other replica's retention setting
	// (its name and setting) was last warned of.
	retentionWarnMu sync.Mutex
	retentionWarned map[string]time.Time
	// origin tells this engine's ChannelIncident notifications from
	// other replicas'.
	origin  string
	pollers pollerSeen

	revisions revisionCache
	processes sync.Map // processVersionKey → *ProcessVersion
	schemas   *contracts.Cache
	memo      *memo
	counts    *snapshot.Cache[[]OccurrenceCount]
	defined   *snapshot.Cache[[]string]
	health    *snapshot.Cache[Health]
	// group commits settlements and claims, starts their own lanes: a
	// producer waits for its start, which must not queue behind the
	// round trips of a group of settlements (see groupCommit).
	group *groupCommit
	// refills numbers the claims made with settlements, each tagged
	// uniquely (see Engine.refill).
	refills atomic.Uint64
	// bulkStop is closed when the replica stops (StopBulkActions): bulk
	// actions end before their next batch.
	bulkStop chan struct{}
	stopBulk sync.Once
	// pushClaims counts this replica's push claims, whose destinations
	// take turns (OccurrenceClaimPush): one runner claims for the
	// replica, so the count moves on at each of its claims.
	pushClaims atomic.Uint64
	starts     *groupCommit
	// clock follows the database's clock between reads (see dbClock).
	clock dbClock
	// primaryRetired is set once a key rotation retired this replica's
	// first data key (see sealable).
	primaryRetired atomic.Bool
	// retention is this replica's retention as its last note read it
	// (nil until one), for the console.
	retention atomic.Pointer[Retention]
}

// Limits are the operator's bounds the engine enforces.
type Limits struct {
	MaxRetryDelay      time.Duration
	DefaultPushTimeout time.Duration
	MaxPushTimeout     time.Duration
}

// DefaultLimits are the configuration's defaults, which it writes with the
// same constants.
func DefaultLimits() Limits {
	return Limits{MaxRetryDelay: process.DefaultMaxRetryDelay, DefaultPushTimeout: process.FallbackPushTimeout, MaxPushTimeout: process.HardMaxPushTimeout}
}

// Options configure an Engine. The zero value works: no encryption key
// (storing a secret value is then refused), DefaultLimits, a discarding logger.
type Options struct {
	Logger *slog.Logger
	Keys   *keyring.Keyring
	Limits Limits
	// Now, when set, replaces the database clock (tests move time with it).
	Now func() time.Time
	// Replica names this process in the worker catalog. Default:
	// hostname-pid.
	Replica string
	// GroupLanes bounds the transactions in flight that group concurrent
	// single writes: as many for starts, and for settlements and claims;
	// lanes past the first open only for writes queued behind a stuck
	// group (see groupCommit). Default 2.
	GroupLanes int
}

// New returns an engine on pool.
func New(pool *pgxpool.Pool, opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits()
	}
	if opts.Replica == "" {
		opts.Replica = DefaultReplica
	}
	schemas := contracts.NewCache()
	e := &Engine{pool: pool, q: queries.New(pool), hot: hotQueries(pool), logger: opts.Logger, keys: opts.Keys, limits: opts.Limits, now: opts.Now,
		replica: opts.Replica, origin: newOrigin(), revisions: revisionCache{schemas: schemas}, schemas: schemas, memo: newMemo(),
		bulkStop: make(chan struct{})}
	e.counts = snapshot.New("occurrence counts by definition and status", e.CountOccurrencesByDefinitionStatus, opts.Logger, OccurrenceCountsTTL).
		StampWith(e.Now).QuietWhen(PoolClosed)
	e.health = snapshot.New("health", e.Health, opts.Logger, OccurrenceCountsTTL).StampWith(e.Now).QuietWhen(PoolClosed)
	e.defined = snapshot.New("definition keys", e.q.DefinitionKeys, opts.Logger, OccurrenceCountsTTL).StampWith(e.Now).QuietWhen(PoolClosed)
	e.group = newGroupCommit(e, opts.GroupLanes)
	e.starts = newGroupCommit(e, opts.GroupLanes)
	return e
}

// PoolClosed reports whether err comes from the engine's pool closed
// under it: the process is stopping, and a read still in flight fails for
// that reason only.
func PoolClosed(err error) bool { return errors.Is(err, puddle.ErrClosedPool) }

// Replica is the name this process has in the worker catalog.
func (e *Engine) Replica() string { return e.replica }

// DefaultReplica names this process as a replica when Options gives no
// name: its host and process id (host-4242). A process that is its
// container's first (pid 1) adds four random hex digits (host-1-9f3a):
// containers that share their host's name (host networking) would
// otherwise share one name, in the worker catalog and in the retention
// settings each replica notes.
var DefaultReplica = replicaName(os.Hostname, os.Getpid())

func replicaName(hostname func() (string, error), pid int) string {
	host, _ := hostname()
	name := cmp.Or(host, "relais") + "-" + strconv.Itoa(pid)
	if pid == 1 {
		name += fmt.Sprintf("-%04x", rand.N(1<<16))
	}
	return name
}

// at is the time to pass as a statement's now parameter: the injected clock's,
// or nil for the database's own (statements read coalesce(now, now())), so
// that replicas with drifting clocks agree on lock expiry and reading the
// clock costs no round trip.
func (e *Engine) at() *time.Time {
	if e.now == nil {
		return nil
	}
	t := e.now().UTC()
	return &t
}

// Logger is the engine's logger.
func (e *Engine) Logger() *slog.Logger { return e.logger }

// Pool returns the engine's connection pool.
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

// tx runs fn in one transaction; fn's error rolls it back. Its statements
// are pipelined (pipeTx): writes whose answer nobody reads travel with the
// next statement that is answered.
func (e *Engine) tx(ctx context.Context, fn func(q *queries.Queries, tx pgx.Tx) error) error {
	return e.inTx(ctx, false, func(tx pgx.Tx) error {
		return fn(e.q.WithTx(tx), tx)
	})
}

// isNoRows reports whether err is the driver's "no rows".
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// isUniqueViolation reports whether err is a unique violation, optionally of
// the named constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// notFound is the error of an unknown (or invisible) resource.
func notFound(what string, args ...any) *fault.Error {
	return fault.New(fault.NotFound, "not_found", what+" not found", args...)
}

// notKept is notFound for what retention deletes with its ended instance:
// the answer cannot tell that from an id that never existed, and says so.
func notKept(what string, args ...any) *fault.Error {
	return fault.New(fault.NotFound, "not_found", what+" not found: there is none, or retention deleted it (ended instances are kept for RELAIS_RETENTION), or an admin erased it (the audit log says so: GET /api/v1/audit/actions?action=erase)", args...)
}

// notKeptForConsumer is notKept for an occurrence a consumer names: the
// answer cannot tell either from an occurrence its grants do not cover,
// and says that too (a worker settling with another consumer's token
// looks at its grants, not at retention).
func notKeptForConsumer(id uuid.UUID) *fault.Error {
	return fault.New(fault.NotFound, "not_found", "occurrence %s not found: there is none this consumer may see (one of a definition it is granted, pulled), or retention deleted it (ended instances are kept for RELAIS_RETENTION) or an admin erased its instance", id)
}

// wrap prefixes an error with the operation that met it. Every error the
// engine returns passes here, which makes it the one place where a lost
// database becomes 503 database_unavailable rather than 500 internal.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fault.As(err); ok {
		return err
	}
	err = fmt.Errorf("engine: %s: %w", op, err)
	if pgfault.Lost(err) || errors.Is(err, errCommitUnknown) || pgfault.TimedOut(err) {
		// A COMMIT whose answer never came is the database's absence too:
		// 503, to be repeated as it was; so is a statement past its
		// statement_timeout (a URL may set one): the request was fine.
		return pgfault.Unavailable(err)
	}
	return err
}

// errCorrupt reports stored data that no longer parses, with its first
// problem: most likely written by a newer release (a member this build
// does not know, published through an upgraded replica mid-roll), else a
// bug or a manual edit, never user input. It read as corruption to an
// operator upgrading (upgrade QA).
func errCorrupt(what string, vs []contracts.Violation) error {
	first := ""
	if len(vs) > 0 {
		first = fmt.Sprintf(" (%s: %s)", cmp.Or(vs[0].Path, "/"), vs[0].Message)
	}
	return fmt.Errorf("stored %s does not parse%s: a newer Relais release most likely wrote it, and this replica, older, does not know what it holds: finish the rolling upgrade (or use what a release adds only once every replica runs it); else it was edited by hand", what, first)
}

func formatDuration(d time.Duration) string { return isoduration.Format(d) }
