package contracts

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

// MaskedKey is the single key of the object that replaces a protected
// value: {"$masked":"sensitive"} or {"$masked":"secret"}. The "$" prefix
// cannot collide with a field name, so a masked value is unambiguous.
const MaskedKey = "$masked"

// Redacted replaces protected strings in scrubbed messages.
const Redacted = "[redacted]"

// Lookup walks nested fields by name. List items are addressed by "*" or
// by any array index. It returns the field and its effective
// classification (the most protected along the path).
func (c Contract) Lookup(path []string) (Field, Classification, bool) {
	if len(path) == 0 {
		return Field{}, "", false
	}
	class := ClassNormal
	container := c.Fields
	var cur Field
	inList := false
	for i, seg := range path {
		if inList {
			if seg != "*" && !isIndex(seg) {
				return Field{}, "", false
			}
			cur = *cur.Items
		} else {
			if i > 0 && cur.Type != TypeObject {
				return Field{}, "", false
			}
			f, ok := find(container, seg)
			if !ok {
				return Field{}, "", false
			}
			cur = f
		}
		class = MaxClass(class, cur.Classification)
		container = cur.Fields
		inList = cur.Type == TypeList && cur.Items != nil
		if cur.Type == TypeList && cur.Items == nil && i < len(path)-1 {
			return Field{}, "", false
		}
	}
	return cur, class, true
}

// isMarker reports whether v is a masked marker, {"$masked": "…"}.
func isMarker(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	_, ok = m[MaskedKey].(string)
	return ok
}

// WholeClass is the classification a value of f has as a whole, class
// being f's effective one: for a list whose items (through nested lists)
// are classified higher, theirs. Such a list is sealed and stored whole,
// a marker of that class in its place.
func WholeClass(f Field, class Classification) Classification {
	for f.Type == TypeList && f.Items != nil {
		f = *f.Items
		class = MaxClass(class, f.Classification)
	}
	return class
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func masked(c Classification) map[string]any {
	return map[string]any{MaskedKey: string(c)}
}

// Mask returns value with every sensitive or secret value replaced by
// {"$masked":"<classification>"}, at any depth; a protected object or list
// is replaced as a whole. Properties the contract does not declare are
// dropped, and so are object or array values found where the contract
// expects something else, because a value that failed validation must not
// leak through a display surface. Invalid JSON or a non-object value
// yields {}. Output keys are sorted.
func (c Contract) Mask(value json.RawMessage) json.RawMessage {
	doc, err := decodeValue(value)
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return json.RawMessage("{}")
	}
	out := maskObject(obj, c.Fields, ClassNormal, ClassSensitive)
	return appendValue(nil, out)
}

// Reveal returns the value at pointer in value, a complete (unsealed)
// document, for an explicit reveal of that one value. Values below it
// classified secret stay replaced by their masked marker: a sensitive
// object or list may hold secrets, and revealing the sensitive value must
// not reveal them. Properties the contract does not declare are dropped as
// Mask drops them. ok is false when pointer addresses no declared field
// (list items are addressed by index) or value holds nothing there. Reveal
// does not look at the value's own classification: the caller decides what
// may be revealed, with Lookup.
func (c Contract) Reveal(value json.RawMessage, pointer string) (json.RawMessage, bool) {
	tokens, err := jsontree.SplitPointer(pointer)
	if err != nil || len(tokens) == 0 {
		return nil, false
	}
	f, class, ok := c.Lookup(tokens)
	if !ok {
		return nil, false
	}
	doc, err := decodeValue(value)
	if err != nil {
		return nil, false
	}
	v, ok := resolve(doc, pointer)
	if !ok {
		return nil, false
	}
	// class already includes f's own classification and its ancestors':
	// below it, only what is secret is masked.
	out, keep := maskValue(v, f, class, ClassSecret)
	if !keep {
		return nil, false
	}
	return appendValue(nil, out), true
}

// maskObject masks the members of obj classified at least min.
func maskObject(obj map[string]any, fields []Field, parent, min Classification) map[string]any {
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		v, ok := obj[f.Name]
		if !ok {
			continue
		}
		if mv, keep := maskValue(v, f, parent, min); keep {
			out[f.Name] = mv
		}
	}
	return out
}

// maskValue masks one value described by f when its effective
// classification is at least min (and, through it, the values below it);
// keep is false when the value must be dropped altogether.
func maskValue(v any, f Field, parent, min Classification) (any, bool) {
	class := MaxClass(parent, f.Classification)
	if class.Rank() >= min.Rank() {
		return masked(class), true
	}
	switch f.Type {
	case TypeObject:
		if obj, ok := v.(map[string]any); ok {
			return maskObject(obj, f.Fields, class, min), true
		}
	case TypeList:
		if arr, ok := v.([]any); ok && f.Items != nil {
			out := make([]any, 0, len(arr))
			for _, item := range arr {
				mv, keep := maskValue(item, *f.Items, class, min)
				if !keep {
					// Keep indexes stable so paths in violations still line up.
					mv = nil
				}
				out = append(out, mv)
			}
			return out, true
		}
		if whole := WholeClass(f, class); whole.Rank() >= min.Rank() && isMarker(v) {
			// A list of protected items is sealed and stored whole (see
			// Split): the marker in its place stands for it. It is no
			// list, and was dropped as a shape mismatch (security QA:
			// the field vanished from every observation).
			return masked(whole), true
		}
	}
	switch v.(type) {
	case map[string]any, []any:
		// Shape mismatch: an undeclared structure could hold anything.
		return nil, false
	}
	return v, true
}

// Split removes every secret value from value for separate storage.
// secrets maps each removed value's concrete JSON pointer (for example
// "/card/token" or "/cards/0/token") to its raw JSON; public keeps
// everything else, with the secret keys removed rather than nulled. Lists
// whose items are secret are removed whole, at the list's pointer, because
// removing single items would shift indexes. Undeclared properties stay in
// public so that Merge restores the exact value: validate before splitting.
// Invalid JSON or a non-object value yields {} and no secrets.
func (c Contract) Split(value json.RawMessage) (public json.RawMessage, secrets map[string]json.RawMessage) {
	return c.SplitFrom(value, ClassSecret)
}

// SplitFrom is Split for every value classified at least min: with
// ClassSensitive it takes out sensitive and secret values alike.
func (c Contract) SplitFrom(value json.RawMessage, min Classification) (public json.RawMessage, secrets map[string]json.RawMessage) {
	if !protects(c.Fields, min) && isObject(value) {
		// Nothing to take out: the value is its own public part. Most
		// contracts protect nothing, and decoding then encoding again each
		// value written was 6 % of a full cycle's allocations.
		return value, nil
	}
	doc, err := decodeValue(value)
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return json.RawMessage("{}"), nil
	}
	secrets = map[string]json.RawMessage{}
	splitObject(obj, c.Fields, ClassNormal, "", min, secrets)
	if len(secrets) == 0 {
		secrets = nil
	}
	return appendValue(nil, obj), secrets
}

func splitObject(obj map[string]any, fields []Field, parent Classification, path string, min Classification, secrets map[string]json.RawMessage) {
	for _, f := range fields {
		v, ok := obj[f.Name]
		if !ok {
			continue
		}
		class := MaxClass(parent, f.Classification)
		fp := jsontree.Pointer(path, f.Name)
		if WholeClass(f, class).Rank() >= min.Rank() {
			secrets[fp] = appendValue(nil, v)
			delete(obj, f.Name)
			continue
		}
		splitValue(v, f, class, fp, min, secrets)
	}
}

// protects reports whether any of fields, at any depth, is classified at
// least min: a value's effective classification is the most protected
// along its path, so none reaches min unless one of them does.
func protects(fields []Field, min Classification) bool {
	for i := range fields {
		if fieldProtects(&fields[i], min) {
			return true
		}
	}
	return false
}

func fieldProtects(f *Field, min Classification) bool {
	if f.Classification.Rank() >= min.Rank() || protects(f.Fields, min) {
		return true
	}
	return f.Items != nil && fieldProtects(f.Items, min)
}

// isObject reports whether value is one valid JSON object.
func isObject(value json.RawMessage) bool {
	for _, b := range value {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return json.Valid(value)
		}
		return false
	}
	return false
}

// Protects reports whether c classifies any field, at any depth,
// sensitive or secret.
func (c Contract) Protects() bool {
	var protects func(fs []Field) bool
	protects = func(fs []Field) bool {
		for _, f := range fs {
			for g := &f; g != nil; g = g.Items {
				if g.Classification.Rank() > ClassNormal.Rank() || protects(g.Fields) {
					return true
				}
			}
		}
		return false
	}
	return protects(c.Fields)
}

func splitValue(v any, f Field, class Classification, path string, min Classification, secrets map[string]json.RawMessage) {
	switch f.Type {
	case TypeObject:
		if obj, ok := v.(map[string]any); ok {
			splitObject(obj, f.Fields, class, path, min, secrets)
		}
	case TypeList:
		arr, ok := v.([]any)
		if !ok || f.Items == nil {
			return
		}
		items := *f.Items
		for i, item := range arr {
			splitValue(item, items, MaxClass(class, items.Classification), jsontree.PointerIndex(path, i), min, secrets)
		}
	}
}

// Merge is the inverse of Split: it puts every secret back at its pointer.
// Merge(Split(v)) is JSON-equal to v. Output keys are sorted.
func Merge(public json.RawMessage, secrets map[string]json.RawMessage) (json.RawMessage, error) {
	doc, err := decodeValue(public)
	if err != nil {
		return nil, fmt.Errorf("contracts: merge: decode public value: %w", err)
	}
	// Sorted pointers make failures deterministic; the pointers Split
	// produces never nest, so order does not change the result.
	keys := make([]string, 0, len(secrets))
	for k := range secrets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sv, err := decodeValue(secrets[k])
		if err != nil {
			return nil, fmt.Errorf("contracts: merge: decode secret %q: %w", k, err)
		}
		doc, err = setPointer(doc, k, sv)
		if err != nil {
			return nil, fmt.Errorf("contracts: merge: %w", err)
		}
	}
	return appendValue(nil, doc), nil
}

var errBadPointer = errors.New("pointer does not address an existing object member or array element")

// setPointer sets the value at pointer p, creating the last object member
// if needed; every parent must already exist.
func setPointer(doc any, p string, v any) (any, error) {
	tokens, err := jsontree.SplitPointer(p)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return v, nil
	}
	cur := doc
	for i, t := range tokens {
		last := i == len(tokens)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[t] = v
				return doc, nil
			}
			next, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("%q: %w", p, errBadPointer)
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(t)
			if err != nil || idx < 0 || idx >= len(c) {
				return nil, fmt.Errorf("%q: %w", p, errBadPointer)
			}
			if last {
				c[idx] = v
				return doc, nil
			}
			cur = c[idx]
		default:
			return nil, fmt.Errorf("%q: %w", p, errBadPointer)
		}
	}
	return doc, nil
}

// ProtectedStrings returns the textual forms of every sensitive or secret
// leaf value in value: strings as they are (and, when different, as they
// appear inside JSON text), numbers as their literal text. Booleans and
// null are left out because scrubbing "true" from messages would garble
// them without protecting anything, and so are empty strings. The result
// is deduplicated, longest first.
func (c Contract) ProtectedStrings(value json.RawMessage) []string {
	doc, err := decodeValue(value)
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return nil
	}
	seen := map[string]bool{}
	protectedObject(obj, c.Fields, ClassNormal, seen)
	return sortedProtected(seen)
}

func protectedObject(obj map[string]any, fields []Field, parent Classification, seen map[string]bool) {
	for _, f := range fields {
		if v, ok := obj[f.Name]; ok {
			protectedValue(v, f, parent, seen)
		}
	}
}

func protectedValue(v any, f Field, parent Classification, seen map[string]bool) {
	class := MaxClass(parent, f.Classification)
	if class.Rank() > 0 {
		leaves(v, seen)
		if s, ok := v.(string); ok && f.Type == TypeDatetime {
			datetimeParts(s, seen)
		}
		return
	}
	switch f.Type {
	case TypeObject:
		if obj, ok := v.(map[string]any); ok {
			protectedObject(obj, f.Fields, class, seen)
		}
	case TypeList:
		if arr, ok := v.([]any); ok && f.Items != nil {
			for _, item := range arr {
				protectedValue(item, *f.Items, class, seen)
			}
		}
	}
}

// datetimeParts adds a protected date-time's date and time of day
// (2026-03-04 and 05:06:07 of 2026-03-04T05:06:07Z) as values of their
// own: a message writes them apart as often as whole ("when 2026-03-04
// 05:06:07"), and either alone was kept.
func datetimeParts(s string, seen map[string]bool) {
	if len(s) < len("2006-01-02T15:04:05") || s[10] != 'T' && s[10] != 't' && s[10] != ' ' {
		return
	}
	if _, err := time.Parse(time.DateOnly, s[:10]); err != nil {
		return
	}
	seen[s[:10]] = true
	if _, err := time.Parse(time.TimeOnly, s[11:19]); err == nil {
		seen[s[11:19]] = true
	}
}

// leaves collects every scalar under v, whatever its shape: a protected
// value that does not match its declared type is still protected.
func leaves(v any, seen map[string]bool) {
	switch x := v.(type) {
	case string:
		if x == "" {
			return
		}
		seen[x] = true
		if enc := appendString(nil, x); string(enc[1:len(enc)-1]) != x {
			seen[string(enc[1:len(enc)-1])] = true
		}
	case json.Number:
		seen[string(x)] = true
	case []any:
		for _, e := range x {
			leaves(e, seen)
		}
	case map[string]any:
		for _, e := range x {
			leaves(e, seen)
		}
	}
}

func sortedProtected(seen map[string]bool) []string {
	if len(seen) == 0 {
		return nil
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sortLongestFirst(out)
	return out
}

func sortLongestFirst(s []string) {
	sort.Slice(s, func(i, j int) bool {
		if len(s[i]) != len(s[j]) {
			return len(s[i]) > len(s[j])
		}
		return s[i] < s[j]
	})
}

// Scrub replaces every occurrence of each protected string in message with
// "[redacted]", as written or as a service quotes it: escaped inside a JSON
// string (Python's json.dumps writes é as \u00e9, Go's escapes < as
// \u003c, Gson = as \u003d, PHP / as \/) or percent-encoded in a URL.
// Letter case is ignored, and so is how accents are composed (é or e
// and a combining acute) (services lower-case an email address, upper-case
// a reference as they quote it), letter by letter (ß and SS, or a final
// sigma, are not matched). An ASCII value shorter than minInWord
// characters is redacted only where it stands as a word of its own: inside
// other words its redactions would spell it out. Longer strings are tried first, so that a
// secret containing another is redacted whole rather than leaving a
// recognisable remainder.
//
// A service may also quote a value cut short, or encode it: a stretch of
// at least half a value (and minPartial bytes) that begins or ends it is
// redacted as far as it matches (a truncated "tok-9d2kq-7pw4…", a card
// shown by its last digits), and so is the value's base64 encoding. A value
// reversed, hashed or spelled with its letters masked is not recognised.
func Scrub(message string, protected []string) string {
	ps := make([]string, 0, len(protected))
	seen := map[string]bool{}
	add := func(p string) {
		if p = foldCase(p); p != "" && !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	for _, p := range protected {
		add(p)
		// Composed and decomposed accents read alike: a service may
		// quote either (macOS and some Java libraries decompose).
		add(norm.NFC.String(p))
		add(norm.NFD.String(p))
		if len(p) >= minEncoded {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
				add(enc.EncodeToString([]byte(p)))
			}
		}
	}
	if len(ps) == 0 {
		return message
	}
	// decode reads a form's + as a space: a value with a plus sign (a
	// phone number, base64) is looked for that way too in decoded text.
	for _, p := range ps {
		if strings.Contains(p, "+") {
			add(strings.ReplaceAll(p, "+", " "))
		}
	}
	sortLongestFirst(ps)
	spans := matches(foldCase(message), ps, nil)
	if d := decode(message); d.text != message {
		spans = append(spans, matches(foldCase(d.text), ps, d.from)...)
		// Escaped twice (an error template escaping an escaped string:
		// &amp;#39;), read once more.
		if d2 := decode(d.text); d2.text != d.text {
			from := make([]span, len(d2.from))
			for i, f := range d2.from {
				from[i] = span{d.from[f.start].start, d.from[f.end-1].end}
			}
			spans = append(spans, matches(foldCase(d2.text), ps, from)...)
		}
	}
	if len(spans) == 0 {
		return message
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out strings.Builder
	at := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		// Overlapping matches (a secret inside another, a raw and a
		// decoded one) are one redaction.
		for i++; i < len(spans) && spans[i].start < cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		out.WriteString(message[at:cur.start])
		out.WriteString(Redacted)
		at = cur.end
	}
	out.WriteString(message[at:])
	return out.String()
}

// foldCase lower-cases s letter by letter, keeping each letter's length in
// bytes, so that a match in the folded text is a match at the same bytes
// of s. The few letters whose lower case is longer or shorter in UTF-8
// (the Kelvin sign, dotted İ) keep their case; bytes that are not UTF-8
// are kept as they are.
func foldCase(s string) string {
	var b []byte
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if l := unicode.ToLower(r); l != r && utf8.RuneLen(l) == size {
			if b == nil {
				b = []byte(s)
			}
			utf8.EncodeRune(b[i:], l)
		}
		i += size
	}
	if b == nil {
		return s
	}
	return string(b)
}

// span is a range of bytes of a message.
type span struct{ start, end int }

// matches finds each p of ps (longest first) in text, without overlap, as
// spans of the message: from maps a byte of text to the span of message
// it was decoded from (nil when text is the message).
func matches(text string, ps []string, from []span) []span {
	var out []span
	taken := make([]bool, len(text))
	take := func(start, end int) bool {
		if slices.Contains(taken[start:end], true) {
			return false
		}
		for k := start; k < end; k++ {
			taken[k] = true
		}
		if from == nil {
			out = append(out, span{start, end})
		} else {
			out = append(out, span{from[start].start, from[end-1].end})
		}
		return true
	}
	for _, p := range ps {
		for i := 0; i+len(p) <= len(text); {
			j := strings.Index(text[i:], p)
			if j < 0 {
				break
			}
			j += i
			if (shortWord(p) && !wholeWord(text, p, j)) || !take(j, j+len(p)) {
				i = j + 1
				continue
			}
			i = j + len(p)
		}
	}
	// Then what is left of a value cut short: a start or an end of it.
	for _, p := range ps {
		n := partialLength(p)
		if n == 0 {
			continue
		}
		head := p[:n]
		for i := 0; i+n <= len(text); {
			j := strings.Index(text[i:], head)
			if j < 0 {
				break
			}
			j += i
			k := n
			for j+k < len(text) && k < len(p) && text[j+k] == p[k] {
				k++
			}
			for k < len(p) && !utf8.RuneStart(p[k]) {
				k-- // end on a whole character
			}
			for k > n && isBlank(text[j+k-1]) {
				k-- // the space after it is the message's (push QA)
			}
			take(j, j+k)
			i = j + 1
		}
		t := len(p) - n
		for t > 0 && !utf8.RuneStart(p[t]) {
			t-- // begin on a whole character
		}
		tail := p[t:]
		for i := 0; i+len(tail) <= len(text); {
			j := strings.Index(text[i:], tail)
			if j < 0 {
				break
			}
			j += i
			start, m := j, len(tail)
			for start > 0 && m < len(p) && text[start-1] == p[len(p)-m-1] {
				start--
				m++
			}
			for start < j && !utf8.RuneStart(text[start]) {
				start++ // begin on a whole character
			}
			for start < j && isBlank(text[start]) {
				// The space before it is the message's: "invalid token
				// [redacted]", not "invalid token[redacted]", of a value
				// "Bearer …" (push QA).
				start++
			}
			take(start, j+len(tail))
			i = j + 1
		}
	}
	return out
}

// isBlank reports whether b is a space or a tab.
func isBlank(b byte) bool { return b == ' ' || b == '\t' }

// minPartial is the shortest stretch of a value Scrub redacts as a piece of
// it; shorter ones are ordinary words and numbers. minEncoded is the
// shortest value whose base64 spellings it looks for.
const (
	minPartial = 8
	minEncoded = 6
	// minInWord is the shortest ASCII value (in characters) redacted
	// inside other words: a shorter one ("O", "AB") is common inside
	// words, and redacting it there would spell it out
	// ("time[redacted]ut" says the value is "o").
	minInWord = 4
)

// partialLength is how long a start or an end of p must be for Scrub to
// redact it (at least half of p, on a character boundary), or 0 when p is
// too short to be looked for in pieces.
func partialLength(p string) int {
	if len(p) <= minPartial {
		return 0
	}
	n := max(minPartial, (len(p)+1)/2)
	for n < len(p) && !utf8.RuneStart(p[n]) {
		n++
	}
	if n >= len(p) {
		return 0
	}
	return n
}

// decoded is a message with its escapes decoded, each byte with the span
// of the message it came from.
type decoded struct {
	text string
	from []span
}

// decode undoes the escapes a service may quote a value with: JSON's
// \uXXXX (any case, surrogate pairs joined), \" \\ \/ \b \f \n \r \t,
// URLs' %XX (any case) and a form's + for a space, and HTML's character
// references (&amp; &#39; &#x27; …: an error page escapes what it quotes).
// Anything else, a malformed escape included, is kept as it is. A +
// decoded where it was a plus sign only makes a value with a space match
// where it was written with one: the text is matched, never shown.
func decode(message string) decoded {
	if !strings.ContainsAny(message, "\\%+&\u00a0") {
		return decoded{text: message}
	}
	var b strings.Builder
	from := make([]span, 0, len(message))
	emit := func(s string, start, end int) {
		b.WriteString(s)
		for range len(s) {
			from = append(from, span{start, end})
		}
	}
	for i := 0; i < len(message); {
		c := message[i]
		switch {
		case c == '\\' && i+5 < len(message) && message[i+1] == 'u':
			r, ok := hex4(message[i+2:])
			n := 6
			if ok && utf16.IsSurrogate(r) {
				lo, lok := rune(0), false
				if i+11 < len(message) && message[i+6] == '\\' && message[i+7] == 'u' {
					lo, lok = hex4(message[i+8:])
				}
				if r2 := utf16.DecodeRune(r, lo); lok && r2 != utf8.RuneError {
					r, n = r2, 12
				} else {
					ok = false
				}
			}
			if ok {
				emit(string(r), i, i+n)
				i += n
				continue
			}
		case c == '\\' && i+1 < len(message):
			if d, ok := jsonEscapes[message[i+1]]; ok {
				emit(string(d), i, i+2)
				i += 2
				continue
			}
		case c == '%' && i+2 < len(message):
			if h, ok := hexByte(message[i+1], message[i+2]); ok {
				emit(string([]byte{h}), i, i+3)
				i += 3
				continue
			}
		case c == '+':
			emit(" ", i, i+1)
			i++
			continue
		case c == 0xc2 && i+1 < len(message) && message[i+1] == 0xa0:
			// A no-break space (an HTML page's &nbsp;) between the
			// words of a value written with spaces.
			emit(" ", i, i+2)
			i += 2
			continue
		case c == '&':
			if r, n := charRef(message[i:]); n > 0 {
				emit(r, i, i+n)
				i += n
				continue
			}
		}
		emit(message[i:i+1], i, i+1)
		i++
	}
	return decoded{text: b.String(), from: from}
}

// maxCharRef is the longest HTML character reference charRef reads
// (&thetasym; and &#x10FFFF; are 10 bytes).
const maxCharRef = 12

// charRef decodes the HTML character reference at the start of s (which
// begins with &) and returns its text and length; 0 when there is none.
// Its semicolon may be missing, as browsers allow (&amp Sons, &#39Brien).
func charRef(s string) (string, int) {
	end := 1
	for end < len(s) && end < maxCharRef && refByte(s[end]) {
		end++
	}
	if end < len(s) && s[end] == ';' {
		end++
	}
	if end < 3 {
		return "", 0
	}
	ref := s[:end]
	text := html.UnescapeString(ref)
	if text == ref {
		return "", 0
	}
	// Without its semicolon a reference ends where its name does: what
	// follows it (Brien in &#39Brien) ends the text too, and is not its.
	for len(text) > 1 && text[len(text)-1] == ref[len(ref)-1] {
		text, ref = text[:len(text)-1], ref[:len(ref)-1]
	}
	if text == "\u00a0" {
		text = " " // &nbsp;: see decode
	}
	return text, len(ref)
}

// refByte reports the bytes of a character reference's name or number.
func refByte(c byte) bool {
	return c == '#' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// jsonEscapes are JSON's two-character escapes, by their second character.
var jsonEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads four hex digits (any case) at the start of s.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	hi, ok1 := hexByte(s[0], s[1])
	lo, ok2 := hexByte(s[2], s[3])
	return rune(hi)<<8 | rune(lo), ok1 && ok2
}

// hexByte reads two hex digits (any case).
func hexByte(a, b byte) (byte, bool) {
	x, ok1 := hexDigit(a)
	y, ok2 := hexDigit(b)
	return x<<4 | y, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ItemsToken stands, in a declared field's pointer, for every item of a
// list, as Diff writes it: /contacts/[]/role selects each contact's role
// and nothing else of it (privacy QA: a worker needing one member of a
// list's items received them whole, secrets included). No field is
// named so: names are lowercase letters, digits and underscores.
const ItemsToken = "[]"

// FieldPointer checks that pointer addresses a declared field that a
// worker may ask for alone (DESIGN §11, declared fields): a chain of
// object members from the top level, through a list's items by "[]"
// (ItemsToken). A list is declared whole by its own pointer.
func (c Contract) FieldPointer(pointer string) error {
	tokens, err := jsontree.SplitPointer(pointer)
	if err != nil || len(tokens) == 0 {
		if pointer != "" && !strings.HasPrefix(pointer, "/") && c.FieldPointer("/"+pointer) == nil {
			// A name where a pointer goes (verifier QA).
			return fmt.Errorf("must be a JSON pointer to an input field, such as /company/name (did you mean /%s?)", pointer)
		}
		return errors.New("must be a JSON pointer to an input field, such as /company/name")
	}
	container := c.Fields
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		f, ok := find(container, tok)
		if !ok {
			names := make([]string, len(container))
			for k, cf := range container {
				names[k] = cf.Name
			}
			hint := ""
			if meant, close := suggest.Closest(tok, names); close {
				hint = " (did you mean " + jsontree.Pointer("", append(slices.Clone(tokens[:i]), meant)...) + "?)"
			}
			return fmt.Errorf("has no input at %s%s", jsontree.Pointer("", tokens[:i+1]...), hint)
		}
		if i == len(tokens)-1 {
			return nil
		}
		at := jsontree.Pointer("", tokens[:i+1]...)
		for f.Type == TypeList {
			// Its items, by "[]", down to objects with members to select.
			if tokens[i+1] != ItemsToken || f.Items == nil {
				return fmt.Errorf("goes inside %s, a list: select a member of its items as %s/[]/%s, or the list whole as %s", at, at, tokens[i+1], at)
			}
			i++
			at += "/" + ItemsToken
			if i == len(tokens)-1 {
				list := strings.TrimSuffix(at, "/"+ItemsToken)
				return fmt.Errorf("selects every item of %s: declare the list whole as %s, or a member of its items", list, list)
			}
			f = *f.Items
		}
		if f.Type != TypeObject {
			return fmt.Errorf("goes inside %s, a %s: only objects have members to select", at, f.Type)
		}
		container = f.Fields
	}
	return nil
}

// LacksFields returns those of pointers FieldPointer refuses: of the
// fields a worker declares it reads, those these inputs do not have (a
// worker naming no revision takes only revisions that have them all).
func (c Contract) LacksFields(pointers []string) []string {
	var lacks []string
	for _, p := range pointers {
		if c.FieldPointer(p) != nil {
			lacks = append(lacks, p)
		}
	}
	return lacks
}

// Project returns the members of value at pointers (checked with
// FieldPointer) with their parents, and nothing else: what a worker that
// declared those fields receives. Absent members stay absent; a list's
// items selected by "[]" keep their places, each an object with what it
// has of the members selected.
func Project(value json.RawMessage, pointers []string) json.RawMessage {
	doc, err := decodeValue(value)
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return json.RawMessage("{}")
	}
	var out any = map[string]any{}
	for _, p := range pointers {
		tokens, err := jsontree.SplitPointer(p)
		if err != nil || len(tokens) == 0 {
			continue
		}
		out = projectInto(out, obj, tokens)
	}
	return appendValue(nil, out)
}

// projectInto adds to dst what src has at tokens, with its parents, and
// returns dst (made when nil).
func projectInto(dst, src any, tokens []string) any {
	if len(tokens) == 0 {
		return src
	}
	if tokens[0] == ItemsToken {
		items, ok := src.([]any)
		if !ok {
			return dst
		}
		out, _ := dst.([]any)
		if len(out) != len(items) {
			out = make([]any, len(items))
		}
		for i, item := range items {
			got := projectInto(out[i], item, tokens[1:])
			if got == nil {
				got = map[string]any{} // an item without the member: kept in its place
			}
			out[i] = got
		}
		return out
	}
	obj, ok := src.(map[string]any)
	if !ok {
		return dst
	}
	v, present := obj[tokens[0]]
	if !present {
		return dst
	}
	m, _ := dst.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	got := projectInto(m[tokens[0]], v, tokens[1:])
	if _, isObj := v.(map[string]any); isObj && got == nil {
		got = map[string]any{} // a parent present, the member asked for absent
	}
	m[tokens[0]] = got
	return m
}

// shortWord reports whether p is redacted only as a word of its own (see
// minInWord): a short ASCII value. Other scripts are redacted wherever they
// appear: Chinese or Japanese text runs its words together, and a
// three-character name in it has letters on both sides.
func shortWord(p string) bool {
	if utf8.RuneCountInString(p) >= minInWord {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// wholeWord reports whether p, found in text at j, stands as a word of
// its own there: no character of its own kind (a letter by a letter, a
// digit by a digit) continues it, so "737" stands in "cvv737" and "o"
// does not in "timeout" or "o'clock".
func wholeWord(text, p string, j int) bool {
	kind := func(r rune) int {
		switch {
		case unicode.IsLetter(r):
			return 1
		case unicode.IsDigit(r):
			return 2
		}
		return 0
	}
	// A hyphen or an apostrophe joins a word ("O-ring", "o'clock"): the
	// character past it continues it too.
	joiner := func(r rune) bool { return r == '-' || r == '\'' || r == '’' }
	first, _ := utf8.DecodeRuneInString(p)
	last, _ := utf8.DecodeLastRuneInString(p)
	before, n := utf8.DecodeLastRuneInString(text[:j])
	if joiner(before) && j > n {
		before, _ = utf8.DecodeLastRuneInString(text[:j-n])
	}
	if j > 0 && kind(first) != 0 && kind(first) == kind(before) {
		return false
	}
	rest := text[j+len(p):]
	after, n := utf8.DecodeRuneInString(rest)
	if joiner(after) && len(rest) > n {
		after, _ = utf8.DecodeRuneInString(rest[n:])
	}
	if len(rest) > 0 && kind(last) != 0 && kind(last) == kind(after) {
		return false
	}
	return true
}
