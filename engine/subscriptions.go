package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/suggest"
	"github.com/relais/relais/queries"
)

// keySegment is one segment of a definition key; keys are dotted
// namespaces of segments (crm.add_company) up to maxKeyLength.
const keySegment = `[a-z][a-z0-9_]{1,62}`

const maxKeyLength = 200

var (
	keyPattern        = regexp.MustCompile(`^` + keySegment + `$`)
	definitionKeyRule = regexp.MustCompile(`^` + keySegment + `(\.` + keySegment + `)*$`)
	keyPatternRule    = regexp.MustCompile(`^(` + keySegment + `(\.` + keySegment + `)*\.)?\*$`)
)

// validDefinitionKey reports whether key is a definition key: dotted
// segments, each of the process-key grammar.
func validDefinitionKey(key string) bool {
	return len(key) <= maxKeyLength && definitionKeyRule.MatchString(key)
}

// IsKeyPattern reports whether s is a key pattern (crm.* or *) rather than
// a key. Patterns are accepted by grants and subscriptions only.
func IsKeyPattern(s string) bool {
	return len(s) <= maxKeyLength && keyPatternRule.MatchString(s)
}

// patternPrefix is what keys matched by pattern start with: "crm." for
// crm.*, "" for *.
func patternPrefix(pattern string) string { return strings.TrimSuffix(pattern, "*") }

// KeyMatches reports whether key is pattern itself (a key) or matched by
// it (crm.*, *): which subscription a claimed occurrence answers.
func KeyMatches(pattern, key string) bool { return keyMatches(pattern, key) }

// keyMatches reports whether key is pattern itself or matched by it.
func keyMatches(pattern, key string) bool {
	if IsKeyPattern(pattern) {
		return strings.HasPrefix(key, patternPrefix(pattern))
	}
	return pattern == key
}

// keyError explains why s is neither a key nor a pattern.
func keyError(s string) string {
	switch {
	case strings.Contains(s, "*"):
		return "a pattern is a namespace followed by .* (crm.*), or * alone"
	default:
		return "must be a definition key (dotted segments of 2 to 63 lowercase letters, digits and _, each starting with a letter, such as crm.add_company) or a pattern (crm.*, *)"
	}
}

// Subscription is what a worker says it can handle: a definition key or
// pattern (crm.*, *), the revisions it understands (none: every granted
// revision; a pattern's are all), and optionally the input fields it needs
// (JSON pointers): it then receives only those, with their parents.
type Subscription struct {
	Definition string
	Revisions  []int
	Fields     []string
	// Project makes Fields a projection alone, as Camunda's variables
	// filter is: every revision is taken, each delivered with those of
	// the fields it has, and only a field no revision has is refused. By
	// default a revision that lacks a declared field is not taken, since a
	// native worker declares what it needs.
	Project bool
}

// Pairs is a resolved subscription list: parallel definition keys and
// revisions, the shape the claim statement takes, and the fields each
// pair's worker declared.
type Pairs struct {
	Keys      []string
	Revisions []int32
	// fields holds the declared fields per pair index; nil for every input.
	fields [][]string
}

// specificity ranks a subscription's definition: a key above any pattern,
// a longer pattern above a shorter one. Where several of a worker's
// subscriptions match one key, the most specific one alone says which of
// its revisions are taken and with what fields (see governedElsewhere),
// as the Go SDK's most specific handler takes the key: a
// worker subscribed to loans.* and to loans.check_credit with declared
// fields was delivered every input of check_credit, its secret too, the
// pattern's "every input" winning a union (Zeebe-user QA).
func specificity(definition string) int {
	if IsKeyPattern(definition) {
		return len(patternPrefix(definition))
	}
	return math.MaxInt
}

// DefinitionKeys returns the distinct definition keys of the pairs, in
// their order.
func (p Pairs) DefinitionKeys() []string {
	keys := make([]string, 0, len(p.Keys))
	for _, k := range p.Keys {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// turn says which of a claim's definitions with work goes first
// (OccurrenceClaimPull): drawn at random for each claim, so that a claim
// of one task serves each definition with work as often as the others,
// and a backlog on one does not starve the rest. A counter moved on at
// each claim would not do: two workers claiming in lockstep on one
// replica each see every other value, so a worker subscribed to two
// definitions would always be served the same one first.
func (e *Engine) turn() int64 { return int64(rand.Uint32()) }

// Matches reports whether (key, revision) is in the pairs.
func (p Pairs) Matches(key string, revision int) bool {
	return p.index(key, revision) >= 0
}

func (p Pairs) index(key string, revision int) int {
	for i, k := range p.Keys {
		if k == key && int(p.Revisions[i]) == revision {
			return i
		}
	}
	return -1
}

// Fields returns the fields declared for (key, revision); nil means every
// input.
func (p Pairs) Fields(key string, revision int) []string {
	if i := p.index(key, revision); i >= 0 && i < len(p.fields) {
		return p.fields[i]
	}
	return nil
}

// byKey is the pairs as the worker catalog stores them: the revisions
// taken by definition key ({"crm": [1, 2]}).
func (p Pairs) byKey() json.RawMessage {
	m := make(map[string][]int32, len(p.Keys))
	for i, k := range p.Keys {
		m[k] = append(m[k], p.Revisions[i])
	}
	b, _ := json.Marshal(m)
	return b
}

// governedElsewhere reports whether a subscription of subs more specific
// than pattern matches key: that one alone says what of key the worker
// takes.
func governedElsewhere(subs []Subscription, pattern, key string) bool {
	for _, o := range subs {
		if specificity(o.Definition) > specificity(pattern) && keyMatches(o.Definition, key) {
			return true
		}
	}
	return false
}

// add adds (key, revision) with the fields a subscription declared. Only
// subscriptions as specific meet on a pair (a more specific one governs
// its keys: see governedElsewhere), which is one key listed twice, and
// only the loose resolution lets that through: the union of their fields,
// every input if either wants every input.
func (p *Pairs) add(key string, revision int, fields []string) {
	if p.Matches(key, revision) {
		i := p.index(key, revision)
		switch {
		case p.fields[i] == nil || fields == nil:
			p.fields[i] = nil
		default:
			for _, f := range fields {
				if !slices.Contains(p.fields[i], f) {
					p.fields[i] = append(p.fields[i], f)
				}
			}
		}
		return
	}
	p.Keys, p.Revisions = append(p.Keys, key), append(p.Revisions, int32(revision))
	p.fields = append(p.fields, fields)
}

// grantSet answers which revisions of a key a consumer's grants allow.
type grantSet []Grant

// revisions returns the revisions of key the grants allow: all (nil, true),
// some (list, true) or none (false). Grants add up: a key granted with
// some revisions and covered by a pattern is granted every revision.
func (g grantSet) revisions(key string) ([]int, bool) {
	var some []int
	found := false
	for _, gr := range g {
		if !keyMatches(gr.Definition, key) {
			continue
		}
		if gr.Revisions == nil {
			return nil, true
		}
		found = true
		for _, r := range gr.Revisions {
			if !slices.Contains(some, r) {
				some = append(some, r)
			}
		}
	}
	return some, found
}

// keys returns the definition keys (and patterns) granted.
func (g grantSet) keys() []string {
	out := make([]string, len(g))
	for i, gr := range g {
		out[i] = gr.Definition
	}
	return out
}

// hint names the granted key a refused one most likely meant: a typo of
// it, or the key asked without its namespace (check_credit for
// loans.check_credit, as a Zeebe job type or a Camunda topic is often
// written). The consumer's own grants only: nothing learnt of the rest.
func (g grantSet) hint(asked string) string {
	keys := g.keys()
	if h := suggest.Hint(asked, keys); h != "" {
		return h
	}
	for _, k := range keys {
		if !IsKeyPattern(k) && strings.HasSuffix(k, "."+asked) {
			return suggest.Meant(k)
		}
	}
	// Nothing close: what it is granted, its own, so that a key that
	// does not exist at all does not read as a grant to ask for (Go SDK
	// QA: qa.nope was only "not granted").
	return g.granted()
}

// granted says what the consumer is granted, its first few keys and
// patterns: ", which is granted crm.add_company, loans.*".
func (g grantSet) granted() string {
	keys := g.keys()
	const shown = 5
	switch {
	case len(keys) == 0:
		return ", which is granted nothing"
	case len(keys) > shown:
		return ", which is granted " + strings.Join(keys[:shown], ", ") + fmt.Sprintf(" and %d more", len(keys)-shown)
	}
	return ", which is granted " + strings.Join(keys, ", ")
}

// overlaps reports whether some grant may cover a key matched by pattern.
func (g grantSet) overlaps(pattern string) bool {
	prefix := patternPrefix(pattern)
	for _, gr := range g {
		if strings.HasPrefix(gr.Definition, prefix) ||
			(IsKeyPattern(gr.Definition) && strings.HasPrefix(prefix, patternPrefix(gr.Definition))) {
			return true
		}
	}
	return false
}

// ResolveSubscriptions intersects a worker's subscriptions with its
// consumer's grants. Asking for a key that is not granted is refused
// (not_granted) rather than silently ignored, so a misconfigured worker
// learns why it gets nothing; the refusal does not reveal whether the
// definition exists. A pattern resolves, at each fetch, to the granted keys
// it matches (keys created later included), and is refused only when no
// grant could ever cover it. Declared fields must exist in the inputs of
// every revision subscribed. A granted key with no published revision, or
// a revision it does not have, is refused (invalid_request at its pointer)
// rather than waited on forever: a pattern grant would otherwise let a
// misspelt key through to a worker that silently never receives anything.
// Only what the consumer is granted is checked, so nothing is revealed of
// the rest.
func (e *Engine) ResolveSubscriptions(ctx context.Context, consumerID int64, subs []Subscription) (Pairs, error) {
	return e.resolveSubscriptions(ctx, consumerID, subs, true)
}

// ResolveSubscriptionsLoosely is ResolveSubscriptions without refusing
// what nothing matches: a key or revision that does not exist matches
// nothing. For the Camunda facade, since Camunda answers nothing for a
// topic no task has, and for subscriptions checked once already (a stream
// resolving them again).
func (e *Engine) ResolveSubscriptionsLoosely(ctx context.Context, consumerID int64, subs []Subscription) (Pairs, error) {
	return e.resolveSubscriptions(ctx, consumerID, subs, false)
}

func (e *Engine) resolveSubscriptions(ctx context.Context, consumerID int64, subs []Subscription, strict bool) (Pairs, error) {
	gs, err := e.grants(ctx, consumerID)
	if err != nil {
		return Pairs{}, err
	}
	grants := grantSet(gs)
	var p Pairs
	var errs, refused []fault.FieldError
	for i, s := range subs {
		at := fmt.Sprintf("/subscriptions/%d", i)
		var resolved []revisionKey
		switch {
		case IsKeyPattern(s.Definition):
			if len(s.Revisions) > 0 {
				errs = append(errs, fault.FieldError{Path: at + "/revisions", Message: "a pattern's revisions are all: omit them"})
				continue
			}
			if !grants.overlaps(s.Definition) {
				// Named with what it is granted, as a key is (verifier
				// QA: a pattern's refusal said only "not granted").
				refused = append(refused, fault.FieldError{Path: at + "/definition", Message: "not granted to this consumer" + grants.granted()})
				continue
			}
			rows, err := e.revisionsWithPrefix(ctx, patternPrefix(s.Definition))
			if err != nil {
				return Pairs{}, err
			}
			for _, r := range rows {
				if governedElsewhere(subs, s.Definition, r.DefinitionKey) {
					// A more specific subscription says which of its
					// revisions the worker takes and with what fields:
					// one it leaves out (lacking a declared field, say)
					// is not taken through this pattern with every input
					// (security QA: the secret of a revision the key's
					// declared fields left out came whole).
					continue
				}
				if revs, ok := grants.revisions(r.DefinitionKey); ok && (revs == nil || slices.Contains(revs, int(r.Revision))) {
					resolved = append(resolved, revisionKey{key: r.DefinitionKey, rev: int(r.Revision)})
				}
			}
		case validDefinitionKey(s.Definition):
			granted, ok := grants.revisions(s.Definition)
			if !ok {
				// A misspelt key is named with the granted key it meant:
				// the consumer's own grants, nothing learnt of the rest.
				refused = append(refused, fault.FieldError{Path: at + "/definition", Message: "not granted to this consumer" + grants.hint(s.Definition)})
				continue
			}
			revs := s.Revisions
			if len(revs) == 0 {
				if granted != nil {
					revs = granted
				} else {
					all, err := e.revisionNumbers(ctx, s.Definition)
					if err != nil {
						return Pairs{}, err
					}
					revs = toInts(all)
				}
			} else if granted != nil {
				for j, r := range revs {
					if !slices.Contains(granted, r) {
						refused = append(refused, fault.FieldError{Path: fmt.Sprintf("%s/revisions/%d", at, j),
							Message: "not granted to this consumer, which is granted " + revisionsWord(len(granted)) + " " + joinInts(granted) + " of " + s.Definition})
					}
				}
			}
			if strict {
				// Checked against what the consumer is granted only, so
				// that nothing is learnt of the rest.
				unpublished, err := e.unpublished(ctx, at, s, granted)
				if err != nil {
					return Pairs{}, err
				}
				if len(unpublished) == 1 && unpublished[0].Path == at+"/definition" {
					// Granted through a pattern, a misspelt key is
					// named with the published key it meant, among
					// those the consumer's patterns cover.
					hint, err := e.grantedKeyHint(ctx, grants, s.Definition)
					if err != nil {
						return Pairs{}, err
					}
					unpublished[0].Message += hint
				}
				if len(unpublished) > 0 {
					errs = append(errs, unpublished...)
					continue
				}
			}
			for _, r := range revs {
				resolved = append(resolved, revisionKey{key: s.Definition, rev: r})
			}
		default:
			errs = append(errs, fault.FieldError{Path: at + "/definition", Message: keyError(s.Definition)})
			continue
		}
		if j := slices.IndexFunc(subs[:i], func(o Subscription) bool { return o.Definition == s.Definition }); strict && j >= 0 {
			// Which of the two says what the worker takes, its revisions
			// and fields, cannot be told. Checked once the grant is: a key
			// not granted is refused as such first, listed twice or not.
			errs = append(errs, fault.FieldError{Path: at + "/definition", Message: fmt.Sprintf("%s is subscribed to already, at /subscriptions/%d: list each key or pattern once", s.Definition, j)})
			continue
		}
		fields, resolved, ferrs, err := e.checkFields(ctx, at, s, resolved)
		if err != nil {
			return Pairs{}, err
		}
		errs = append(errs, ferrs...)
		for _, k := range resolved {
			p.add(k.key, k.rev, fields)
		}
	}
	if len(errs) > 0 {
		return Pairs{}, fault.New(fault.BadRequest, "invalid_request", "the subscriptions are invalid").WithErrors(errs)
	}
	if len(refused) > 0 {
		return Pairs{}, fault.New(fault.Forbidden, "not_granted", "the consumer is not granted every subscription").WithErrors(refused)
	}
	return p, nil
}

// grantedKeyHint suggests, for key, the closest published key the
// consumer's pattern grants covering it also cover ("" for none): only
// keys it may fetch, nothing learnt of the rest.
func (e *Engine) grantedKeyHint(ctx context.Context, grants grantSet, key string) (string, error) {
	var candidates []string
	for _, gr := range grants {
		if !IsKeyPattern(gr.Definition) || !keyMatches(gr.Definition, key) {
			continue
		}
		rows, err := e.revisionsWithPrefix(ctx, patternPrefix(gr.Definition))
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			if revs, ok := grants.revisions(r.DefinitionKey); ok && (revs == nil || slices.Contains(revs, int(r.Revision))) &&
				r.DefinitionKey != key && !slices.Contains(candidates, r.DefinitionKey) {
				candidates = append(candidates, r.DefinitionKey)
			}
		}
	}
	return suggest.Hint(key, candidates), nil
}

// unpublished refuses a subscription nothing could ever match: a key
// none of whose granted revisions is published, or a listed revision
// granted but not published. granted nil is every revision. The memo is
// read first, the database before refusing: a revision published a moment
// ago may not have reached this replica's memo yet.
func (e *Engine) unpublished(ctx context.Context, at string, s Subscription, granted []int) ([]fault.FieldError, error) {
	published, err := e.revisionNumbers(ctx, s.Definition)
	if err != nil {
		return nil, err
	}
	errs := unpublishedErrors(at, s, granted, published)
	if len(errs) == 0 {
		return nil, nil
	}
	if published, err = e.q.RevisionNumbers(ctx, s.Definition); err != nil {
		return nil, wrap("revisions of "+s.Definition, err)
	}
	return unpublishedErrors(at, s, granted, published), nil
}

func unpublishedErrors(at string, s Subscription, granted []int, published []int32) []fault.FieldError {
	var visible []int
	for _, r := range published {
		if granted == nil || slices.Contains(granted, int(r)) {
			visible = append(visible, int(r))
		}
	}
	if len(visible) == 0 {
		return []fault.FieldError{{Path: at + "/definition", Message: "definition " + s.Definition +
			" has no published revision granted to this consumer: this subscription would never receive anything (check the key, or publish a revision first)"}}
	}
	var errs []fault.FieldError
	for j, r := range s.Revisions {
		if (granted == nil || slices.Contains(granted, r)) && !slices.Contains(visible, r) {
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("%s/revisions/%d", at, j),
				Message: fmt.Sprintf("revision %d of %s is not published (granted and published: %s): this subscription would never receive it", r, s.Definition, joinInts(visible))})
		}
	}
	return errs
}

// stillGranted keeps the pairs the consumer's grants allow now. A long
// poll or a stream resolves its subscriptions when it begins and claims
// with them for as long as it lasts: a grant withdrawn meanwhile must stop
// its deliveries at its next claim, not at its next resolution. The grants
// come from the memo, which the change's notification empties on every
// replica. With no pair left it refuses, as a fetch resolving afresh would
// (not_granted).
func (e *Engine) stillGranted(ctx context.Context, consumerID int64, p Pairs) (Pairs, error) {
	gs, err := e.grants(ctx, consumerID)
	if err != nil {
		return Pairs{}, err
	}
	grants := grantSet(gs)
	allowed := func(i int) bool {
		revs, ok := grants.revisions(p.Keys[i])
		return ok && (revs == nil || slices.Contains(revs, int(p.Revisions[i])))
	}
	i := 0
	for i < len(p.Keys) && allowed(i) {
		i++
	}
	if i == len(p.Keys) {
		return p, nil
	}
	var kept Pairs
	for i := range p.Keys {
		if allowed(i) {
			var fields []string
			if i < len(p.fields) {
				fields = p.fields[i]
			}
			kept.add(p.Keys[i], int(p.Revisions[i]), fields)
		}
	}
	if len(kept.Keys) == 0 {
		return Pairs{}, fault.New(fault.Forbidden, "not_granted", "the consumer's grants changed: it is no longer granted any definition subscribed")
	}
	return kept, nil
}

// MaxDeclaredFields bounds a subscription's fields list (the inputs a
// worker declares it reads).
const MaxDeclaredFields = 100

// checkFields checks a subscription's declared fields against the inputs
// contract of every revision it resolved to, and returns the revisions it
// takes. It returns nil fields for a subscription that declares none
// (every input). A subscription that lists no revisions (every revision
// granted, or a pattern) takes those its fields fit and leaves out the
// others: a revision published later without a declared field, for other
// workers, must not stop a live worker's fetches. Only when none fits, or
// when a listed revision does not, is it refused. A projection (s.Project)
// takes every revision, and refuses only a field none of them has.
func (e *Engine) checkFields(ctx context.Context, at string, s Subscription, resolved []revisionKey) ([]string, []revisionKey, []fault.FieldError, error) {
	fields, implicit := s.Fields, len(s.Revisions) == 0
	if fields == nil {
		return nil, resolved, nil, nil
	}
	if len(fields) == 0 || len(fields) > MaxDeclaredFields {
		return nil, nil, []fault.FieldError{{Path: at + "/fields", Message: fmt.Sprintf("must list 1 to %d JSON pointers, or be omitted for every input", MaxDeclaredFields)}}, nil
	}
	var fit []revisionKey
	// A field's problem, said once for the revisions of a key that have
	// it (evolution QA: one misspelt field, nine lines alike, one per
	// revision); for a projection, the field each is about, and the
	// fields some revision has.
	type problem struct {
		field int
		key   string
		msg   string
		revs  []int
	}
	var problems []*problem
	somewhere := make([]bool, len(fields))
	// have lists, by field, the resolved revisions of each key whose
	// inputs have it.
	have := make([]map[string][]int, len(fields))
	for _, k := range resolved {
		rev, err := e.revision(ctx, e.q, k.key, k.rev)
		if err != nil {
			return nil, nil, nil, err
		}
		fits := true
		for j, f := range fields {
			if err := rev.Working.Inputs.FieldPointer(f); err == nil {
				somewhere[j] = true
				if have[j] == nil {
					have[j] = map[string][]int{}
				}
				have[j][k.key] = append(have[j][k.key], k.rev)
			} else {
				if rev.Working.Outputs.FieldPointer(f) == nil {
					// A worker asking for what it will write: say so,
					// not only that the inputs lack it.
					err = errors.New("is an output, not an input: a worker is given the inputs and writes the outputs")
				}
				fits = false
				msg := fmt.Sprintf("%q %v", f, err)
				i := slices.IndexFunc(problems, func(p *problem) bool { return p.field == j && p.key == k.key && p.msg == msg })
				if i < 0 {
					problems = append(problems, &problem{field: j, key: k.key, msg: msg})
					i = len(problems) - 1
				}
				problems[i].revs = append(problems[i].revs, k.rev)
			}
		}
		if fits {
			fit = append(fit, k)
		}
	}
	var errs []fault.FieldError
	var errField []int
	for _, p := range problems {
		msg := p.msg
		if others := have[p.field][p.key]; len(others) > 0 {
			// The field exists, in other revisions: no name to suggest,
			// but which revisions have it (verifier QA: /extra4 was
			// told /extra1, though revisions 4 and 5 have it).
			if i := strings.Index(msg, " (did you mean "); i >= 0 {
				msg = msg[:i]
			}
			msg += " (" + revisionsText(others) + " of " + p.key + " have it)"
			if len(others) == 1 {
				msg = strings.TrimSuffix(msg, " have it)") + " has it)"
			}
		}
		errs = append(errs, fault.FieldError{Path: fmt.Sprintf("%s/fields/%d", at, p.field),
			Message: fmt.Sprintf("%s %s: %s", p.key, revisionsText(p.revs), msg)})
		errField = append(errField, p.field)
	}
	if s.Project {
		// Each revision is delivered what it has of the fields (Project
		// leaves out what an input lacks); the errors are those of the
		// fields no revision has.
		var missing []fault.FieldError
		for i, fe := range errs {
			if !somewhere[errField[i]] {
				missing = append(missing, fe)
			}
		}
		return slices.Clone(fields), resolved, missing, nil
	}
	if implicit && len(fit) > 0 {
		return slices.Clone(fields), fit, nil, nil
	}
	return slices.Clone(fields), fit, errs, nil
}

// GrantedRevisions lists the revisions of key that consumer is granted
// and that exist now, in order: what one of its workers naming no
// revision takes (a grant of every revision is every one published).
func (e *Engine) GrantedRevisions(ctx context.Context, consumerID int64, key string) ([]int, error) {
	gs, err := grantsOf(ctx, e.memo, e.q, consumerID)
	if err != nil {
		return nil, err
	}
	some, ok := grantSet(gs).revisions(key)
	if !ok {
		return nil, nil
	}
	existing, err := e.revisionNumbers(ctx, key)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, r := range existing {
		if some == nil || slices.Contains(some, int(r)) {
			out = append(out, int(r))
		}
	}
	slices.Sort(out)
	return out, nil
}

// revisionsText says revisions as a person reads them: "revision 3",
// "revisions 1, 4", "revisions 1–9".
func revisionsText(revs []int) string {
	if len(revs) == 1 {
		return "revision " + strconv.Itoa(revs[0])
	}
	return "revisions " + RevisionRanges(revs)
}

// RevisionRanges writes revision numbers in order, a run of three or more
// as a range: "1–3, 5, 7, 8". The same in every language.
func RevisionRanges(revs []int) string {
	revs = slices.Sorted(slices.Values(revs))
	var parts []string
	for i := 0; i < len(revs); {
		j := i
		for j+1 < len(revs) && revs[j+1] == revs[j]+1 {
			j++
		}
		switch {
		case j-i >= 2:
			parts = append(parts, strconv.Itoa(revs[i])+"–"+strconv.Itoa(revs[j]))
		case j > i:
			parts = append(parts, strconv.Itoa(revs[i]), strconv.Itoa(revs[j]))
		default:
			parts = append(parts, strconv.Itoa(revs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// granted reports whether a consumer may see revision of key. It reads
// through q because it runs inside settlement transactions: a query on the
// pool there could wait for a connection held by a transaction waiting for
// this one's locks.
func granted(ctx context.Context, m *memo, q *queries.Queries, consumerID int64, key string, revision int) (bool, error) {
	gs, err := grantsOf(ctx, m, q, consumerID)
	if err != nil {
		return false, err
	}
	revs, ok := grantSet(gs).revisions(key)
	return ok && (revs == nil || slices.Contains(revs, revision)), nil
}

// revisionNumbers returns the revisions of key, from the memo when it can.
func (e *Engine) revisionNumbers(ctx context.Context, key string) ([]int32, error) {
	m := e.memo
	revs, ok, gen := memoGet(m, m.revisions, key)
	if ok {
		return revs, nil
	}
	revs, err := e.q.RevisionNumbers(ctx, key)
	if err != nil {
		return nil, wrap("revisions of "+key, err)
	}
	memoPut(m, m.revisions, key, revs, gen)
	return revs, nil
}

// revisionsWithPrefix returns every (key, revision) under a namespace
// prefix, from the memo when it can.
func (e *Engine) revisionsWithPrefix(ctx context.Context, prefix string) ([]queries.RevisionPairsWithPrefixRow, error) {
	m := e.memo
	rows, ok, gen := memoGet(m, m.prefixes, prefix)
	if ok {
		return rows, nil
	}
	rows, err := e.q.RevisionPairsWithPrefix(ctx, prefix)
	if err != nil {
		return nil, wrap("revisions under "+prefix, err)
	}
	memoPut(m, m.prefixes, prefix, rows, gen)
	return rows, nil
}

// revisionsWord is "revision" or "revisions", as n says.
func revisionsWord(n int) string {
	if n == 1 {
		return "revision"
	}
	return "revisions"
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}
