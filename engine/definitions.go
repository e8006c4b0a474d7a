package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/suggest"
	"github.com/relais/relais/queries"
)

// Definition is a class of external work: a key, its mutable Working copy,
// and its immutable revisions and releases.
type Definition struct {
	Key            string
	Working        contracts.Working
	WorkingDigest  string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	LatestRevision int // 0 before the first snapshot
	ReleaseCount   int
}

// Revision is an immutable snapshot of a Working.
type Revision struct {
	Key       string
	Revision  int
	Digest    string
	Working   contracts.Working
	Document  json.RawMessage // the canonical bytes that were digested
	CreatedAt time.Time
}

// Release is a named, immutable publication of one revision.
type Release struct {
	Key       string
	Name      string
	Revision  int
	Notes     string
	CreatedAt time.Time
}

// revisionCache keeps parsed revisions and their compiled validators: a
// revision never changes, so nothing is ever invalidated.
type revisionCache struct {
	revisions sync.Map // revisionKey → *Revision
	schemas   *contracts.Cache
}

type revisionKey struct {
	key string
	rev int
}

func checkKey(key string) error {
	if !validDefinitionKey(key) {
		return fault.New(fault.BadRequest, "invalid_key", "definition key %q must be dotted segments matching %s (crm.add_company), at most %d characters", key, keySegment, maxKeyLength)
	}
	return nil
}

// validWorking is the Working document would store under key, or why
// SaveWorking refuses it (the key, then the contract).
func validWorking(key string, document []byte) (contracts.Working, error) {
	if err := checkKey(key); err != nil {
		return contracts.Working{}, err
	}
	w, vs := contracts.ParseWorking(document)
	if len(vs) == 0 {
		vs = append(contracts.PatternProblems(w.Inputs, "/inputs"), contracts.PatternProblems(w.Outputs, "/outputs")...)
	}
	if len(vs) > 0 {
		return contracts.Working{}, refuseDocument("the Working", "invalid_contract", vs)
	}
	return w, nil
}

// SaveWorking validates and stores the Working of key, creating the
// definition when new. An invalid Working changes nothing.
func (e *Engine) SaveWorking(ctx context.Context, key string, document []byte) (Definition, bool, error) {
	w, err := validWorking(key, document)
	if err != nil {
		return Definition{}, false, err
	}
	row, err := e.q.DefinitionUpsertWorking(ctx, queries.DefinitionUpsertWorkingParams{Key: key, Working: w.Canonical(), WorkingDigest: w.Digest()})
	if err != nil {
		return Definition{}, false, wrap("save working", err)
	}
	d := Definition{Key: row.Key, Working: w, WorkingDigest: row.WorkingDigest, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
	if d.LatestRevision, err = e.latestRevision(ctx, key); err != nil {
		return Definition{}, false, wrap("save working", err)
	}
	return d, row.Created, nil
}

// CheckWorking is SaveWorking without storing: the definition the Working
// would give key, and whether it would create it. `relais apply
// --dry-run` asks it so that it refuses what the real apply would.
func (e *Engine) CheckWorking(ctx context.Context, key string, document []byte) (Definition, bool, error) {
	w, err := validWorking(key, document)
	if err != nil {
		return Definition{}, false, err
	}
	d, err := e.GetDefinition(ctx, key)
	created := fault.HasCode(err, "not_found")
	if err != nil && !created {
		return Definition{}, false, err
	}
	// As PostgreSQL keeps it, to the microsecond (the API writes times so).
	now := e.Now().Truncate(time.Microsecond)
	if created {
		d = Definition{Key: key, CreatedAt: now}
	}
	if created || d.WorkingDigest != w.Digest() {
		d.UpdatedAt = now // a save of the same Working leaves it
	}
	d.Working, d.WorkingDigest = w, w.Digest()
	return d, created, nil
}

// GetDefinition returns one definition.
func (e *Engine) GetDefinition(ctx context.Context, key string) (Definition, error) {
	row, err := e.q.DefinitionGet(ctx, key)
	if isNoRows(err) {
		return Definition{}, notFound("definition %q", key)
	}
	if err != nil {
		return Definition{}, wrap("get definition", err)
	}
	w, vs := contracts.ParseWorking(row.Working)
	if len(vs) > 0 {
		return Definition{}, wrap("get definition", errCorrupt("working of "+key, vs))
	}
	d := Definition{Key: row.Key, Working: w, WorkingDigest: w.Digest(), CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
	if d.LatestRevision, err = e.latestRevision(ctx, key); err != nil {
		return Definition{}, wrap("get definition", err)
	}
	return d, nil
}

// FindDefinition is GetDefinition for a key someone typed (a URL, a
// release's YAML): a key that is not there is refused naming the one it
// may misspell. Lookups whose miss is expected (a definition being
// created) ask GetDefinition, which reads no other key.
func (e *Engine) FindDefinition(ctx context.Context, key string) (Definition, error) {
	d, err := e.GetDefinition(ctx, key)
	if !fault.HasCode(err, "not_found") {
		return d, err
	}
	keys, kerr := e.q.DefinitionKeys(ctx)
	if kerr != nil {
		return Definition{}, wrap("list definitions", kerr)
	}
	return Definition{}, fault.New(fault.NotFound, "not_found", "definition %q not found%s", key, suggest.Hint(key, keys))
}

// latestRevision is the number of key's latest revision, 0 before the first
// snapshot.
func (e *Engine) latestRevision(ctx context.Context, key string) (int, error) {
	latest, err := e.q.RevisionLatest(ctx, key)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return int(latest.Revision), nil
}

// ListDefinitions returns definitions ordered by key, after the cursor key.
func (e *Engine) ListDefinitions(ctx context.Context, after string, limit int) ([]Definition, error) {
	rows, err := e.q.DefinitionList(ctx, queries.DefinitionListParams{After: after, Max: int32(limit)})
	if err != nil {
		return nil, wrap("list definitions", err)
	}
	out := make([]Definition, 0, len(rows))
	for _, row := range rows {
		w, _ := contracts.ParseWorking(row.Working)
		out = append(out, Definition{Key: row.Key, Working: w, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
			LatestRevision: int(row.LatestRevision), ReleaseCount: int(row.ReleaseCount)})
	}
	return out, nil
}

// Snapshot freezes the Working of key as a new revision, or returns the
// latest revision when the Working is identical to it. The definition row is
// locked so concurrent snapshots of one Working give one revision.
func (e *Engine) Snapshot(ctx context.Context, key string) (Revision, bool, error) {
	return e.SnapshotIf(ctx, key, nil)
}

// SnapshotIf is Snapshot, made only if the Working's digest is one of
// digests (nil: any). A client that saved a Working and then snapshots it
// in a second request names what it saved: another designer's Working
// saved in between is refused (412 working_changed) instead of becoming
// the revision the client reports as its own.
func (e *Engine) SnapshotIf(ctx context.Context, key string, digests []string) (Revision, bool, error) {
	var rev Revision
	var created bool
	var lowered []string
	var next int32 // the revision made, for the log of a lowered classification
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		lowered = nil // a retried transaction starts over
		def, err := q.DefinitionGetForUpdate(ctx, key)
		if isNoRows(err) {
			return notFound("definition %q", key)
		}
		if err != nil {
			return err
		}
		// Digests come from the stored bytes, not the stored digest: a
		// Working saved while it was kept as jsonb may have had its numbers
		// rewritten since it was digested.
		w, vs := contracts.ParseWorking(def.Working)
		if len(vs) > 0 {
			return errCorrupt("working of "+key, vs)
		}
		if digests != nil && !slices.Contains(digests, w.Digest()) {
			return fault.New(fault.PreconditionFailed, "working_changed",
				"the Working of %s is not the one this request names (its digest is now %s): it was changed meanwhile; read it again (GET /api/v1/definitions/%s) and snapshot what you mean", key, w.Digest(), key)
		}
		next = 1
		latest, err := q.RevisionLatest(ctx, key)
		switch {
		case err == nil && latest.Digest == w.Digest():
			rev, err = revisionFromRow(latest)
			return err
		case err == nil:
			next = latest.Revision + 1
			if old, vs := contracts.ParseWorking(latest.Document); len(vs) == 0 {
				lowered = contracts.LoweredProtection(contracts.Diff(old, w))
			}
		case !isNoRows(err):
			return err
		}
		row, err := q.RevisionInsert(ctx, queries.RevisionInsertParams{DefinitionKey: key, Revision: next, Digest: w.Digest(), Document: w.Canonical()})
		if err != nil {
			return err
		}
		if err := e.notifyInvalidate(ctx, q, "revisions:"+key); err != nil {
			return err
		}
		created = true
		rev, err = revisionFromRow(row)
		return err
	})
	e.logProtectionLowered(ctx, err, EventProtectionLowered, lowered, "definition", key, "revision", next)
	return rev, created, wrap("snapshot "+key, err)
}

func revisionFromRow(row queries.Revision) (Revision, error) {
	w, vs := contracts.ParseWorking(row.Document)
	if len(vs) > 0 {
		return Revision{}, errCorrupt("revision document", vs)
	}
	return Revision{Key: row.DefinitionKey, Revision: int(row.Revision), Digest: row.Digest, Working: w, Document: row.Document, CreatedAt: row.CreatedAt}, nil
}

// GetRevision returns one revision, from memory after the first read.
func (e *Engine) GetRevision(ctx context.Context, key string, n int) (*Revision, error) {
	return e.revision(ctx, e.q, key, n)
}

func (e *Engine) revision(ctx context.Context, q *queries.Queries, key string, n int) (*Revision, error) {
	k := revisionKey{key, n}
	if v, ok := e.revisions.revisions.Load(k); ok {
		return v.(*Revision), nil
	}
	row, err := q.RevisionGet(ctx, queries.RevisionGetParams{DefinitionKey: key, Revision: int32(n)})
	if isNoRows(err) {
		return nil, notFound("revision %d of definition %q", n, key)
	}
	if err != nil {
		return nil, wrap("get revision", err)
	}
	rev, err := revisionFromRow(row)
	if err != nil {
		return nil, wrap("get revision", err)
	}
	v, _ := e.revisions.revisions.LoadOrStore(k, &rev)
	return v.(*Revision), nil
}

// ListRevisions returns every revision of key in order.
func (e *Engine) ListRevisions(ctx context.Context, key string) ([]Revision, error) {
	rows, err := e.q.RevisionListByDefinition(ctx, key)
	if err != nil {
		return nil, wrap("list revisions", err)
	}
	out := make([]Revision, 0, len(rows))
	for _, row := range rows {
		r, err := revisionFromRow(row)
		if err != nil {
			return nil, wrap("list revisions", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Validators returns the compiled input and output validators of a revision.
func (e *Engine) Validators(r *Revision) (inputs, outputs *contracts.Validator, err error) {
	inputs, err = e.revisions.schemas.Validator(r.Digest, "inputs", r.Working.Inputs)
	if err != nil {
		return nil, nil, wrap("compile inputs", err)
	}
	outputs, err = e.revisions.schemas.Validator(r.Digest, "outputs", r.Working.Outputs)
	if err != nil {
		return nil, nil, wrap("compile outputs", err)
	}
	return inputs, outputs, nil
}

// DiffRevisions lists the changes from revision a to revision b.
func (e *Engine) DiffRevisions(ctx context.Context, key string, a, b int) ([]contracts.Change, error) {
	ra, err := e.GetRevision(ctx, key, a)
	if err != nil {
		return nil, err
	}
	rb, err := e.GetRevision(ctx, key, b)
	if err != nil {
		return nil, err
	}
	return contracts.Diff(ra.Working, rb.Working), nil
}

// CreateRelease publishes a revision under a name unique to the definition.
func (e *Engine) CreateRelease(ctx context.Context, key, name string, revision int, notes string) (rel Release, created bool, err error) {
	var errs []fault.FieldError
	for _, v := range contracts.ReleaseProblems(name, notes) {
		errs = append(errs, fault.FieldError{Path: v.Path, Message: v.Message})
	}
	if revision < 1 {
		errs = append(errs, fault.FieldError{Path: "/revision", Message: "must be a revision number (1 or more)"})
	}
	if len(errs) > 0 {
		return Release{}, false, fault.New(fault.BadRequest, "invalid_request", "the release is invalid").WithErrors(errs)
	}
	d, err := e.FindDefinition(ctx, key)
	if err != nil {
		return Release{}, false, err
	}
	if revision > d.LatestRevision {
		return Release{}, false, unknownReleaseRevision(key, revision, d.LatestRevision)
	}
	row, err := e.q.ReleaseInsert(ctx, queries.ReleaseInsertParams{DefinitionKey: key, Name: name, Revision: int32(revision), Notes: notes})
	if isUniqueViolation(err, "releases_pkey") {
		// A name is published once. The same release again (a script
		// retrying after a lost answer) is that release, as a process
		// version published again is; anything else would change it.
		existing, gerr := e.q.ReleaseGet(ctx, queries.ReleaseGetParams{DefinitionKey: key, Name: name})
		if gerr != nil {
			return Release{}, false, wrap("create release", gerr)
		}
		if int(existing.Revision) == revision && existing.Notes == notes {
			return releaseFromRow(existing), false, nil
		}
		what := fmt.Sprintf("revision %d", existing.Revision)
		if int(existing.Revision) == revision {
			what = "the same revision, other notes"
		}
		return Release{}, false, fault.New(fault.Conflict, "release_exists", "release %q of %q already exists (%s) and cannot be changed: publish another name", name, key, what)
	}
	if err != nil {
		return Release{}, false, wrap("create release", err)
	}
	return releaseFromRow(row), true, nil
}

// unknownReleaseRevision refuses a release of a revision key does not
// have, latest being its newest (0 before its first snapshot).
func unknownReleaseRevision(key string, revision, latest int) *fault.Error {
	have := process.Revisions(key, latest)
	return fault.New(fault.Unprocessable, "unknown_revision", "definition %q has no revision %d (%s)", key, revision, have).
		WithErrors([]fault.FieldError{{Path: "/revision", Message: "no such revision (" + have + ")"}})
}

func releaseFromRow(row queries.Release) Release {
	return Release{Key: row.DefinitionKey, Name: row.Name, Revision: int(row.Revision), Notes: row.Notes, CreatedAt: row.CreatedAt}
}

// ListReleases returns every release of key in publication order.
func (e *Engine) ListReleases(ctx context.Context, key string) ([]Release, error) {
	return e.ListReleasesAfter(ctx, key, nil, math.MaxInt32)
}

// ReleasePosition is the keyset position of a release in publication
// order: its publication time, then its name.
type ReleasePosition struct {
	CreatedAt time.Time
	Name      string
}

// ListReleasesAfter returns up to limit releases of key in publication
// order, those after the position (nil for the first).
func (e *Engine) ListReleasesAfter(ctx context.Context, key string, after *ReleasePosition, limit int) ([]Release, error) {
	if _, err := e.q.DefinitionGet(ctx, key); isNoRows(err) {
		return nil, notFound("definition %q", key)
	}
	params := queries.ReleaseListByDefinitionAfterParams{DefinitionKey: key, Max: int32(limit)}
	if after != nil {
		params.AfterCreatedAt, params.AfterName = &after.CreatedAt, &after.Name
	}
	rows, err := e.q.ReleaseListByDefinitionAfter(ctx, params)
	if err != nil {
		return nil, wrap("list releases", err)
	}
	out := make([]Release, len(rows))
	for i, r := range rows {
		out[i] = releaseFromRow(r)
	}
	return out, nil
}

// GetRelease returns one release.
func (e *Engine) GetRelease(ctx context.Context, key, name string) (Release, error) {
	row, err := e.q.ReleaseGet(ctx, queries.ReleaseGetParams{DefinitionKey: key, Name: name})
	if isNoRows(err) {
		return Release{}, notFound("release %q of definition %q", name, key)
	}
	if err != nil {
		return Release{}, wrap("get release", err)
	}
	return releaseFromRow(row), nil
}
