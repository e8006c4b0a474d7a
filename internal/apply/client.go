package apply

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/suggest"
)

// Client applies documents to a running Relais.
type Client struct {
	URL   string
	Token string
	HTTP  *http.Client
	// checksWorking is whether the server checks a Working without storing
	// it (read once from its OpenAPI document): nil until known.
	checksWorking *bool
	// role is the token's, as Check read it.
	role string
}

// Result is what applying (or planning) one document did.
type Result struct {
	Doc    Document
	Action string // created, updated, unchanged, published
	Detail string
	// Changes lists, for a process version published, what it changes of
	// the version it follows (Since), one line each.
	Changes []string
	Since   int
	// Notes are what a published version may do that its designer would
	// rather know (process.Looser), one line each.
	Notes []string
	// revision is, for a Definition, the revision it is or would become:
	// releases later in the same dry run may pin it; working is its
	// contract, when this client could read it.
	revision int
	working  *contracts.Working
}

// plan is what a run applied, or would in a dry run, before the document
// at hand: a process later in a dry run may pin a revision or push to a
// destination that only this run creates, which the server cannot check
// it against.
type plan struct {
	revisions    map[string]int               // definition key: the revision it is or would become
	made         map[string]bool              // definition key: whether this run makes that revision
	workings     map[string]contracts.Working // definition key: that revision's contract
	destinations map[string]time.Duration     // destination name: its max_timeout
}

func (r Result) String() string {
	s := r.Doc.Name() + ": " + r.Action
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	if len(r.Changes) > 0 {
		s += fmt.Sprintf("\n  changes from version %d:", r.Since)
		for _, c := range r.Changes {
			s += "\n    " + c
		}
	}
	for _, n := range r.Notes {
		s += "\n  note: " + n
	}
	return s
}

// apiError is a problem+json answer.
type apiError struct {
	Status int
	Code   string          `json:"code"`
	Detail string          `json:"detail"`
	Errors []apiFieldError `json:"errors"`
}

// apiFieldError is one problem of a problem+json answer, at a JSON pointer.
type apiFieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

// problems turns an API error into document problems.
func problems(d Document, err error) []Problem {
	if ae, ok := err.(*apiError); ok {
		if len(ae.Errors) > 0 {
			out := make([]Problem, len(ae.Errors))
			for i, e := range ae.Errors {
				out[i] = Problem{Doc: d, Pointer: e.Path, Message: e.Message}
			}
			// In file order, as the local checks' (load): the server
			// sorts by pointer, which put a node "not reachable" before
			// the misspelt next that cut it off (designer QA).
			slices.SortStableFunc(out, func(a, b Problem) int { return cmp.Compare(a.line(), b.line()) })
			return out
		}
		return []Problem{{Doc: d, Pointer: envelopePointer(d, ae.Code), Message: fmt.Sprintf("%s (%s)", ae.Detail, ae.Code)}}
	}
	var ue *unanswered
	return []Problem{{Doc: d, Message: err.Error(), Unknown: errors.As(err, &ue) && ue.write}}
}

// envelopePointer places a refusal about the document's identity, which
// travels in the request's path rather than its body (so the server names
// no pointer), at the envelope member it is about: its line is then the
// one an editor jumps to.
func envelopePointer(d Document, code string) string {
	switch {
	case code == "invalid_key" && (d.Kind == KindDefinition || d.Kind == KindProcess):
		return "/key"
	case code == "invalid_name" && d.Kind == KindDestination, code == "release_exists" && d.Kind == KindRelease:
		return "/name"
	}
	return ""
}

// unanswered is a request that got no answer: a write's outcome is then
// unknown.
type unanswered struct {
	write bool
	err   error
}

func (u *unanswered) Error() string { return u.err.Error() }
func (u *unanswered) Unwrap() error { return u.err }

// Do sends one request of the API (path from the root, as
// /api/v1/consumers), body as JSON, and decodes the answer into out: for
// commands beside apply that speak the API with the same token and
// errors. A refusal is an error naming its status, code and detail, its
// pointers listed by FieldErrors.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.call(ctx, method, path, body, out)
	return err
}

// FieldErrors lists a refusal's problems, "pointer: message" each.
func FieldErrors(err error) []string {
	var ae *apiError
	if !errors.As(err, &ae) {
		return nil
	}
	out := make([]string, len(ae.Errors))
	for i, e := range ae.Errors {
		out[i] = e.Path + ": " + e.Message
	}
	return out
}

func (c *Client) call(ctx context.Context, method, path string, body any, out any) (int, error) {
	return c.callWith(ctx, method, path, nil, body, out)
}

// callWith is call with more request headers.
func (c *Client) callWith(ctx context.Context, method, path string, header http.Header, body any, out any) (int, error) {
	status, _, err := c.roundTrip(ctx, method, path, header, body, out)
	return status, err
}

// DoWith is Do with more request headers, answering the response's.
func (c *Client) DoWith(ctx context.Context, method, path string, header http.Header, body, out any) (http.Header, error) {
	_, h, err := c.roundTrip(ctx, method, path, header, body, out)
	return h, err
}

// IsPreconditionFailed reports whether err is a 412 refusal (a write made
// against a state that changed since it was read).
func IsPreconditionFailed(err error) bool {
	ae, ok := err.(*apiError)
	return ok && ae.Status == http.StatusPreconditionFailed
}

// roundTrip sends one request and decodes its answer into out; it
// returns the status and the response's headers.
func (c *Client) roundTrip(ctx context.Context, method, path string, header http.Header, body any, out any) (int, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, nil, &unanswered{write: method != http.MethodGet && !strings.Contains(path, "dry_run=true"), err: fmt.Errorf("%s %s: %w", method, path, err)}
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if res.StatusCode >= 300 {
		ae := &apiError{Status: res.StatusCode}
		if json.Unmarshal(data, ae) != nil || ae.Code == "" {
			ae.Code, ae.Detail = "http_"+fmt.Sprint(res.StatusCode), strings.TrimSpace(string(data))
		}
		return res.StatusCode, res.Header, ae
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return res.StatusCode, res.Header, fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
		}
	}
	return res.StatusCode, res.Header, nil
}

func isNotFound(err error) bool {
	ae, ok := err.(*apiError)
	return ok && ae.Status == http.StatusNotFound
}

// Apply plans (dryRun) or applies every document in order, reporting each
// result to report. It stops at the first document the server refuses,
// since later documents may depend on it, and returns the problems: the
// documents reported before it were applied, it and those after it were
// not.
func (c *Client) Apply(ctx context.Context, docs []Document, dryRun bool, report func(Result)) []Problem {
	pl := plan{revisions: map[string]int{}, made: map[string]bool{}, workings: map[string]contracts.Working{}, destinations: map[string]time.Duration{}}
	for _, d := range docs {
		var res Result
		var err error
		switch d.Kind {
		case KindDestination:
			res, err = c.destination(ctx, d, dryRun)
			if s, _ := d.Body["max_timeout"].(string); err == nil {
				if t, perr := isoduration.Parse(s); perr == nil {
					pl.destinations[d.ID] = t
				}
			}
		case KindDefinition:
			res, err = c.definition(ctx, d, dryRun)
			if err == nil {
				pl.revisions[d.ID] = res.revision
				pl.made[d.ID] = res.Action == "created" || res.Action == "updated"
				if res.working != nil {
					pl.workings[d.ID] = *res.working
				}
			}
		case KindRelease:
			res, err = c.release(ctx, d, dryRun, pl.revisions)
		case KindProcess:
			res, err = c.process(ctx, d, dryRun, pl)
		}
		if err != nil {
			return problems(d, err)
		}
		report(res)
	}
	return nil
}

func esc(s string) string { return url.PathEscape(s) }

func (c *Client) destination(ctx context.Context, d Document, dryRun bool) (Result, error) {
	path := "/api/v1/destinations/" + esc(d.ID)
	if dryRun {
		path += "?dry_run=true"
	}
	var out struct {
		Change               string   `json:"change"`
		RemovedHeaders       []string `json:"removed_headers"`
		SigningSecretRemoved bool     `json:"signing_secret_removed"`
		MaxTimeout           string   `json:"max_timeout"`
		CappedTimeouts       []struct {
			ProcessKey string `json:"process_key"`
			Version    int    `json:"version"`
			Node       string `json:"node"`
			Timeout    string `json:"timeout"`
		} `json:"capped_timeouts"`
	}
	if _, err := c.call(ctx, "PUT", path, d.Body, &out); err != nil {
		return Result{}, err
	}
	// The document is the whole destination: what it no longer holds is
	// removed, which a file that lost a header by mistake should say.
	var removed []string
	if len(out.RemovedHeaders) > 0 {
		removed = append(removed, "headers "+strings.Join(out.RemovedHeaders, ", "))
	}
	if out.SigningSecretRemoved {
		removed = append(removed, "its signing secret")
	}
	detail := ""
	if len(removed) > 0 {
		verb := "removes"
		if dryRun {
			verb = "would remove"
		}
		detail = verb + " " + strings.Join(removed, " and ") + ", which the document no longer holds"
	}
	if len(out.CappedTimeouts) > 0 {
		nodes := make([]string, len(out.CappedTimeouts))
		for i, n := range out.CappedTimeouts {
			nodes[i] = fmt.Sprintf("%s version %d node %s (%s)", n.ProcessKey, n.Version, n.Node, n.Timeout)
		}
		verb := "cuts"
		if dryRun {
			verb = "would cut"
		}
		if detail != "" {
			detail += "; "
		}
		detail += fmt.Sprintf("max_timeout %s %s the calls of published %s short", out.MaxTimeout, verb, strings.Join(nodes, ", "))
	}
	return Result{Doc: d, Action: out.Change, Detail: detail}, nil
}

func (c *Client) definition(ctx context.Context, d Document, dryRun bool) (res Result, err error) {
	js, err := json.Marshal(d.Body)
	if err != nil {
		return Result{}, fmt.Errorf("definition %s: %w", d.ID, err)
	}
	// A document this client cannot parse has no digest to compare: it is
	// sent as it is, and the server's refusal names each problem with its
	// pointer (which the file's line then locates).
	var digest string
	var working *contracts.Working
	if w, violations := contracts.ParseWorking(js); len(violations) == 0 {
		digest, working = w.Digest(), &w
		if raised := contracts.RaisedClassifications(js); len(raised) > 0 {
			// Noted as the revision is made, not on every unchanged run.
			defer func() {
				if err == nil && res.Action != "unchanged" {
					res.Notes = append(res.Notes, raised...)
				}
			}()
		}
	}
	base := "/api/v1/definitions/" + esc(d.ID)
	var cur struct {
		WorkingDigest string             `json:"working_digest"`
		Changes       []contracts.Change `json:"unsnapshotted_changes"`
		Revisions     []struct {
			Revision int    `json:"revision"`
			Digest   string `json:"digest"`
		} `json:"revisions"`
	}
	_, err = c.call(ctx, "GET", base, nil, &cur)
	if err != nil && !isNotFound(err) {
		return Result{}, err
	}
	latest, latestDigest := 0, ""
	if n := len(cur.Revisions); n > 0 {
		latest, latestDigest = cur.Revisions[n-1].Revision, cur.Revisions[n-1].Digest
	}
	action, next := "updated", latest+1
	switch {
	case isNotFound(err):
		action = "created"
	case latestDigest == digest && cur.WorkingDigest == digest:
		return c.expect(d, Result{Doc: d, Action: "unchanged", Detail: fmt.Sprintf("revision %d", latest)}, latest)
	case latestDigest == digest:
		action, next = "working restored", latest
	}
	if latest > 0 && cur.WorkingDigest != latestDigest && cur.WorkingDigest != digest {
		// Someone's edits of the Working, never snapshotted, are
		// replaced by the repository's document: named, so that a
		// colleague's work does not vanish without a word (designer QA).
		discarded := discardedEdits(cur.Changes, dryRun)
		defer func() {
			if err == nil {
				if res.Detail != "" {
					res.Detail += "; "
				}
				res.Detail += discarded
			}
		}()
	}
	breaking := ""
	if action == "updated" && latest > 0 && working != nil {
		if breaking, err = c.breakingChanges(ctx, base, latest, *working, dryRun); err != nil {
			return Result{}, err
		}
		// Revisions are deduplicated against the latest only (DESIGN §1):
		// a document reverted to an earlier contract makes a new revision,
		// identical to that one, which processes pinning it never see.
		// Said with what it breaks, after it.
		for _, r := range slices.Backward(cur.Revisions) {
			if r.Digest == digest {
				breaking += fmt.Sprintf("; identical to revision %d, which a process may pin instead", r.Revision)
				break
			}
		}
	}
	if action == "created" {
		breaking += c.closeKey(ctx, "definitions", d.ID, dryRun)
	}
	planned, err := c.expect(d, Result{Doc: d, Action: action, Detail: fmt.Sprintf("revision %d", next) + breaking, working: working}, next)
	if dryRun && err == nil {
		// The server's own checks (the key, the body's size), nothing
		// stored; a server older than this client would store the Working.
		var checks bool
		if checks, err = c.serverChecksWorking(ctx); checks {
			_, err = c.call(ctx, "PUT", base+"/working?dry_run=true", d.Body, nil)
		} else if err == nil {
			planned.Detail += ", not checked by the server (older than this client)"
		}
	}
	if dryRun || err != nil {
		// A declared revision the document would not become is refused
		// before anything is written: a snapshot is immutable forever.
		return planned, err
	}
	if _, err := c.call(ctx, "PUT", base+"/working", d.Body, nil); err != nil {
		return Result{}, err
	}
	var snap struct {
		Revision int `json:"revision"`
	}
	var ifMatch http.Header
	if digest != "" {
		// Only of the Working just saved: another client's, saved in
		// between, would otherwise become the revision reported here.
		ifMatch = http.Header{"If-Match": {strconv.Quote(digest)}}
	}
	if _, err := c.callWith(ctx, "POST", base+"/revisions", ifMatch, nil, &snap); err != nil {
		if ae, ok := err.(*apiError); ok && ae.Code == "working_changed" {
			// Told in apply's terms: the server's advice (read the
			// Working again, snapshot it) is for an API client.
			ae.Detail = "another client saved the Working of " + d.ID + " between this apply's save and its snapshot, so no revision was made from this document; run relais apply again (it makes the revision from what the repository says)"
		}
		return Result{}, err
	}
	return c.expect(d, Result{Doc: d, Action: action, Detail: fmt.Sprintf("revision %d", snap.Revision) + breaking, working: working}, snap.Revision)
}

// breakingChanges says, for a detail, what the new contract breaks
// against revision latest, read from the server: a designer sees it as
// the revision is made, not later in a diff nobody opened, and each field
// whose protection it lowers. It is "" when nothing breaks and no
// classification is lowered.
func (c *Client) breakingChanges(ctx context.Context, base string, latest int, next contracts.Working, dryRun bool) (string, error) {
	doc, err := c.document(ctx, fmt.Sprintf("%s/revisions/%d", base, latest))
	if err != nil {
		return "", err
	}
	old, violations := contracts.ParseWorking(doc)
	if len(violations) > 0 {
		return "", nil // a revision this client cannot read: the server's diff tells
	}
	changes := contracts.Diff(old, next)
	lowered := contracts.LoweredProtection(changes)
	// Each breaking change named with whom it may break, so that a dry
	// run, whose revision does not exist yet to be diffed, says what a
	// designer must decide on; past a few, the diff has the rest.
	const named = 5
	var breaking, others []string
	all := 0
	for _, ch := range changes {
		var who string
		switch {
		case ch.BreaksProcesses && ch.BreaksWorkers:
			who = "processes and workers"
		case ch.BreaksProcesses:
			who = "processes"
		case ch.BreaksWorkers:
			who = "workers"
		default:
			if len(others) < named {
				others = append(others, ch.Path+" ("+ch.Detail+")")
			}
			continue
		}
		if all++; all <= named {
			breaking = append(breaking, ch.Path+" ("+ch.Detail+"; may break "+who+")")
		}
	}
	if all > named {
		breaking = append(breaking, fmt.Sprintf("and %d more", all-named))
	}
	// A lowered classification may break nobody, yet values masked and
	// sealed until now would be shown and stored in clear: it is named,
	// not only counted.
	protection := protectionNote(lowered, "fields", "revision")
	if len(changes) == 0 {
		// Said, since it still makes a revision (evolution QA: a
		// description's edit read as any update, and workers pinned to
		// the latest do not take the new one).
		return fmt.Sprintf("; the contracts are revision %d's: only names or descriptions changed (a worker or process pinned to revision %d stays on it)", latest, latest) + protection, nil
	}
	if n := len(changes) - all; n > named {
		others = append(others, fmt.Sprintf("and %d more", n-named))
	}
	if all == 0 {
		// What changes, none of it breaking (evolution QA: an added
		// optional input read as a bare "updated").
		return fmt.Sprintf("; %d change(s) against revision %d, none breaking: %s", len(changes), latest, strings.Join(others, ", ")) + protection, nil
	}
	where := fmt.Sprintf("GET %s/revisions/%d/diff/%d", base, latest, latest+1)
	if dryRun {
		where += " once applied" // the revision it would become does not exist yet
	}
	rest := ""
	if len(others) > 0 {
		// The changes that break nobody too (evolution QA: a field added
		// beside a breaking one went unsaid).
		rest = fmt.Sprintf("; %d other change(s), breaking nobody: %s", len(changes)-all, strings.Join(others, ", "))
	}
	return fmt.Sprintf("; %d breaking change(s) against revision %d, listed by %s: %s",
		all, latest, where, strings.Join(breaking, ", ")) + rest + protection, nil
}

// serverChecksWorking reports whether the server takes PUT
// /definitions/{key}/working?dry_run=true, from its OpenAPI document: a
// server that predates it ignores the parameter and stores the Working.
func (c *Client) serverChecksWorking(ctx context.Context) (bool, error) {
	if c.checksWorking != nil {
		return *c.checksWorking, nil
	}
	type parameter struct {
		Name string `json:"name"`
	}
	var doc struct {
		// A path item holds operations and, beside them, its parameters.
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if _, err := c.call(ctx, "GET", "/api/v1/openapi.json", nil, &doc); err != nil {
		return false, err
	}
	var put struct {
		Parameters []parameter `json:"parameters"`
	}
	if raw := doc.Paths["/api/v1/definitions/{key}/working"]["put"]; raw != nil {
		if err := json.Unmarshal(raw, &put); err != nil {
			return false, fmt.Errorf("the server's OpenAPI document: %w", err)
		}
	}
	checks := slices.ContainsFunc(put.Parameters, func(p parameter) bool { return p.Name == "dry_run" })
	c.checksWorking = &checks
	return checks, nil
}

// Unreachable reports whether err (from Check) says Relais could not be
// reached or could not answer right now (no answer, or 503): the
// documents are not at fault, and the same apply later may well pass.
func Unreachable(err error) bool {
	var ue *unanswered
	var ae *apiError
	return errors.As(err, &ue) || errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable
}

// Check asks the server who the token is, before any document is sent: a
// token it refuses, or a server that does not answer, is then reported
// once, as what it is, instead of as the first document's problem.
func (c *Client) Check(ctx context.Context) error {
	var who struct {
		Role string `json:"role"`
	}
	_, err := c.call(ctx, "GET", "/api/v1/whoami", nil, &who)
	c.role = who.Role
	var ae *apiError
	var ue *unanswered
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		return fmt.Errorf("RELAIS_TOKEN is refused by %s: %s (%s)", c.URL, ae.Detail, ae.Code)
	case errors.As(err, &ue):
		return fmt.Errorf("RELAIS_URL %s does not answer: %w", c.URL, ue)
	}
	return err
}

// Permitted refuses, before anything is sent, the documents the token's
// role (read by Check) may not apply: destinations are an admin's (they
// hold credentials), the rest a designer's or an admin's. Otherwise the
// first such document would stop the apply half-way, after the documents
// before it were applied.
func (c *Client) Permitted(docs []Document) []Problem {
	var ps []Problem
	for _, d := range docs {
		switch {
		case c.role == "admin" || c.role == "":
		case d.Kind == KindDestination:
			ps = append(ps, Problem{Doc: d, Pointer: "/kind", Message: fmt.Sprintf(
				"%s token may not apply destinations (they hold credentials: an admin applies them); apply this path with an admin token, or keep destinations in a folder of their own", article(c.role))})
		case c.role != "designer":
			ps = append(ps, Problem{Doc: d, Pointer: "/kind", Message: fmt.Sprintf(
				"%s token may not apply %s documents: apply with a designer or admin token", article(c.role), strings.ToLower(d.Kind))})
		}
	}
	return ps
}

// article is "a role" or "an role", as English has it.
func article(role string) string {
	if role != "" && strings.ContainsRune("aeiou", rune(role[0])) {
		return "an " + role
	}
	return "a " + role
}

// expect checks a Definition's declared revision against the one it is (or
// would become).
func (c *Client) expect(d Document, r Result, got int) (Result, error) {
	if err := asserted(d, "revision", "create", got); err != nil {
		return Result{}, err
	}
	r.revision = got
	return r, nil
}

// expectVersion checks a Process's declared version against the one it is
// (or would become), as expect does a Definition's revision.
func expectVersion(d Document, got int) error { return asserted(d, "version", "publish", got) }

// asserted refuses a document whose declared number (what: revision,
// version) is not got, the one the server has or would verb.
func asserted(d Document, what, verb string, got int) error {
	if d.ExpectRevision == 0 || d.ExpectRevision == got {
		return nil
	}
	return &apiError{Status: 0, Code: "unexpected_" + what, Detail: fmt.Sprintf("the document declares %s %d but is %s %d on the server", what, d.ExpectRevision, what, got),
		Errors: []apiFieldError{{Path: "/" + what, Message: fmt.Sprintf("declares %d, the server has or would %s %d", d.ExpectRevision, verb, got)}}}
}

// release creates a release unless it exists. planned holds the revision
// each Definition of this run is or would become.
func (c *Client) release(ctx context.Context, d Document, dryRun bool, planned map[string]int) (Result, error) {
	base := "/api/v1/definitions/" + esc(d.Definition) + "/releases"
	rev, _ := d.Body["revision"].(json.Number).Int64()
	notes, _ := d.Body["notes"].(string)
	if vs := contracts.ReleaseProblems(d.ID, notes); len(vs) > 0 {
		// Refused before anything is written, dry run included: the real
		// run applied the documents before it, then met the server's
		// refusal (designer QA).
		ae := &apiError{Status: http.StatusBadRequest, Code: "invalid_request", Detail: "the release is invalid"}
		for _, v := range vs {
			ae.Errors = append(ae.Errors, apiFieldError{Path: v.Path, Message: v.Message})
		}
		return Result{}, ae
	}
	var cur struct {
		Revision int    `json:"revision"`
		Notes    string `json:"notes"`
	}
	_, err := c.call(ctx, "GET", base+"/"+esc(d.ID), nil, &cur)
	switch {
	case err == nil && cur.Revision == int(rev) && cur.Notes == notes:
		return Result{Doc: d, Action: "unchanged", Detail: fmt.Sprintf("revision %d", rev)}, nil
	case err == nil && cur.Revision == int(rev):
		// Only the notes differ: said so, or the message reads as if the
		// revision did.
		return Result{}, &apiError{Code: "release_exists", Detail: fmt.Sprintf("release %s exists with revision %d and other notes; releases cannot be changed, notes included: restore its notes in the document, or publish a new name", d.ID, cur.Revision)}
	case err == nil:
		return Result{}, &apiError{Code: "release_exists", Detail: fmt.Sprintf("release %s exists with revision %d; releases cannot be changed: publish a new name", d.ID, cur.Revision)}
	case !isNotFound(err):
		return Result{}, err
	}
	if dryRun {
		if err := c.revisionExists(ctx, d.Definition, int(rev), planned); err != nil {
			return Result{}, err
		}
	} else if status, err := c.call(ctx, "POST", base, map[string]any{"name": d.ID, "revision": rev, "notes": notes}, nil); err != nil {
		return Result{}, atDefinition(err)
	} else if status == http.StatusOK {
		// Another run published the same release since it was read.
		return Result{Doc: d, Action: "unchanged", Detail: fmt.Sprintf("revision %d", rev)}, nil
	}
	return Result{Doc: d, Action: "created", Detail: fmt.Sprintf("revision %d", rev)}, nil
}

// revisionExists refuses, for a dry run, a release the server would refuse
// for its revision, with the server's own words. The revision a Definition
// of the same run would snapshot exists by the time its releases are
// created (definitions go first), so it is not asked for.
func (c *Client) revisionExists(ctx context.Context, key string, rev int, planned map[string]int) error {
	next, inRun := planned[key]
	if inRun && rev == next {
		return nil
	}
	base := "/api/v1/definitions/" + esc(key)
	_, err := c.call(ctx, "GET", base+"/revisions/"+strconv.Itoa(rev), nil, nil)
	if !isNotFound(err) {
		return err
	}
	latest := next
	if !inRun {
		// A definition on neither side is refused as such, as creating
		// the release is.
		var def struct {
			LatestRevision int `json:"latest_revision"`
		}
		if _, err := c.call(ctx, "GET", base, nil, &def); err != nil {
			return atDefinition(err)
		}
		latest = def.LatestRevision
	}
	have := process.Revisions(key, latest)
	return &apiError{Status: http.StatusUnprocessableEntity, Code: "unknown_revision", Detail: fmt.Sprintf("definition %q has no revision %d (%s)", key, rev, have),
		Errors: []apiFieldError{{Path: "/revision", Message: "no such revision (" + have + ")"}}}
}

// atDefinition points a release's unknown definition (the only thing a
// release's creation finds missing) at the document's `definition`
// member, whose line the problem then shows.
func atDefinition(err error) error {
	if ae, ok := err.(*apiError); ok && isNotFound(err) && len(ae.Errors) == 0 {
		ae.Errors = []apiFieldError{{Path: "/definition", Message: ae.Detail}}
	}
	return err
}

func (c *Client) process(ctx context.Context, d Document, dryRun bool, pl plan) (Result, error) {
	js, _ := json.Marshal(d.Body)
	// A document that does not parse matches no version: the server
	// refuses it with every problem (Load checks documents first, but a
	// Client may be handed any document).
	digest := ""
	var parsed *process.Process
	if p, vs := process.Parse(js); len(vs) == 0 {
		digest, parsed = p.Digest(), p
	}
	base := "/api/v1/processes/" + esc(d.ID)
	var cur struct {
		Versions []struct {
			Version int    `json:"version"`
			Digest  string `json:"digest"`
		} `json:"versions"`
	}
	_, err := c.call(ctx, "GET", base, nil, &cur)
	if err != nil && !isNotFound(err) {
		return Result{}, err
	}
	latest := 0
	for _, v := range cur.Versions {
		latest = max(latest, v.Version)
	}
	for _, v := range cur.Versions {
		if v.Digest == digest {
			if err := expectVersion(d, v.Version); err != nil {
				return Result{}, err
			}
			detail := fmt.Sprintf("version %d", v.Version)
			if latest != v.Version {
				// Publishing is idempotent by digest: an older document
				// does not become the version a start without one runs.
				detail += fmt.Sprintf("; starts without a version run version %d, the latest", latest)
			}
			return Result{Doc: d, Action: "unchanged", Detail: detail}, nil
		}
	}
	// A declared version the document would not become is refused before
	// anything is published: a version is immutable forever.
	if err := expectVersion(d, latest+1); err != nil {
		return Result{}, err
	}
	breaking := ""
	var changes []string
	var before *process.Process
	if latest > 0 && parsed != nil {
		if breaking, changes, before, err = c.sinceLatest(ctx, base, latest, parsed); err != nil {
			return Result{}, err
		}
	}
	// published is the result of the version said, with what is said of
	// every version published: what it breaks and changes, and its notes.
	published := func(version string) Result {
		// One resolver: the revisions this run makes are read from the
		// plan (evolution QA: a dry run's revision, not on the server yet,
		// was "taken as served", and its unserved note came only after the
		// real publication), the others from the server once.
		r := &planResolver{ctx: ctx, c: c, pl: pl}
		if latest == 0 {
			version += c.closeKey(ctx, "processes", d.ID, dryRun)
		}
		if before != nil && !slices.ContainsFunc(changes, func(c string) bool { return c != "description" && !strings.HasPrefix(c, "name ") }) {
			// Said, since it still makes a version (evolution QA: a
			// field's description edited read as any publication).
			version += fmt.Sprintf("; the same process as version %d: only its name or descriptions changed", latest)
		}
		return Result{Doc: d, Action: "published", Detail: version + breaking + c.unserved(ctx, parsed, r, dryRun) + futileRetries(parsed),
			Changes: changes, Since: latest, Notes: append(contracts.RaisedClassifications(js), c.notes(before, parsed, r)...)}
	}
	if dryRun {
		// The server runs every publication check without storing.
		var plan struct {
			Version int `json:"version"`
		}
		if _, err := c.call(ctx, "POST", base+"/versions?dry_run=true", d.Body, &plan); err != nil {
			rest, planned := pl.satisfied(err, parsed)
			if !planned {
				if ae, ok := err.(*apiError); ok && rest != nil {
					ae.Errors = rest // with the revision this apply makes named
				}
				return Result{}, err
			}
			// Some of what it needs is only planned in this dry run: the
			// server cannot check it yet, so this client does, against
			// the plan.
			if err := c.checkAgainstPlan(ctx, parsed, pl, rest); err != nil {
				return Result{}, err
			}
			return published(fmt.Sprintf("version %d, checked against the definitions or destinations this apply would create first", latest+1)), nil
		}
		if parsed != nil && pl.putsDestinationOf(parsed) {
			// The server judged the nodes' timeouts against its
			// destinations as they are; this run changes one first, and
			// a lowered max_timeout would refuse the publication halfway
			// through the real apply.
			if err := c.checkAgainstPlan(ctx, parsed, pl, nil); err != nil {
				return Result{}, err
			}
		}
		return published(fmt.Sprintf("version %d", plan.Version)), nil
	}
	var out struct {
		Version int `json:"version"`
	}
	if _, err := c.call(ctx, "POST", base+"/versions", d.Body, &out); err != nil {
		return Result{}, err
	}
	if err := expectVersion(d, out.Version); err != nil {
		// Another client published meanwhile: this one is published all
		// the same, under the version said.
		return Result{}, err
	}
	return published(fmt.Sprintf("version %d", out.Version)), nil
}

// notes are what is noted under a published version p, judged against
// the revisions as this apply leaves them, each read from the server
// once: the bindings that admit values their fields refuse
// (process.Looser; none when a revision cannot be read: the note is a
// courtesy), then the pins that break workers (workerBreaks).
func (c *Client) notes(before, p *process.Process, r *planResolver) []string {
	if p == nil {
		return nil
	}
	r.err = nil // a revision unserved could not read is judged again here
	notes := process.Looser(p, r)
	if r.err != nil {
		notes = nil
	}
	return append(notes, workerBreaks(before, p, r)...)
}

// futileRetries names the pull nodes of p whose retries can never run:
// a retry delay no shorter than the deadline, which ends the occurrence
// first (designer QA: such a policy published without a word). Their
// budget of attempts is one in effect.
func futileRetries(p *process.Process) string {
	if p == nil {
		return ""
	}
	var notes []string
	for _, name := range slices.Sorted(maps.Keys(p.Nodes)) {
		n := p.Nodes[name]
		pol := n.Policy
		if n.RetriesFutile() {
			notes = append(notes, fmt.Sprintf("node %s retries after %s, no sooner than its deadline (%s) ends the occurrence: no retry can run (shorten retry_delay or lengthen the deadline)",
				name, isoduration.Format(pol.RetryDelay), isoduration.Format(pol.Deadline)))
		}
		if n.CallOutlastsDeadline() {
			// The deadline cuts the call short first (push QA: it
			// published without a word).
			notes = append(notes, fmt.Sprintf("node %s's call may take %s, past its deadline (%s), which cuts it short (deadline_exceeded): lengthen the deadline or shorten the timeout",
				name, isoduration.Format(n.Timeout), isoduration.Format(pol.Deadline)))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

// unserved says, for a published version's detail, which of its pull
// nodes' revisions the live workers of their definition do not take: their
// occurrences would wait until one does (the usual slip: a process pointed
// at a new revision before the workers that take it are deployed). A
// definition no worker serves yet is not named (a first deployment, whose
// workers come next); a token that may not read the worker catalog (a
// designer's) is told the check was not made, and nothing is said when it
// cannot be read: a warning, never a refusal.
func (c *Client) unserved(ctx context.Context, p *process.Process, r *planResolver, dryRun bool) string {
	if p == nil {
		return ""
	}
	type pair struct {
		key string
		rev int
	}
	var pairs []pair
	for _, name := range slices.Sorted(maps.Keys(p.Nodes)) {
		n := p.Nodes[name]
		if n.Kind == process.KindPull && !slices.Contains(pairs, pair{n.Definition, n.Revision}) {
			pairs = append(pairs, pair{n.Definition, n.Revision})
		}
	}
	var notes []string
	grants := map[int64]consumerGrants{}
	workers := map[string][]liveWorker{} // by definition: two nodes' revisions of one read them once
	// missing says which of fields the inputs of pr lack (none when they
	// cannot be read: taken as served, rather than warn wrongly).
	missing := func(pr pair, fields []string) []string {
		w, ok := r.Revision(pr.key, pr.rev)
		if !ok {
			return nil
		}
		return w.Inputs.LacksFields(fields)
	}
	for _, pr := range pairs {
		live, read := workers[pr.key]
		if !read {
			var err error
			if live, err = c.liveWorkers(ctx, pr.key); err != nil {
				if ae, ok := err.(*apiError); ok && ae.Status == http.StatusForbidden {
					// Said, not skipped unsaid: designers run apply, and
					// this is the warning they most need (designer QA).
					return "; live workers not checked: this token may not read the worker catalog (relais apply --dry-run with an admin's token says whether a worker takes each pinned revision)"
				}
				return ""
			}
			workers[pr.key] = live
		}
		var taken []int
		var lacks []string // fields workers declare that pr's inputs lack
		served := len(live) == 0
		// ungranted lists the live workers' consumers whose grant (when
		// this token may read it) leaves pr's revision out: subscribing
		// them to it is refused until the grant names it too (a newcomer
		// started a worker on the new revision and got 403 not_granted).
		var ungranted []string
		var ungrantedIDs []int64
		for _, w := range live {
			if revs, ok := c.grantedRevisions(ctx, grants, w.Consumer.ID, pr.key); ok && !slices.Contains(revs, pr.rev) {
				// By name, as a person knows it, and id, as the grant's
				// route takes it.
				name := fmt.Sprintf("%q (id %d)", grants[w.Consumer.ID].Name, w.Consumer.ID)
				if !slices.Contains(ungranted, name) {
					ungranted = append(ungranted, name)
					ungrantedIDs = append(ungrantedIDs, w.Consumer.ID)
				}
			}
		}
		for _, w := range live {
			for _, s := range w.Subscriptions {
				if !subscriptionCovers(s.Definition, pr.key) {
					continue
				}
				revs := s.Revisions
				every := false
				if len(revs) == 0 {
					// Every revision its consumer is granted: what its
					// grant says, when this token may read it (an
					// admin's); taken as every one otherwise.
					var ok bool
					revs, ok = c.grantedRevisions(ctx, grants, w.Consumer.ID, pr.key)
					every = !ok
				}
				takes := every || slices.Contains(revs, pr.rev)
				if takes && len(s.Revisions) == 0 {
					// Naming no revision, a worker declaring fields takes
					// only the revisions whose inputs have them (listed
					// revisions were checked when it subscribed).
					if m := missing(pr, s.Fields); len(m) > 0 {
						takes = false
						for _, f := range m {
							if !slices.Contains(lacks, f) {
								lacks = append(lacks, f)
							}
						}
					}
				}
				served = served || takes
				for _, r := range revs {
					if !slices.Contains(taken, r) && (r != pr.rev || takes) {
						taken = append(taken, r)
					}
				}
			}
		}
		if served {
			continue
		}
		var why []string
		if len(taken) > 0 {
			slices.Sort(taken)
			why = append(why, "they take "+revisionList(taken))
		}
		if len(lacks) > 0 {
			why = append(why, "its inputs lack "+strings.Join(lacks, ", ")+", which a live worker declares it reads")
		}
		if len(ungranted) > 0 {
			route := fmt.Sprintf("relais consumer grant ID --grant %s=%d", pr.key, pr.rev)
			if len(ungrantedIDs) == 1 {
				route = fmt.Sprintf("relais consumer grant %d --grant %s=%d", ungrantedIDs[0], pr.key, pr.rev)
			}
			if dryRun && r.pl.made[pr.key] && r.pl.revisions[pr.key] == pr.rev {
				// Refused until the revision exists (verifier QA).
				route += ", once this apply has made it"
			}
			why = append(why, fmt.Sprintf("consumer(s) %s are not granted revision %d: add it to their grant (%s) before subscribing their workers to it", strings.Join(ungranted, ", "), pr.rev, route))
		}
		if len(why) > 0 {
			notes = append(notes, fmt.Sprintf("no live worker takes %s@%d (%s)", pr.key, pr.rev, strings.Join(why, "; ")))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ") + ": occurrences of it wait until a worker that takes it connects"
}

// liveWorker is a live worker as the catalog lists it, what unserved
// reads of it.
type liveWorker struct {
	Consumer struct {
		ID int64 `json:"id"`
	} `json:"consumer"`
	Subscriptions []struct {
		Definition string   `json:"definition"`
		Revisions  []int    `json:"revisions"`
		Fields     []string `json:"fields"`
	} `json:"subscriptions"`
}

// liveWorkers reads every page of the live workers of definition key.
func (c *Client) liveWorkers(ctx context.Context, key string) ([]liveWorker, error) {
	return ListAll[liveWorker](ctx, c, "/api/v1/definitions/"+esc(key)+"/workers")
}

// ListAll reads every page of the list at path (a GET route answering
// {items, next_cursor}), 500 items a request.
func ListAll[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var all []T
	for cursor := ""; ; {
		var page struct {
			Items      []T    `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		p := path + sep + "limit=500"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		if _, err := c.call(ctx, "GET", p, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if cursor = page.NextCursor; cursor == "" {
			return all, nil
		}
	}
}

// grant is one of a consumer's grants as the API shows it: revisions a
// list, or "all".
type grant struct {
	Definition string          `json:"definition"`
	Revisions  json.RawMessage `json:"revisions"`
}

// grantedRevisions says which revisions of key consumer id is granted,
// reading its grants once into cache: ok is false when every revision is
// (a pattern's grant, "all"), or the grants cannot be read (a token that
// may not read consumers).
func (c *Client) grantedRevisions(ctx context.Context, cache map[int64]consumerGrants, id int64, key string) (revs []int, ok bool) {
	cg, read := cache[id]
	if !read {
		if _, err := c.call(ctx, "GET", fmt.Sprintf("/api/v1/consumers/%d", id), nil, &cg); err != nil {
			cg = consumerGrants{}
		}
		cache[id] = cg
	}
	for _, g := range cg.Grants {
		if g.Definition != key {
			continue
		}
		if json.Unmarshal(g.Revisions, &revs) != nil {
			return nil, false // "all"
		}
		return revs, true
	}
	return nil, false // through a pattern: every revision
}

// closeKey notes a new definition key close to one that exists, which a
// typo makes (evolution QA: add_company_to_cmr was created without a
// word, and definitions are never deleted); "" when none is close, or the
// keys cannot be read.
func (c *Client) closeKey(ctx context.Context, collection, key string, dryRun bool) string {
	items, err := ListAll[struct {
		Key string `json:"key"`
	}](ctx, c, "/api/v1/"+collection)
	if err != nil {
		return ""
	}
	var keys []string
	for _, it := range items {
		if it.Key != key { // a process is published by then
			keys = append(keys, it.Key)
		}
	}
	meant, ok := suggest.Closest(key, keys)
	if !ok || strings.TrimRight(meant, "0123456789") == strings.TrimRight(key, "0123456789") {
		// invoice_v2 beside invoice_v1, score_company2 beside
		// score_company: numbered on purpose (verifier QA).
		return ""
	}
	what := map[string]string{"definitions": "a definition", "processes": "a process"}[collection]
	if !dryRun {
		// Said after the fact: what to do now (verifier QA).
		return fmt.Sprintf("; a new key, close to %s, which exists: if it is a typo, it is made all the same (%s is never deleted): fix the document, and try the next with --dry-run first", meant, what)
	}
	return fmt.Sprintf("; a new key, close to %s, which exists: if it is a typo, fix the document before applying (%s is never deleted)", meant, what)
}

// discardedEdits names the unsnapshotted edits of a Working (its
// changes against the latest revision) that an apply replaces.
func discardedEdits(changes []contracts.Change, dryRun bool) string {
	const named = 5
	parts := []string{"names or descriptions"} // what the diff does not list
	if len(changes) > 0 {
		parts = nil
	}
	for i, ch := range changes {
		if i == named {
			parts = append(parts, fmt.Sprintf("and %d more", len(changes)-named))
			break
		}
		parts = append(parts, ch.Path+" ("+ch.Detail+")")
	}
	verb := "discards"
	if dryRun {
		verb = "would discard"
	}
	return fmt.Sprintf("%s the Working's unsnapshotted edits, made outside this repository: %s", verb, strings.Join(parts, ", "))
}

// consumerGrants is what grantedRevisions reads of a consumer.
type consumerGrants struct {
	Name   string  `json:"name"`
	Grants []grant `json:"grants"`
}

// subscriptionCovers reports whether a worker's subscription (a key, or a
// pattern: crm.*, *) takes key.
func subscriptionCovers(sub, key string) bool {
	if prefix, ok := strings.CutSuffix(sub, "*"); ok {
		return strings.HasPrefix(key, prefix)
	}
	return sub == key
}

// revisionList writes revisions as a person reads them: "revision 1",
// "revisions 1, 2".
func revisionList(revs []int) string {
	s := make([]string, len(revs))
	for i, r := range revs {
		s[i] = strconv.Itoa(r)
	}
	if len(revs) == 1 {
		return "revision " + s[0]
	}
	return "revisions " + strings.Join(s, ", ")
}

// document reads the document of a revision or a process version.
func (c *Client) document(ctx context.Context, path string) (json.RawMessage, error) {
	var out struct {
		Document json.RawMessage `json:"document"`
	}
	_, err := c.call(ctx, "GET", path, nil, &out)
	return out.Document, err
}

// sinceLatest compares the new version with version latest. It says, for
// a detail, how the new version's inputs may refuse the starts that worked
// against it: a start without a version runs the latest, so a caller
// written for the old inputs (a field renamed, a new required one) starts
// failing the moment it is published ("" when every such start still
// fits). And it lists what the new version changes, its inputs and its
// graph (process.Changes).
func (c *Client) sinceLatest(ctx context.Context, base string, latest int, next *process.Process) (string, []string, *process.Process, error) {
	doc, err := c.document(ctx, fmt.Sprintf("%s/versions/%d", base, latest))
	if err != nil {
		return "", nil, nil, err
	}
	old, violations := process.Parse(doc)
	if len(violations) > 0 {
		return "", nil, nil, nil // a version this client cannot read
	}
	var paths []string
	changes := contracts.Diff(contracts.Working{Inputs: old.Inputs}, contracts.Working{Inputs: next.Inputs})
	lowered := contracts.LoweredProtection(changes)
	for _, ch := range changes {
		// A start is never refused for a classification: that change
		// breaks only the bindings of a process's nodes.
		if ch.BreaksProcesses && ch.Kind != contracts.ChangeClassificationChanged {
			paths = append(paths, ch.Path+" ("+ch.Detail+")")
		}
	}
	out := ""
	if len(paths) > 0 {
		out = fmt.Sprintf("; starts without a version run it from now on, and its inputs may refuse what version %d took: %s", latest, strings.Join(paths, ", "))
	}
	// As for a definition's revision (see breakingChanges).
	out += protectionNote(lowered, "inputs", "version")
	var list []string
	for _, ch := range changes {
		list = append(list, ch.Path+": "+ch.Detail)
	}
	return out, append(list, process.Changes(old, next)...), old, nil
}

// workerBreaks notes each pull node that next moves to another revision
// of its definition whose changes break the workers built for the one
// before (an output added required, an input's type changed): a worker
// that names no revision takes the new one, and fails its tasks (Go SDK
// QA: a revision's "may break workers" said nothing of the live workers
// the process would send it to). None when a revision cannot be read
// (the note is a courtesy).
func workerBreaks(before, next *process.Process, r *planResolver) []string {
	if before == nil {
		return nil
	}
	var notes []string
	for _, name := range slices.Sorted(maps.Keys(next.Nodes)) {
		n, o := next.Nodes[name], before.Nodes[name]
		if n.Kind != process.KindPull || o == nil || o.Kind != process.KindPull || o.Definition != n.Definition || o.Revision == n.Revision {
			continue
		}
		from, ok := r.Revision(n.Definition, o.Revision)
		to, ok2 := r.Revision(n.Definition, n.Revision)
		if !ok || !ok2 {
			continue
		}
		var paths []string
		for _, ch := range contracts.Diff(from, to) {
			if ch.BreaksWorkers {
				paths = append(paths, ch.Path+" ("+ch.Detail+")")
			}
		}
		if len(paths) > 0 {
			notes = append(notes, fmt.Sprintf("node %s moves from %s revision %d to %d, whose changes break workers built for revision %d: %s; a worker that names no revision (the Go SDK's Handle(%q, nil, …)), its consumer granted revision %d, takes it from now on: update the workers first, or pin them to revision %d until they are",
				name, n.Definition, o.Revision, n.Revision, o.Revision, strings.Join(paths, ", "), n.Definition, n.Revision, o.Revision))
		}
	}
	return notes
}

// protectionNote says what lowering each of lowered (as
// contracts.LoweredProtection names them) does from this revision or
// version on: to normal, values are shown and stored in clear; from secret
// to sensitive, they stay masked and sealed, but an administrator may
// reveal them (designer QA: both read "shown and stored in clear").
func protectionNote(lowered []string, fields, from string) string {
	var clear, revealable []string
	for _, l := range lowered {
		if strings.HasSuffix(l, "→ normal)") {
			clear = append(clear, l)
		} else {
			revealable = append(revealable, l)
		}
	}
	out := ""
	if len(clear) > 0 {
		out += "; LOWERS PROTECTION of " + strings.Join(clear, ", ") + ": values of these " + fields + " are shown and stored in clear from this " + from + " on"
	}
	if len(revealable) > 0 {
		out += "; LOWERS PROTECTION of " + strings.Join(revealable, ", ") + ": values of these " + fields + " stay masked and encrypted, but an administrator may reveal them from this " + from + " on"
	}
	return out
}

// satisfied splits a dry-run refusal of a process between the problems
// this run's plan answers (a definition revision or a destination that
// does not exist yet, but that a document before it creates) and the
// rest. planned is whether the plan answers any: only then is the process
// checked again against it.
func (pl plan) satisfied(err error, p *process.Process) (rest []apiFieldError, planned bool) {
	ae, ok := err.(*apiError)
	if !ok || ae.Code != "invalid_process" || p == nil {
		return nil, false
	}
	for _, e := range ae.Errors {
		if pl.answers(e, p) {
			planned = true
			continue
		}
		n, member, ok := nodeAt(e.Path, p)
		switch {
		case ok && member == "revision":
			if rev, ok := pl.revisions[n.Definition]; ok && pl.made[n.Definition] {
				// The server names the revisions it has: say the one
				// this apply makes too (not one it only finds unchanged).
				e.Message += fmt.Sprintf("; this apply makes revision %d", rev)
			}
		case ok && !strings.Contains(e.Message, "("):
			// The server guessed among what it has, and found nothing:
			// a typo of a key or a name this apply creates is guessed
			// here (designer QA: suppliers.aprove went unguessed while
			// suppliers.approve was in the same folder).
			switch member {
			case "definition":
				e.Message += suggest.Hint(n.Definition, slices.Sorted(maps.Keys(pl.revisions)))
			case "destination":
				e.Message += suggest.Hint(n.Destination, slices.Sorted(maps.Keys(pl.destinations)))
			}
		}
		rest = append(rest, e)
	}
	return rest, planned
}

// putsDestinationOf reports whether the plan puts a destination one of
// p's nodes calls.
func (pl plan) putsDestinationOf(p *process.Process) bool {
	for _, n := range p.Nodes {
		if _, ok := pl.destinations[n.Destination]; ok && n.Destination != "" {
			return true
		}
	}
	return false
}

// nodeAt is the node a problem's pointer is about, and the member of it
// the pointer names (/nodes/NAME/MEMBER; "" for one deeper or at the node).
func nodeAt(path string, p *process.Process) (n *process.Node, member string, ok bool) {
	parts := strings.Split(path, "/")
	if len(parts) < 3 || parts[0] != "" || parts[1] != "nodes" {
		return nil, "", false
	}
	if len(parts) == 4 {
		member = parts[3]
	}
	n, ok = p.Nodes[parts[2]]
	return n, member, ok
}

// answers reports whether e is a node's reference to what the plan
// creates or changes: its pinned revision (at /revision, or /definition
// for a definition the server does not have), its destination, or its
// timeout against a destination the plan puts.
func (pl plan) answers(e apiFieldError, p *process.Process) bool {
	n, member, ok := nodeAt(e.Path, p)
	if !ok {
		return false
	}
	switch member {
	case "definition", "revision":
		rev, ok := pl.revisions[n.Definition]
		return ok && rev == n.Revision && strings.HasPrefix(e.Message, "unknown definition revision ")
	case "destination":
		_, ok := pl.destinations[n.Destination]
		return ok && strings.HasPrefix(e.Message, "unknown destination ")
	case "timeout":
		// Judged against the destination's max_timeout as it is, where
		// this run changes it first (raised with the node's timeout).
		_, ok := pl.destinations[n.Destination]
		return ok && strings.Contains(e.Message, "max_timeout")
	}
	return false
}

// checkAgainstPlan checks p as the server would, with the revisions and
// destinations this run creates first, and refuses it with every problem:
// the server's own (rest) in its words, then those only the plan shows.
// Limits are left to the server, which judged them already: none depends
// on a revision.
func (c *Client) checkAgainstPlan(ctx context.Context, p *process.Process, pl plan, rest []apiFieldError) error {
	r := &planResolver{ctx: ctx, c: c, pl: pl}
	vs := process.Check(p, r, process.Limits{})
	if r.err != nil {
		return r.err
	}
	problems := slices.Clone(rest)
	for _, v := range vs {
		if strings.HasPrefix(v.Message, "default timeout ") {
			// The server's RELAIS_PUSH_DEFAULT_TIMEOUT is not this
			// client's to know: the server judges it when it publishes.
			continue
		}
		if !slices.ContainsFunc(problems, func(e apiFieldError) bool { return e.Path == v.Path }) {
			problems = append(problems, apiFieldError{Path: v.Path, Message: v.Message})
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.SortStableFunc(problems, func(a, b apiFieldError) int { return strings.Compare(a.Path, b.Path) })
	return &apiError{Status: http.StatusUnprocessableEntity, Code: "invalid_process",
		Detail: fmt.Sprintf("the process is invalid against what this apply would create: %d problem(s)", len(problems)), Errors: problems}
}

// planResolver resolves a process's references as they will be once the
// plan is applied: a revision the plan creates from its document, any
// other from the server.
type planResolver struct {
	ctx context.Context
	c   *Client
	pl  plan
	err error // the first failure to read the server
	// read holds the revisions read from the server: Looser asks again
	// for each binding from an earlier node's outputs.
	read map[revisionRef]contracts.Working
}

// revisionRef names a definition's revision.
type revisionRef struct {
	key string
	n   int
}

func (r *planResolver) Revision(key string, n int) (contracts.Working, bool) {
	if rev, ok := r.pl.revisions[key]; ok && rev == n {
		if w, ok := r.pl.workings[key]; ok {
			return w, true
		}
	}
	if w, ok := r.read[revisionRef{key, n}]; ok {
		return w, true
	}
	w, ok := r.fetch(key, n)
	if ok {
		if r.read == nil {
			r.read = map[revisionRef]contracts.Working{}
		}
		r.read[revisionRef{key, n}] = w
	}
	return w, ok
}

// fetch reads revision n of key from the server.
func (r *planResolver) fetch(key string, n int) (contracts.Working, bool) {
	doc, err := r.c.document(r.ctx, "/api/v1/definitions/"+esc(key)+"/revisions/"+strconv.Itoa(n))
	if err != nil {
		if !isNotFound(err) && r.err == nil {
			r.err = err
		}
		return contracts.Working{}, false
	}
	w, vs := contracts.ParseWorking(doc)
	if len(vs) > 0 {
		if r.err == nil {
			r.err = fmt.Errorf("revision %d of %s: this client cannot read it (%s)", n, key, vs[0].Message)
		}
		return contracts.Working{}, false
	}
	return w, true
}

func (r *planResolver) Destination(name string) (time.Duration, bool) {
	if t, ok := r.pl.destinations[name]; ok {
		return t, true
	}
	// Not in the plan: the server refused only what the plan creates, so
	// it found this one, and judged the node's timeout against it.
	return process.HardMaxPushTimeout, true
}
