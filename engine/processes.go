package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/suggest"
	"github.com/relais/relais/queries"
)

// ProcessVersion is an immutable, statically checked process version.
type ProcessVersion struct {
	Key       string
	Version   int
	Digest    string
	Document  []byte // canonical bytes, as digested
	Process   *process.Process
	CreatedAt time.Time
	// LoweredProtection, for a version its publication made, lists the
	// inputs it protects less than the version before it, each as its
	// path and what changed (see contracts.LoweredProtection).
	LoweredProtection []string
}

// ProcessSummary is a process key with its latest version.
type ProcessSummary struct {
	Key           string
	LatestVersion int
	CreatedAt     time.Time
}

type processVersionKey struct {
	key     string
	version int
}

func violations(code, detail string, vs []contracts.Violation) error {
	errs := make([]fault.FieldError, len(vs))
	for i, v := range vs {
		errs[i] = fault.FieldError{Path: v.Path, Message: v.Message}
	}
	return fault.New(fault.Unprocessable, code, "%s: %d problem(s)", detail, len(vs)).WithErrors(errs)
}

// refuseDocument is the error for the violations of a submitted document,
// what being "the Working" or "the process". A document that is not JSON
// Relais reads is 400 invalid_json, with only those problems (nothing else
// can be judged). One with keys its format does not define is 400
// unknown_field, as any other request body (DESIGN §8), and lists the
// unknown keys first, then the document's other problems: a designer who
// misspelt a key and a type fixes both at once, as relais apply reports
// them. Anything else is 422 code with every pointer.
func refuseDocument(what, code string, vs []contracts.Violation) error {
	var malformed, unknown, other []fault.FieldError
	for _, v := range vs {
		fe := fault.FieldError{Path: v.Path, Message: v.Message}
		switch v.Cause {
		case contracts.Malformed:
			malformed = append(malformed, fe)
		case contracts.UnknownKey:
			unknown = append(unknown, fe)
		default:
			other = append(other, fe)
		}
	}
	switch {
	case len(malformed) > 0:
		return fault.New(fault.BadRequest, "invalid_json", "%s is not JSON that Relais reads: %d problem(s)", what, len(malformed)).WithErrors(malformed)
	case len(unknown) > 0 && len(other) > 0:
		return fault.New(fault.BadRequest, "unknown_field", "%s has unknown fields: %d problem(s), and %d other problem(s), listed after them", what, len(unknown), len(other)).WithErrors(append(unknown, other...))
	case len(unknown) > 0:
		return fault.New(fault.BadRequest, "unknown_field", "%s has unknown fields: %d problem(s)", what, len(unknown)).WithErrors(unknown)
	}
	return violations(code, what+" is invalid", vs)
}

// ProcessLimits are the operator's limits process versions are judged and
// run by (the push timeout a node without one gets, for one).
func (e *Engine) ProcessLimits() process.Limits { return e.processLimits() }

func (e *Engine) processLimits() process.Limits {
	return process.Limits{MaxRetryDelay: e.limits.MaxRetryDelay, DefaultPushTimeout: e.limits.DefaultPushTimeout, MaxPushTimeout: e.limits.MaxPushTimeout}
}

// resolver answers the static checker from the database, loading every
// revision and destination the document names up front.
type resolver struct {
	revisions    map[revisionKey]contracts.Working
	destinations map[string]time.Duration
	// What exists of a reference that resolved to nothing ("revisions 1
	// to 2", "did you mean …"), by reference.
	revisionHints    map[revisionKey]string
	destinationHints map[string]string
	// defined are the keys of unresolved references that are definitions:
	// their revision is what is wrong.
	defined map[string]bool
}

// DefinitionExists says whether key, named by a reference that resolved
// to nothing, is a definition (its revision does not exist).
func (r resolver) DefinitionExists(key string) bool { return r.defined[key] }

// RevisionHint says what exists of a definition revision that does not.
func (r resolver) RevisionHint(key string, n int) string { return r.revisionHints[revisionKey{key, n}] }

// DestinationHint says which destination an unknown name may mean.
func (r resolver) DestinationHint(name string) string { return r.destinationHints[name] }

func (r resolver) Revision(key string, n int) (contracts.Working, bool) {
	w, ok := r.revisions[revisionKey{key, n}]
	return w, ok
}

func (r resolver) Destination(name string) (time.Duration, bool) {
	d, ok := r.destinations[name]
	return d, ok
}

func (e *Engine) newResolver(ctx context.Context, p *process.Process) (resolver, error) {
	r := resolver{revisions: map[revisionKey]contracts.Working{}, destinations: map[string]time.Duration{},
		revisionHints: map[revisionKey]string{}, destinationHints: map[string]string{}, defined: map[string]bool{}}
	// Read once, and only when a reference resolved to nothing: a
	// publication that resolves pays nothing for the hints.
	var keys, names []string
	for _, n := range p.Nodes {
		if n.Kind == process.KindEnd || n.Definition == "" || n.Revision < 1 {
			continue
		}
		rev, err := e.GetRevision(ctx, n.Definition, n.Revision)
		if err == nil {
			r.revisions[revisionKey{n.Definition, n.Revision}] = rev.Working
		} else if !fault.HasCode(err, "not_found") {
			return r, err
		} else if err := e.hintRevision(ctx, r, n.Definition, n.Revision, &keys); err != nil {
			return r, err
		}
		if n.Kind == process.KindPush && n.Destination != "" {
			d, err := e.q.DestinationGet(ctx, n.Destination)
			if err == nil {
				r.destinations[d.Name] = d.MaxTimeout
				continue
			} else if !isNoRows(err) {
				return r, wrap("load destination", err)
			}
			if names == nil {
				if names, err = e.q.DestinationNames(ctx); err != nil {
					return r, wrap("list destinations", err)
				}
			}
			r.destinationHints[n.Destination] = suggest.Hint(n.Destination, names)
		}
	}
	return r, nil
}

// hintRevision records what exists of a definition revision that does
// not: the definition's revisions, or the key a misspelt one may mean
// (every key, read into *keys the first time one is needed).
func (e *Engine) hintRevision(ctx context.Context, r resolver, key string, n int, keys *[]string) error {
	at := revisionKey{key, n}
	d, err := e.GetDefinition(ctx, key)
	if err == nil {
		r.defined[key] = true
	}
	switch {
	case err == nil:
		r.revisionHints[at] = " (" + process.Revisions(key, d.LatestRevision) + ")"
	case fault.HasCode(err, "not_found"):
		if *keys == nil {
			if *keys, err = e.q.DefinitionKeys(ctx); err != nil {
				return wrap("list definitions", err)
			}
		}
		r.revisionHints[at] = suggest.Hint(key, *keys)
	default:
		return err
	}
	return nil
}

// checkProcess parses a process version and checks it statically against
// the revisions and destinations it names, reporting every problem. It
// returns the resolver it checked with, so that a publication can check
// again with the destinations it locks.
func (e *Engine) checkProcess(ctx context.Context, key string, document []byte) (*process.Process, resolver, error) {
	if !keyPattern.MatchString(key) {
		detail := fmt.Sprintf("process key %q must match %s", key, keyPattern)
		if definitionKeyRule.MatchString(key) {
			// Definitions take dotted keys; processes do not (Temporal
			// QA: shop.order was refused with the pattern alone).
			detail += fmt.Sprintf(" (a process key has no dots, unlike a definition's: %s, say)", strings.ReplaceAll(key, ".", "_"))
		}
		return nil, resolver{}, fault.New(fault.BadRequest, "invalid_key", "%s", detail)
	}
	p, vs := process.ParseLenient(document)
	if len(vs) > 0 {
		if p != nil {
			// Only leaf values failed: the static checks judge the rest,
			// so that one answer lists every problem.
			res, err := e.newResolver(ctx, p)
			if err != nil {
				return nil, resolver{}, err
			}
			vs = append(vs, staticBeside(process.Check(p, res, e.processLimits()), vs)...)
			slices.SortStableFunc(vs, func(a, b contracts.Violation) int { return strings.Compare(a.Path, b.Path) })
		}
		return nil, resolver{}, refuseDocument("the process", "invalid_process", vs)
	}
	res, err := e.newResolver(ctx, p)
	if err != nil {
		return nil, resolver{}, err
	}
	vs = append(process.Check(p, res, e.processLimits()), contracts.PatternProblems(p.Inputs, "/inputs")...)
	if len(vs) > 0 {
		return nil, resolver{}, violations("invalid_process", "the process is invalid", vs)
	}
	return p, res, nil
}

// staticBeside returns the static problems that are not at or under a
// parse problem's pointer: those may come from the value that did not
// parse (a default in its place), and the parse problem is reported.
// Those at the node above stand: none reads a policy or a timeout.
func staticBeside(static, parsed []contracts.Violation) []contracts.Violation {
	var out []contracts.Violation
	for _, v := range static {
		if !slices.ContainsFunc(parsed, func(p contracts.Violation) bool { return v.Path == p.Path || strings.HasPrefix(v.Path, p.Path+"/") }) {
			out = append(out, v)
		}
	}
	return out
}

// lockDestinations re-reads, FOR SHARE in the publishing transaction, the
// destinations p pushes to, and checks p again against them. The first
// check read them outside the transaction, so a concurrent
// DeleteDestination could find no version using one and delete it before
// this version commits. Under the share lock a deletion waits for the
// publication and then sees the version (destination_in_use), or it came
// first and the destination is reported unknown here; an update of
// max_timeout waits likewise, so the version is checked against what it
// commits with.
func (e *Engine) lockDestinations(ctx context.Context, q *queries.Queries, p *process.Process, res resolver) error {
	var names []string
	for _, n := range p.Nodes {
		if n.Kind == process.KindPush && n.Destination != "" {
			names = append(names, n.Destination)
		}
	}
	if len(names) == 0 {
		return nil
	}
	rows, err := q.DestinationLockForPublish(ctx, names)
	if err != nil {
		return wrap("lock destinations", err)
	}
	res.destinations = make(map[string]time.Duration, len(rows))
	for _, r := range rows {
		res.destinations[r.Name] = r.MaxTimeout
	}
	if vs := process.Check(p, res, e.processLimits()); len(vs) > 0 {
		return violations("invalid_process", "the process is invalid", vs)
	}
	return nil
}

// PublishProcess parses and statically checks a process version and stores
// it. Publishing a document identical (by digest) to an existing version
// returns that version with created false.
func (e *Engine) PublishProcess(ctx context.Context, key string, document []byte) (ProcessVersion, bool, error) {
	p, res, err := e.checkProcess(ctx, key, document)
	if err != nil {
		// A document identical to a published version is that version,
		// even where a rule added since would refuse it: publishing stays
		// idempotent by digest.
		if pv, ok := e.publishedAs(ctx, key, document); ok {
			return pv, false, nil
		}
		return ProcessVersion{}, false, err
	}
	canonical, digest := p.Canonical(), p.Digest()
	var out ProcessVersion
	var created bool
	var lowered []string
	var next int32 // the version made, for the log of a lowered classification
	err = e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		lowered = nil // a transaction run again starts over
		if err := q.ProcessEnsure(ctx, key); err != nil {
			return err
		}
		// Serialize publications of one key so versions are dense and a
		// digest is stored once.
		if err := q.ProcessLockForPublish(ctx, key); err != nil {
			return err
		}
		if row, err := q.ProcessVersionGetByDigest(ctx, queries.ProcessVersionGetByDigestParams{ProcessKey: key, Digest: digest}); err == nil {
			out = ProcessVersion{Key: key, Version: int(row.Version), Digest: row.Digest, Document: row.Document, Process: p, CreatedAt: row.CreatedAt}
			return nil
		} else if !isNoRows(err) {
			return err
		}
		if err := e.lockDestinations(ctx, q, p, res); err != nil {
			return err
		}
		next = 1
		if latest, err := q.ProcessVersionLatest(ctx, key); err == nil {
			next = latest.Version + 1
			lowered = loweredSince(latest.Document, p)
		} else if !isNoRows(err) {
			return err
		}
		row, err := q.ProcessVersionInsert(ctx, queries.ProcessVersionInsertParams{ProcessKey: key, Version: next, Digest: digest, Document: canonical})
		if err != nil {
			return err
		}
		if err := e.notifyInvalidate(ctx, q, "process:"+key); err != nil {
			return err
		}
		created = true
		out = ProcessVersion{Key: key, Version: int(row.Version), Digest: row.Digest, Document: row.Document, Process: p, CreatedAt: row.CreatedAt}
		return nil
	})
	e.logProtectionLowered(ctx, err, EventProcessProtectionLowered, lowered, "process", key, "version", next)
	if err != nil {
		return ProcessVersion{}, false, wrap("publish process "+key, err)
	}
	if created {
		out.LoweredProtection = lowered
	}
	return out, created, nil
}

// loweredSince lists the inputs p protects less than the version whose
// canonical document is previous.
func loweredSince(previous []byte, p *process.Process) []string {
	old, vs := process.Parse(previous)
	if len(vs) > 0 {
		return nil
	}
	return contracts.LoweredProtection(contracts.Diff(contracts.Working{Inputs: old.Inputs}, contracts.Working{Inputs: p.Inputs}))
}

// publishedAs returns the published version of key whose digest is
// document's, if there is one.
func (e *Engine) publishedAs(ctx context.Context, key string, document []byte) (ProcessVersion, bool) {
	p, vs := process.Parse(document)
	if len(vs) > 0 {
		return ProcessVersion{}, false
	}
	row, err := e.q.ProcessVersionGetByDigest(ctx, queries.ProcessVersionGetByDigestParams{ProcessKey: key, Digest: p.Digest()})
	if err != nil {
		return ProcessVersion{}, false
	}
	return ProcessVersion{Key: key, Version: int(row.Version), Digest: row.Digest, Document: row.Document, Process: p, CreatedAt: row.CreatedAt}, true
}

// GetProcessVersion returns one version; version 0 means the latest.
func (e *Engine) GetProcessVersion(ctx context.Context, key string, version int) (*ProcessVersion, error) {
	return e.processVersion(ctx, e.q, key, version)
}

func (e *Engine) processVersion(ctx context.Context, q *queries.Queries, key string, version int) (*ProcessVersion, error) {
	if version > 0 {
		if v, ok := e.processes.Load(processVersionKey{key, version}); ok {
			return v.(*ProcessVersion), nil
		}
	}
	var row queries.ProcessVersion
	var err error
	var gen uint64
	if version == 0 {
		var pv *ProcessVersion
		var ok bool
		if pv, ok, gen = memoGet(e.memo, e.memo.latest, key); ok {
			return pv, nil
		}
		row, err = q.ProcessVersionLatest(ctx, key)
	} else {
		row, err = q.ProcessVersionGet(ctx, queries.ProcessVersionGetParams{ProcessKey: key, Version: int32(version)})
	}
	if isNoRows(err) {
		if version == 0 {
			return nil, processNotFound(ctx, q, key)
		}
		return nil, notFound("version %d of process %q", version, key)
	}
	if err != nil {
		return nil, wrap("get process version", err)
	}
	var pv *ProcessVersion
	if v, ok := e.processes.Load(processVersionKey{key, int(row.Version)}); ok {
		pv = v.(*ProcessVersion)
	} else {
		p, vs := process.Parse(row.Document)
		if len(vs) > 0 {
			return nil, wrap("get process version", errCorrupt("process version "+key, vs))
		}
		pv = &ProcessVersion{Key: key, Version: int(row.Version), Digest: row.Digest, Document: row.Document, Process: p, CreatedAt: row.CreatedAt}
		v, _ := e.processes.LoadOrStore(processVersionKey{key, pv.Version}, pv)
		pv = v.(*ProcessVersion)
	}
	if version == 0 {
		memoPut(e.memo, e.memo.latest, key, pv, gen)
	}
	return pv, nil
}

// processNotFound refuses a process key nothing has, naming the key it may
// misspell: a key someone typed (a start's URL, a process's page).
func processNotFound(ctx context.Context, q *queries.Queries, key string) error {
	keys, err := q.ProcessKeys(ctx)
	if err != nil {
		return wrap("list processes", err)
	}
	return fault.New(fault.NotFound, "not_found", "process %q not found%s", key, suggest.Hint(key, keys))
}

// ListProcessVersions returns every version of key.
func (e *Engine) ListProcessVersions(ctx context.Context, key string) ([]ProcessVersion, error) {
	rows, err := e.q.ProcessVersionList(ctx, key)
	if err != nil {
		return nil, wrap("list process versions", err)
	}
	if len(rows) == 0 {
		return nil, processNotFound(ctx, e.q, key)
	}
	out := make([]ProcessVersion, len(rows))
	for i, r := range rows {
		out[i] = ProcessVersion{Key: key, Version: int(r.Version), Digest: r.Digest, Document: r.Document, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// ListProcesses returns processes ordered by key after the cursor.
func (e *Engine) ListProcesses(ctx context.Context, after string, limit int) ([]ProcessSummary, error) {
	rows, err := e.q.ProcessList(ctx, queries.ProcessListParams{After: after, Max: int32(limit)})
	if err != nil {
		return nil, wrap("list processes", err)
	}
	out := make([]ProcessSummary, len(rows))
	for i, r := range rows {
		out[i] = ProcessSummary{Key: r.Key, LatestVersion: int(r.LatestVersion), CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// ProcessCheck is what publishing a process document would do.
type ProcessCheck struct {
	// Version is the version publishing gives: an existing one (Exists,
	// the same digest) or the next.
	Version int
	Exists  bool
	// LoweredProtection is what the next version would protect less than
	// the latest one (as ProcessVersion's).
	LoweredProtection []string
}

// CheckProcess runs every check PublishProcess runs without storing
// anything, and says what publishing would do.
func (e *Engine) CheckProcess(ctx context.Context, key string, document []byte) (ProcessCheck, error) {
	p, _, err := e.checkProcess(ctx, key, document)
	if err != nil {
		return ProcessCheck{}, err
	}
	if row, err := e.q.ProcessVersionGetByDigest(ctx, queries.ProcessVersionGetByDigestParams{ProcessKey: key, Digest: p.Digest()}); err == nil {
		return ProcessCheck{Version: int(row.Version), Exists: true}, nil
	} else if !isNoRows(err) {
		return ProcessCheck{}, wrap("check process", err)
	}
	latest, err := e.q.ProcessVersionLatest(ctx, key)
	if isNoRows(err) {
		return ProcessCheck{Version: 1}, nil
	}
	if err != nil {
		return ProcessCheck{}, wrap("check process", err)
	}
	return ProcessCheck{Version: int(latest.Version) + 1, LoweredProtection: loweredSince(latest.Document, p)}, nil
}
