package canary_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/relaistest"
)

// ------------------------------------------------------------------ corpus

// Where a corpus item was collected.
const (
	kindAPI     = "api"
	kindConsole = "console"
	kindLogs    = "logs"
	kindMetrics = "metrics"
	kindDB      = "db"
	kindPull    = "pull-answer" // answers to settlements (never the fetch: that is a delivery)
)

// item is one collected observation, with a label naming where it came from.
type item struct {
	kind, label, text string
}

// corpus is everything an observer (operator, admin, log reader, metrics
// scraper, anyone with a database dump) can see.
type corpus struct {
	items []item
}

func (c *corpus) add(kind, label, text string) {
	if kind == kindConsole {
		// The console breaks long codes and keys with <wbr> after their
		// separators: a value split so must still be found, a leaked one
		// above all.
		text = strings.ReplaceAll(text, "<wbr>", "")
	}
	c.items = append(c.items, item{kind: kind, label: label, text: text})
}

// size is the number of bytes collected, for the test's log.
func (c *corpus) size() (n int) {
	for _, it := range c.items {
		n += len(it.text)
	}
	return n
}

// excerpt shows the text around text[at:at+n].
func excerpt(text string, at, n int) string {
	from, to := max(at-60, 0), min(at+n+60, len(text))
	return fmt.Sprintf("%q", text[from:to])
}

// forbidden is a protected value and the strings that betray it.
type forbidden struct {
	name string
	// needles are exact substrings that must not occur.
	needles []string
	// prefixOf, when set, is a value no prefix of which (of at least
	// minPrefix bytes) may occur.
	prefixOf  string
	minPrefix int
}

// secretNeedles: the value, its distinctive body (without the shared
// "CANARY-" lead), the encodings a byte dump could show it in, and every
// prefix that reaches 6 characters past the lead.
func secretNeedles(name, v string) forbidden {
	return forbidden{name: name, needles: append(encodings(v), strings.TrimPrefix(v, canaryLead)),
		prefixOf: v, minPrefix: len(canaryLead) + 6}
}

func sensitiveNeedles(name, v string) forbidden {
	return forbidden{name: name, needles: append(encodings(v), strings.TrimPrefix(v, canaryLead))}
}

// tokenNeedles: a credential must not show in full, nor its first half.
func tokenNeedles(name, v string) forbidden {
	return forbidden{name: name, needles: []string{v}, prefixOf: v, minPrefix: max(len(v)/2, 8)}
}

// encodings are v and the forms a dump of bytes or a careless encoder
// could show it in.
func encodings(v string) []string {
	b := []byte(v)
	return []string{v, hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b)),
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b)}
}

// find returns the first needle of f found in text (the longest prefix for
// prefixOf), where, and its length.
func (f forbidden) find(text string) (needle string, at int, ok bool) {
	for _, n := range f.needles {
		if i := strings.Index(text, n); i >= 0 {
			return n, i, true
		}
	}
	if f.prefixOf != "" {
		for l := len(f.prefixOf); l >= f.minPrefix; l-- {
			if i := strings.Index(text, f.prefixOf[:l]); i >= 0 {
				return f.prefixOf[:l], i, true
			}
		}
	}
	return "", 0, false
}

// assertAbsent fails once per (item, protected value) found. A hit
// inside a longer hit of another value (the shared "CANARY-SECRET-" lead of
// a leaked header is a prefix of every secret) is not reported again.
func (c *corpus) assertAbsent(t *testing.T, fs []forbidden) {
	t.Helper()
	type hit struct {
		f      forbidden
		needle string
		at     int
	}
	total := 0
	for _, it := range c.items {
		var hits []hit
		for _, f := range fs {
			if n, at, ok := f.find(it.text); ok {
				hits = append(hits, hit{f, n, at})
			}
		}
		sort.SliceStable(hits, func(i, j int) bool { return len(hits[i].needle) > len(hits[j].needle) })
		var shown []hit
	next:
		for _, h := range hits {
			for _, s := range shown {
				if h.at >= s.at && h.at+len(h.needle) <= s.at+len(s.needle) {
					continue next
				}
			}
			shown = append(shown, h)
			total++
			t.Errorf("LEAK of %s in [%s] %s: found %q at byte %d: …%s…", h.f.name, it.kind, it.label, h.needle, h.at, excerpt(it.text, h.at, len(h.needle)))
		}
	}
	if total > 0 {
		t.Logf("%d leaks in %d corpus items", total, len(c.items))
	}
}

// assertPresent fails unless some item of kind holds want: the collection
// is real, not an empty corpus that trivially holds no canary.
func (c *corpus) assertPresent(t *testing.T, kind, want string) {
	t.Helper()
	for _, it := range c.items {
		if it.kind == kind && strings.Contains(it.text, want) {
			return
		}
	}
	t.Errorf("sanity: no %s item contains the normal value %q (the collection missed something)", kind, want)
}

// ---------------------------------------------------------------- waiting

// ------------------------------------------------------------ destination

// received is one request a destination got: a delivery.
type received struct {
	header http.Header
	body   []byte
}

// destination is a local push target that records what it receives (under
// a lock: the push runner calls it from its own goroutines).
type destination struct {
	URL string
	mu  sync.Mutex
	got []received
}

func newDestination(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *destination {
	t.Helper()
	d := &destination{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.got = append(d.got, received{header: r.Header.Clone(), body: body})
		d.mu.Unlock()
		h(w, r, body)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL
	return d
}

func (d *destination) requests() []received {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]received(nil), d.got...)
}

// ---------------------------------------------------------------- console

// browser calls the console like a browser without JavaScript: a cookie
// jar, forms, and no automatic redirects.
type browser struct {
	t      *testing.T
	base   string
	lang   string
	client *http.Client
}

func newBrowser(t *testing.T, base, lang string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if lang == "fr" {
		// French through the switcher's cookie, English through
		// Accept-Language.
		u, _ := url.Parse(base + "/console/")
		jar.SetCookies(u, []*http.Cookie{{Name: "lang", Value: "fr", Path: "/console"}})
	}
	return &browser{t: t, base: base, lang: lang, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values) (int, http.Header, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.lang == "en" {
		req.Header.Set("Accept-Language", "en-GB,en;q=0.9")
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(data)
}

// signIn fills the sign-in form (double-submit CSRF cookie) with token and
// returns the sign-in page it read first.
func (b *browser) signIn(token string) string {
	b.t.Helper()
	status, _, page := b.do("GET", "/console/sign-in", nil)
	if status != 200 {
		b.t.Fatalf("GET /console/sign-in: %d", status)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
	if err != nil {
		b.t.Fatal(err)
	}
	csrf, _ := doc.Find(`form input[name=csrf]`).First().Attr("value")
	if csrf == "" {
		b.t.Fatal("sign-in form without CSRF token")
	}
	status, h, body := b.do("POST", "/console/sign-in", url.Values{"csrf": {csrf}, "token": {token}})
	if status != http.StatusSeeOther || h.Get("Location") != "/console/occurrences" {
		b.t.Fatalf("sign-in: %d to %q; body %.300s", status, h.Get("Location"), body)
	}
	return page
}

// -------------------------------------------------------------- database

// dumpTables adds every row of every table of the schema, as text, to c;
// and, for each bytea column, its values in PostgreSQL's escape encoding
// (where stored plaintext would show raw, unlike the row's hex form).
func dumpTables(t *testing.T, env *relaistest.Env, c *corpus) (tables int) {
	t.Helper()
	ctx := context.Background()
	names := queryStrings(t, env, `select table_name::text from information_schema.tables
		where table_schema = current_schema() and table_type = 'BASE TABLE' order by 1`)
	for _, name := range names {
		ident := pgx.Identifier{name}.Sanitize()
		rows := queryStrings(t, env, `select t::text from `+ident+` t`)
		c.add(kindDB, fmt.Sprintf("table %s (%d rows)", name, len(rows)), strings.Join(rows, "\n"))
	}
	rows, err := env.Pool.Query(ctx, `select table_name::text, column_name::text from information_schema.columns
		where table_schema = current_schema() and data_type = 'bytea' order by 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var tc [2]string
		err := r.Scan(&tc[0], &tc[1])
		return tc, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cols {
		col := pgx.Identifier{tc[1]}.Sanitize()
		vals := queryStrings(t, env, `select encode(`+col+`, 'escape') from `+pgx.Identifier{tc[0]}.Sanitize()+` where `+col+` is not null`)
		c.add(kindDB, fmt.Sprintf("bytea %s.%s escape-encoded (%d values)", tc[0], tc[1], len(vals)), strings.Join(vals, "\n"))
	}
	return len(names)
}

func queryStrings(t *testing.T, env *relaistest.Env, sql string) []string {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// ------------------------------------------------------------------- misc

// items returns the items of a list answer.
func items(t *testing.T, res relaistest.Response) []map[string]any {
	t.Helper()
	raw, ok := res.JSON(t)["items"].([]any)
	if !ok {
		t.Fatalf("list answer %.300s has no items", res.Body)
	}
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i] = x.(map[string]any)
	}
	return out
}

// idString renders a JSON id (string or number).
func idString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return fmt.Sprintf("%d", int64(x))
	}
	return fmt.Sprint(v)
}
