package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/queries"
)

// Destination is an admin-registered push endpoint. Header values and the
// URL's query values are stored sealed and never returned: only header
// names are, and the URL with each query value masked
// (https://x.example/hook?token=***).
type Destination struct {
	Name        string
	URL         string
	HeaderNames []string
	// Signed says whether its calls carry Relais-Signature (its secret
	// is never shown).
	Signed     bool
	MaxTimeout time.Duration
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

var destinationNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// IsDestinationName reports whether name is of the destinations' grammar:
// anything else names no destination (a list's mangled cursor).
func IsDestinationName(name string) bool { return destinationNamePattern.MatchString(name) }

// reservedHeaders are set by Relais on every push call (push/runner.go),
// or by the HTTP transport; a destination may not override them: its value
// would be dropped without a word.
var reservedHeaders = map[string]bool{"Content-Type": true, "Content-Length": true, "Idempotency-Key": true, "Host": true,
	"Relais-Attempt": true, "Relais-Signature": true,
	"Accept": true, "User-Agent": true,
	// Relais asks for gzip, and decodes it (push QA).
	"Accept-Encoding": true,
	// The body Relais sends is never encoded: a destination that honoured
	// it would refuse or garble every call (verifier QA).
	"Content-Encoding": true,
	"Connection":       true, "Transfer-Encoding": true, "Te": true, "Upgrade": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true}

func destinationFromRow(row queries.Destination) Destination {
	names := append([]string{}, row.HeaderNames...)
	u := row.Url
	if row.SealedUrlQuery == nil {
		// Saved before queries were sealed: masked when shown all the same.
		if rest, query := splitQuery(u); query != "" {
			u = withQuery(rest, maskQuery(query))
		}
	}
	return Destination{Name: row.Name, URL: u, HeaderNames: names, Signed: row.SealedSigningSecret != nil, MaxTimeout: row.MaxTimeout,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
}

func aadDestinationHeaders(name string) string { return "destination/" + name + "/headers" }

func aadDestinationQuery(name string) string { return "destination/" + name + "/url-query" }

func aadDestinationSigning(name string) string { return "destination/" + name + "/signing-secret" }

// maskedQuery is what stands for a sealed query value.
const maskedQuery = "***"

// splitQuery cuts a URL's query out of it: the URL without the query
// (fragment kept) and the query, "" when there is none. It works on the
// text as given, so that putting the two back together is exact.
func splitQuery(rawURL string) (rest, query string) {
	q := strings.IndexByte(rawURL, '?')
	if q < 0 || strings.IndexByte(rawURL[:q], '#') >= 0 {
		return rawURL, ""
	}
	query = rawURL[q+1:]
	frag := ""
	if f := strings.IndexByte(query, '#'); f >= 0 {
		query, frag = query[:f], query[f:]
	}
	return rawURL[:q] + frag, query
}

// withQuery puts a query back into a URL that splitQuery cut it from; ""
// leaves the URL as it is.
func withQuery(rest, query string) string {
	if query == "" {
		return rest
	}
	frag := ""
	if f := strings.IndexByte(rest, '#'); f >= 0 {
		rest, frag = rest[:f], rest[f:]
	}
	return rest + "?" + query + frag
}

// maskQuery keeps a query's parameter names and masks every value (a
// parameter without "=" is all value); an empty value stays empty, so
// that no secret is shown where there is none.
func maskQuery(query string) string {
	parts := strings.Split(query, "&")
	for i, p := range parts {
		name, v, ok := strings.Cut(p, "=")
		switch {
		case ok && v != "":
			parts[i] = name + "=" + maskedQuery
		case !ok && p != "":
			parts[i] = maskedQuery
		}
	}
	return strings.Join(parts, "&")
}

// minScrubbed is the shortest header or query value scrubbed from what a
// destination says back: shorter ones are no credential, and scrubbing
// them would garble every message.
const minScrubbed = 4

// querySecrets lists a query's values, as sent and decoded, for scrubbing
// what a destination says back. Values under minScrubbed bytes are left
// out.
func querySecrets(query string) []string {
	var out []string
	for p := range strings.SplitSeq(query, "&") {
		_, v, ok := strings.Cut(p, "=")
		if !ok {
			v = p
		}
		if len(v) >= minScrubbed {
			out = append(out, v)
			if d, err := url.QueryUnescape(v); err == nil && d != v {
				out = append(out, d)
			}
		}
	}
	return out
}

// Change says what a put did (or, in a dry run, would do).
type Change string

// Changes.
const (
	Created   Change = "created"
	Updated   Change = "updated"
	Unchanged Change = "unchanged"
)

// DestinationSpec is a destination as an administrator puts it: the URL and
// header values in clear, before they are sealed.
type DestinationSpec struct {
	Name       string
	URL        string
	Headers    map[string]string
	MaxTimeout time.Duration
	// SigningSecret, when set, signs every call (Relais-Signature).
	SigningSecret string
}

// validDestination is a spec that passed validate, with its header names
// canonical and its URL split from its query (sealed apart).
type validDestination struct {
	DestinationSpec
	headers map[string]string // canonical names
	names   []string          // sorted
	rest    string            // the URL without its query
	query   string
}

// validPort reports whether a URL's port (empty: the scheme's) is one a
// call can use.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// validate reports every problem of s at once, with its pointer.
func (s DestinationSpec) validate() (validDestination, error) {
	if !destinationNamePattern.MatchString(s.Name) {
		return validDestination{}, fault.New(fault.BadRequest, "invalid_name", "destination name %q must match %s", s.Name, destinationNamePattern)
	}
	var errs []fault.FieldError
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		errs = append(errs, fault.FieldError{Path: "/url", Message: "is required"})
	case len(s.URL) > MaxDestinationURL:
		errs = append(errs, tooLong("/url", MaxDestinationURL))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, fault.FieldError{Path: "/url", Message: "must be an absolute http or https URL"})
	case u.User != nil:
		errs = append(errs, fault.FieldError{Path: "/url", Message: "must not carry credentials; use headers (stored encrypted)"})
	case !validPort(u.Port()):
		errs = append(errs, fault.FieldError{Path: "/url", Message: "has a port outside 1 to 65535"})
	case strings.Contains(s.URL, "#"):
		// Never sent: a fragment would only be a surprise, stored in
		// clear (a token someone put there, say).
		errs = append(errs, fault.FieldError{Path: "/url", Message: "must not have a fragment (#…): it is never sent"})
	}
	switch {
	case s.MaxTimeout <= 0:
		errs = append(errs, fault.FieldError{Path: "/max_timeout", Message: "is required and must be above zero"})
	case s.MaxTimeout < process.MinPushTimeout:
		errs = append(errs, fault.FieldError{Path: "/max_timeout", Message: "must be at least " + formatDuration(process.MinPushTimeout) + ": no call could answer in time"})
	case s.MaxTimeout > process.HardMaxPushTimeout:
		errs = append(errs, fault.FieldError{Path: "/max_timeout", Message: "must be at most " + formatDuration(process.HardMaxPushTimeout)})
	}
	switch n := len(s.SigningSecret); {
	case n > 0 && (n < MinSigningSecret || n > MaxSigningSecret):
		// Its length is a rule of the field, not of the value: saying it
		// tells nothing a caller did not send.
		errs = append(errs, fault.FieldError{Path: "/signing_secret", Message: fmt.Sprintf("must be %d to %d bytes (make one with: head -c32 /dev/urandom | base64)", MinSigningSecret, MaxSigningSecret)})
	case n > 0 && strings.TrimSpace(s.SigningSecret) != s.SigningSecret:
		// A secret file's trailing newline, most likely: the destination,
		// keyed with the secret as it knows it, would refuse every call.
		errs = append(errs, fault.FieldError{Path: "/signing_secret", Message: "must not begin or end with white space (a secret file's trailing newline?): the HMAC is keyed by its bytes exactly as given"})
	}
	if len(s.Headers) > MaxDestinationHdrs {
		errs = append(errs, fault.FieldError{Path: "/headers", Message: fmt.Sprintf("holds more than %d headers", MaxDestinationHdrs)})
	}
	v := validDestination{DestinationSpec: s, headers: make(map[string]string, len(s.Headers)), names: make([]string, 0, len(s.Headers))}
	// In order, so that of two spellings of one name the same is refused
	// every time.
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		val := s.Headers[k]
		ck := textproto.CanonicalMIMEHeaderKey(k)
		switch {
		case len(k) > MaxHeaderName:
			errs = append(errs, fault.FieldError{Path: jsontree.Pointer("/headers", k), Message: fmt.Sprintf("is a header name longer than %d bytes", MaxHeaderName)})
		case len(val) > MaxHeaderValue:
			errs = append(errs, tooLong(jsontree.Pointer("/headers", k), MaxHeaderValue))
		case !validHeaderName(k):
			errs = append(errs, fault.FieldError{Path: jsontree.Pointer("/headers", k), Message: "is not a valid header name"})
		case reservedHeaders[ck]:
			errs = append(errs, fault.FieldError{Path: jsontree.Pointer("/headers", k), Message: "is set by Relais and cannot be configured"})
		case strings.IndexFunc(val, headerControl) >= 0:
			// net/http refuses to send them: every call would fail
			// connection_failed. The character is named, never the value
			// (a credential).
			c := val[strings.IndexFunc(val, headerControl)]
			errs = append(errs, fault.FieldError{Path: jsontree.Pointer("/headers", k),
				Message: fmt.Sprintf("value holds the control character U+%04X, which HTTP cannot send (line breaks included)", c)})
		case slices.Contains(v.names, ck):
			errs = append(errs, fault.FieldError{Path: jsontree.Pointer("/headers", k),
				Message: fmt.Sprintf("is the header %s again (header names are case-insensitive); one value each", ck)})
		default:
			v.headers[ck] = val
			v.names = append(v.names, ck)
		}
	}
	if len(errs) > 0 {
		return validDestination{}, fault.New(fault.BadRequest, "invalid_destination", "the destination is invalid").WithErrors(errs)
	}
	sort.Strings(v.names)
	v.rest, v.query = splitQuery(s.URL)
	return v, nil
}

// headerControl reports the characters a header value cannot carry: the
// control characters but tab (RFC 9110 §5.5).
func headerControl(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }

// shown is the destination as stored and shown: the query's values masked
// (they are sealed apart).
func (v validDestination) shown() Destination {
	u := v.URL
	if v.query != "" {
		u = withQuery(v.rest, maskQuery(v.query))
	}
	return Destination{Name: v.Name, URL: u, HeaderNames: v.names, Signed: v.SigningSecret != "", MaxTimeout: v.MaxTimeout}
}

// PutDestination creates or replaces a destination. An identical
// destination (header and query values included) is left untouched and
// reported Unchanged, so `relais apply` is idempotent; dryRun reports
// without writing. Reading, comparing and writing are one transaction
// holding the name's lock, so concurrent puts of one destination report
// what each did.
func (e *Engine) PutDestination(ctx context.Context, spec DestinationSpec, dryRun bool) (Destination, Change, error) {
	v, err := spec.validate()
	if err != nil {
		return Destination{}, "", err
	}
	sealing := len(v.headers) > 0 || v.query != "" || v.SigningSecret != ""
	if sealing && e.keys == nil {
		return Destination{}, "", fault.New(fault.Unavailable, "encryption_unavailable", "header values, URL query values and signing secrets are stored encrypted but no data key is configured")
	}
	var out Destination
	var change Change
	err = e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		if err := q.DestinationLockName(ctx, v.Name); err != nil {
			return err
		}
		row, err := q.DestinationGet(ctx, v.Name)
		switch {
		case isNoRows(err):
			change = Created
		case err != nil:
			return err
		default:
			current, err := e.openDestination(row)
			if err != nil {
				return err
			}
			out, change = destinationFromRow(row), Updated
			if current.URL == v.URL && row.MaxTimeout == v.MaxTimeout && maps.Equal(current.Headers, v.headers) && current.SigningSecret == v.SigningSecret {
				change = Unchanged
				return nil
			}
		}
		if sealing {
			// Before the dry run's answer: a put this replica cannot seal
			// is refused by the dry run too.
			if err := e.sealable(); err != nil {
				return err
			}
		}
		if dryRun {
			// What the put would store, so that a dry run shows a header
			// the new spec drops or a changed URL, not what is stored now.
			shown := v.shown()
			// At PostgreSQL's precision, as a stored put's times are (API
			// client QA: nanoseconds in the dry run only).
			now := e.Now().Truncate(time.Microsecond)
			shown.CreatedAt, shown.UpdatedAt = now, now
			if change == Updated {
				shown.CreatedAt = out.CreatedAt
			}
			out = shown
			return nil
		}
		var sealed, sealedQuery []byte
		if len(v.headers) > 0 {
			plain, _ := json.Marshal(v.headers)
			sealed = e.keys.Seal(plain, []byte(aadDestinationHeaders(v.Name)))
		}
		if v.query != "" {
			sealedQuery = e.keys.Seal([]byte(v.query), []byte(aadDestinationQuery(v.Name)))
		}
		var sealedSecret []byte
		if v.SigningSecret != "" {
			sealedSecret = e.keys.Seal([]byte(v.SigningSecret), []byte(aadDestinationSigning(v.Name)))
		}
		written, err := q.DestinationUpsert(ctx, queries.DestinationUpsertParams{Name: v.Name, Url: v.shown().URL, SealedUrlQuery: sealedQuery,
			HeaderNames: v.names, SealedHeaders: sealed, MaxTimeout: v.MaxTimeout, SealedSigningSecret: sealedSecret})
		if err != nil {
			return err
		}
		out = destinationFromRow(queries.Destination{Name: written.Name, Url: written.Url, HeaderNames: written.HeaderNames, SealedUrlQuery: written.SealedUrlQuery,
			MaxTimeout: written.MaxTimeout, CreatedAt: written.CreatedAt, UpdatedAt: written.UpdatedAt, SealedSigningSecret: written.SealedSigningSecret})
		return nil
	})
	if err != nil {
		return Destination{}, "", wrap("put destination", err)
	}
	if !dryRun && change != Unchanged {
		// The URL's scheme and host only (a webhook's path may be its
		// secret) and the header names, never their values.
		e.logAccess(ctx, EventDestinationPut, "destination", out.Name, "change", string(change), "host", urlHost(out.URL), "headers", out.HeaderNames,
			"signed", out.Signed)
	}
	return out, change, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// GetDestination returns one destination (header names only).
func (e *Engine) GetDestination(ctx context.Context, name string) (Destination, error) {
	row, err := e.q.DestinationGet(ctx, name)
	if isNoRows(err) {
		return Destination{}, notFound("destination %q", name)
	}
	if err != nil {
		return Destination{}, wrap("get destination", err)
	}
	return destinationFromRow(row), nil
}

// ListDestinations returns up to limit destinations by name, those named
// after after ("" for the first).
func (e *Engine) ListDestinations(ctx context.Context, after string, limit int) ([]Destination, error) {
	rows, err := e.q.DestinationList(ctx, queries.DestinationListParams{After: after, Max: int32(limit)})
	if err != nil {
		return nil, wrap("list destinations", err)
	}
	out := make([]Destination, len(rows))
	for i, r := range rows {
		out[i] = destinationFromRow(r)
	}
	return out, nil
}

// CappedTimeout is a published push node whose timeout is above its
// destination's max_timeout: its calls are cut at the destination's cap.
type CappedTimeout struct {
	ProcessKey string
	Version    int
	Node       string
	// Timeout is the node's budget, the replica's default for a node that
	// names none.
	Timeout time.Duration
}

// PushTimeoutsAbove returns the published push nodes calling destination
// whose timeout exceeds ceiling: a max_timeout lowered after they were
// published cuts their calls short (push QA: the PUT said nothing).
func (e *Engine) PushTimeoutsAbove(ctx context.Context, destination string, ceiling time.Duration) ([]CappedTimeout, error) {
	rows, err := e.q.PushNodesOfDestination(ctx, destination)
	if err != nil {
		return nil, wrap("push nodes of destination", err)
	}
	var out []CappedTimeout
	for _, r := range rows {
		n := process.Node{}
		if r.Timeout != "" {
			// Published, so it parsed then; a document that no longer
			// parses is no reason to refuse the put.
			if n.Timeout, err = isoduration.Parse(r.Timeout); err != nil {
				continue
			}
		}
		if t := n.PushTimeout(e.processLimits()); t > ceiling {
			out = append(out, CappedTimeout{ProcessKey: r.ProcessKey, Version: int(r.Version), Node: r.Node, Timeout: t})
		}
	}
	return out, nil
}

// DeleteDestination removes a destination no published process version
// uses (destination_in_use otherwise: versions are immutable, so a used
// destination must stay).
//
// The row is deleted first and the usage checked after, in one
// transaction: a publication holds the destinations it relies on FOR
// SHARE until it commits, so the delete waits for it, and the check, a
// later statement, then sees the version it committed and rolls the
// delete back. Checking first would let a version commit between the
// check and the delete.
func (e *Engine) DeleteDestination(ctx context.Context, name string) error {
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		n, err := q.DestinationDelete(ctx, name)
		if err != nil {
			return err
		}
		if n == 0 {
			return notFound("destination %q", name)
		}
		users, err := q.ProcessVersionsUsingDestination(ctx, name)
		if err != nil {
			return err
		}
		if len(users) == 0 {
			return nil
		}
		// Name them: which process to change is what the admin needs next.
		named := make([]string, 0, 3)
		for _, u := range users[:min(len(users), 3)] {
			named = append(named, fmt.Sprintf("%s version %d", u.ProcessKey, u.Version))
		}
		list := strings.Join(named, ", ")
		if len(users) > 3 {
			list += " and more"
		}
		return fault.New(fault.Conflict, "destination_in_use",
			"destination %q is used by published process versions (%s), which never change: change its URL or headers instead", name, list)
	})
	if err != nil {
		return wrap("delete destination", err)
	}
	e.logAccess(ctx, EventDestinationDeleted, "destination", name)
	return nil
}

// destinationTarget is what a push call needs of its destination.
type destinationTarget struct {
	URL     string            // in clear, query included
	Headers map[string]string // in clear: a delivery to an authorized destination
	// Secrets are the header and query values and the signing secret,
	// which the destination's answers are scrubbed of.
	Secrets []string
	// SigningSecret signs each call; "" for a destination that does not.
	SigningSecret string
	// MaxTimeout is the destination's cap as it is now: an administrator
	// may have lowered it since a version using it was published.
	MaxTimeout time.Duration
}

// destinationCall reads the destination a push call goes to.
//
// It reads through q, which may be a transaction's.
func (e *Engine) destinationCall(ctx context.Context, q *queries.Queries, name string) (destinationTarget, error) {
	row, err := q.DestinationGet(ctx, name)
	if isNoRows(err) {
		return destinationTarget{}, fmt.Errorf("destination %q no longer exists", name)
	}
	if err != nil {
		return destinationTarget{}, err
	}
	return e.openDestination(row)
}

// openDestination opens what row seals: its header values, URL query and
// signing secret.
func (e *Engine) openDestination(row queries.Destination) (destinationTarget, error) {
	name := row.Name
	// open opens one sealed value of the destination; none stays nil.
	open := func(sealed []byte, aad, what string) ([]byte, error) {
		if len(sealed) == 0 {
			return nil, nil
		}
		if e.keys == nil {
			return nil, fmt.Errorf("destination %q %s is sealed but no data key is configured", name, what)
		}
		return e.keys.Open(sealed, []byte(aad))
	}
	headers := map[string]string{}
	plain, err := open(row.SealedHeaders, aadDestinationHeaders(name), "headers")
	if err != nil {
		return destinationTarget{}, err
	}
	if len(plain) > 0 {
		if err := json.Unmarshal(plain, &headers); err != nil {
			return destinationTarget{}, err
		}
	}
	t := destinationTarget{URL: row.Url, Headers: headers, MaxTimeout: row.MaxTimeout}
	for _, v := range headers {
		// As query values: a version or a flag ("2", "on") is no
		// credential, and scrubbing it garbled every answer (push QA).
		if len(v) >= minScrubbed {
			t.Secrets = append(t.Secrets, v)
		}
	}
	query, err := open(row.SealedUrlQuery, aadDestinationQuery(name), "URL query")
	if err != nil {
		return destinationTarget{}, err
	}
	if query != nil {
		rest, _ := splitQuery(row.Url)
		t.URL = withQuery(rest, string(query))
	}
	secret, err := open(row.SealedSigningSecret, aadDestinationSigning(name), "signing secret")
	if err != nil {
		return destinationTarget{}, err
	}
	if secret != nil {
		t.SigningSecret = string(secret)
		t.Secrets = append(t.Secrets, t.SigningSecret)
	}
	rest, q := splitQuery(t.URL)
	t.Secrets = append(t.Secrets, querySecrets(q)...)
	t.Secrets = append(t.Secrets, pathSecrets(rest)...)
	return t, nil
}

// minPathSecret is the length from which a URL path segment is taken for
// a credential: webhooks carry theirs in the path (Slack's 24 characters,
// Discord's 68, Teams's GUIDs), where words such as "score" or "webhooks"
// are not worth scrubbing from every message.
const minPathSecret = 16

// pathSecrets lists the segments of rawURL's path of minPathSecret bytes
// or more, as sent and decoded, for scrubbing what a destination says back
// (one echoing its URL in an error would otherwise hand the credential to
// operators).
func pathSecrets(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	var out []string
	for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
		if len(seg) < minPathSecret {
			continue
		}
		out = append(out, seg)
		if d, err := url.PathUnescape(seg); err == nil && d != seg {
			out = append(out, d)
		}
	}
	return out
}

// urlHost is raw's scheme and host ("https://hooks.example"), what the
// access log may show of a destination's URL.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
