package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

// schemaURL is the in-memory address contracts are compiled under; nothing
// is ever fetched from it.
const schemaURL = "https://relais.invalid/contract.schema.json"

// Validator checks JSON values against one contract. It is compiled once
// and safe for concurrent use.
type Validator struct {
	schema   *jsonschema.Schema
	contract Contract
	fast     *fastNode // nil when the contract is unfit for the fast path
	// integers is set when some field is an integer (see Integers).
	integers bool
}

// Compile builds a Validator from the contract's JSON Schema document,
// compiled with jsonschema/v5 (draft 2020-12, formats asserted), so that what
// the API serves and what it enforces cannot drift apart. It also prepares
// an allocation-light fast path that accepts valid values without the
// library; anything it does not accept goes through the library.
func Compile(c Contract) (*Validator, error) {
	// Patterns are checked first: the library compiles them with
	// regexp.MustCompile and would panic on a hand-built contract.
	if err := checkPatterns(c.Fields); err != nil {
		return nil, fmt.Errorf("contracts: compile schema: %w", err)
	}
	s, err := compileSchema(c.JSONSchema())
	if err != nil {
		return nil, fmt.Errorf("contracts: compile schema: %w", err)
	}
	fast, err := compileFast(c)
	if err != nil {
		fast = nil // the library alone still validates correctly
	}
	return &Validator{schema: s, contract: c, fast: fast, integers: hasInteger(c.Fields)}, nil
}

func compileSchema(doc []byte) (s *jsonschema.Schema, err error) {
	defer func() {
		// Last line of defence for hand-built contracts the checks above
		// did not anticipate: the library panics on some invalid schemas.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("schema library panicked: %v", r)
		}
	}()
	compiler := jsonschema.NewCompiler()
	compiler.Draft = jsonschema.Draft2020
	// Without AssertFormat, 2020-12 treats format as a mere annotation.
	compiler.AssertFormat = true
	compiler.Formats = formats
	// Never reach out to the network or the file system for references.
	compiler.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("loading %q is not allowed", s)
	}
	if err := compiler.AddResource(schemaURL, bytes.NewReader(doc)); err != nil {
		return nil, fmt.Errorf("add resource: %w", err)
	}
	return compiler.Compile(schemaURL)
}

func checkPatterns(fs []Field) error {
	for _, f := range fs {
		if f.Pattern != "" {
			if _, err := regexp.Compile(f.Pattern); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
		}
		if err := checkPatterns(f.Fields); err != nil {
			return err
		}
		if f.Items != nil {
			if err := checkPatterns([]Field{*f.Items}); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeValue decodes exactly one JSON value, keeping numbers exact.
func decodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return v, nil
}

// Validate checks value against the contract and returns every violation,
// deduplicated and sorted by path; nil means valid. Paths are JSON pointers
// into value. Messages never quote the offending value, because it may be
// sensitive. A string or key holding the NUL character is a violation too:
// PostgreSQL cannot store it, and valid values are stored.
func (v *Validator) Validate(value json.RawMessage) []Violation {
	if v.fast != nil && v.fast.accepts(value) {
		return nil
	}
	return v.validateSlow(value)
}

// validateSlow validates through the schema library and explains every
// failure.
func (v *Validator) validateSlow(value json.RawMessage) []Violation {
	doc, err := decodeValue(value)
	if err != nil {
		return []Violation{{Path: "", Message: "invalid json: " + err.Error()}}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return []Violation{{Path: "", Message: "must be an object, not " + kindOf(doc)}}
	}
	var vs []Violation
	// Numbers the schema library cannot represent would make it fail
	// (big.Rat refuses them); report them and validate a stand-in.
	sanitizeNumbers(obj, nil, &vs)

	sanitized := len(vs)

	if err := v.schema.Validate(obj); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			vs = append(vs, Violation{Path: "", Message: "cannot validate: " + err.Error()})
		} else {
			v.collect(ve, obj, &vs)
		}
	}
	if sanitized > 0 {
		// The stand-in value of an out-of-range number would only add
		// confusing bound violations at the same place.
		out := make(map[string]bool, sanitized)
		for _, x := range vs[:sanitized] {
			out[x.Path] = true
		}
		kept := vs[:sanitized]
		for _, x := range vs[sanitized:] {
			if !out[x.Path] {
				kept = append(kept, x)
			}
		}
		vs = kept
	}
	if bytes.Contains(value, nulEscape) {
		// encoding/json and the library accept the NUL character: the
		// strict reader finds where it is (an escaped backslash followed
		// by u0000 is no NUL, hence the second look).
		var nul *jsontree.NULError
		if _, err := jsontree.Read(value, maxJSONDepth); errors.As(err, &nul) {
			for _, at := range nul.Pointers {
				vs = append(vs, Violation{Path: at, Message: jsontree.ErrNUL.Error()})
			}
		}
	}
	return normalize(vs)
}

// nulEscape is how the NUL character appears in JSON text: a raw NUL byte
// is not valid JSON.
var nulEscape = []byte(`\u0000`)

// outOfRange is the violation of a number outside MaxNumberOrder.
var outOfRange = fmt.Sprintf("number is out of range: 0, or a magnitude from 1e-%d to below 1e%d", MaxNumberOrder, MaxNumberOrder+1)

// tooLongNumber is the violation of a literal over MaxNumberLiteral, in
// range or not: said as the range, it read as a wrong value.
var tooLongNumber = fmt.Sprintf("number is written with more than %d characters", MaxNumberLiteral)

// sanitizeNumbers replaces out-of-range numbers in place.
func sanitizeNumbers(v any, path []string, vs *[]Violation) any {
	switch x := v.(type) {
	case json.Number:
		if numberInRange(x) {
			return x
		}
		msg := outOfRange
		if literalTooLong(x) {
			msg = tooLongNumber
		}
		*vs = append(*vs, Violation{Path: joinPointer(path), Message: msg})
		f, _ := strconv.ParseFloat(string(x), 64)
		switch {
		case f > 1e308:
			return json.Number("1e400")
		case f < -1e308:
			return json.Number("-1e400")
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	case map[string]any:
		for k, e := range x {
			if needsSanitizing(e) {
				x[k] = sanitizeNumbers(e, append(path, k), vs)
			}
		}
	case []any:
		for i, e := range x {
			if needsSanitizing(e) {
				x[i] = sanitizeNumbers(e, append(path, strconv.Itoa(i)), vs)
			}
		}
	}
	return v
}

// needsSanitizing avoids building paths for the common in-range leaves.
func needsSanitizing(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return !numberInRange(x)
	case map[string]any, []any:
		return true
	}
	return false
}

func joinPointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(jsontree.EscapeToken(t))
	}
	return sb.String()
}

// collect turns the library's error tree into violations. Only leaves are
// real failures; inner nodes merely group them.
func (v *Validator) collect(ve *jsonschema.ValidationError, doc any, vs *[]Violation) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			v.collect(c, doc, vs)
		}
		return
	}
	inst := libPointer(ve.InstanceLocation)
	kw := ve.KeywordLocation
	keyword := kw[strings.LastIndexByte(kw, '/')+1:]
	f, container, item, ok := v.schemaTarget(kw[:max(strings.LastIndexByte(kw, '/'), 0)])
	value, _ := resolve(doc, inst)
	add := func(msg string) { *vs = append(*vs, Violation{Path: inst, Message: msg}) }
	if !ok {
		add(ve.Message)
		return
	}
	switch keyword {
	case "type":
		msg := fmt.Sprintf("must be %s, not %s", typeNoun(f), kindOf(value))
		if value == nil && !f.Required && !item {
			// Python's None, a Go nil pointer and JavaScript's null all
			// serialise so: the fix is the client's, and says how.
			msg += " (an optional field is left out, never null)"
		}
		add(msg)
	case "required":
		// At the missing member's own pointer, as a request body's
		// refusals are: a client maps it to its form's field.
		obj, _ := value.(map[string]any)
		for _, cf := range container {
			if _, present := obj[cf.Name]; cf.Required && !present {
				*vs = append(*vs, Violation{Path: jsontree.Pointer(inst, cf.Name), Message: "is required"})
			}
		}
	case "additionalProperties":
		obj, _ := value.(map[string]any)
		// A misspelt field is named with the field it meant, among those
		// the object lacks.
		var absent []string
		for _, cf := range container {
			if _, present := obj[cf.Name]; !present {
				absent = append(absent, cf.Name)
			}
		}
		for k := range obj {
			if _, known := find(container, k); !known {
				*vs = append(*vs, Violation{Path: jsontree.Pointer(inst, k), Message: NotAField + suggest.Hint(k, absent)})
			}
		}
	case "enum":
		add("must be one of " + quoteList(f.Values))
	case "format":
		add(formatMessage(f, value))
	case "minLength":
		add(fmt.Sprintf("must be at least %s", plural(derefCount(f.MinLength), "character")))
	case "maxLength":
		add(fmt.Sprintf("must be at most %s", plural(derefCount(f.MaxLength), "character")))
	case "pattern":
		if f.Pattern == "" {
			// The served schema's own pattern of a datetime or an email
			// (see formats), whose format check said it already.
			return
		}
		// Quoted as written: %q would double every backslash of \d,
		// and the message would show a pattern nobody wrote.
		add(`must match pattern "` + f.Pattern + `"`)
	case "minimum":
		add("must be at least " + derefNumber(f.Minimum))
	case "maximum":
		add("must be at most " + derefNumber(f.Maximum))
	case "minItems":
		add(fmt.Sprintf("must have at least %s", plural(derefCount(f.MinItems), "item")))
	case "maxItems":
		add(fmt.Sprintf("must have at most %s", plural(derefCount(f.MaxItems), "item")))
	default:
		add(ve.Message)
	}
}

// schemaTarget maps a keyword location such as
// /properties/company/properties/tags/items to the field it designates
// (the zero Field for the root), the field list of that object level, and
// whether the field is a list's item (which has no "left out").
func (v *Validator) schemaTarget(loc string) (cur Field, container []Field, item, ok bool) {
	container = v.contract.Fields
	tokens, err := jsontree.SplitPointer(libPointer(loc))
	if err != nil {
		return cur, nil, false, false
	}
	for i := 0; i < len(tokens); i++ {
		switch tokens[i] {
		case "properties":
			if i+1 >= len(tokens) {
				return cur, nil, false, false
			}
			i++
			f, found := find(container, tokens[i])
			if !found {
				return cur, nil, false, false
			}
			cur, container, item = f, f.Fields, false
		case "items":
			if cur.Items == nil {
				return cur, nil, false, false
			}
			cur, item = *cur.Items, true
			container = cur.Fields
		default:
			return cur, nil, false, false
		}
	}
	return cur, container, item, true
}

// libPointer converts the library's locations, whose tokens are also
// URL-path-escaped, into plain RFC 6901 pointers.
func libPointer(loc string) string {
	if !strings.Contains(loc, "%") {
		return loc
	}
	tokens, err := jsontree.SplitPointer(loc)
	if err != nil {
		return loc
	}
	for i, t := range tokens {
		if u, err := url.PathUnescape(t); err == nil {
			tokens[i] = u
		}
	}
	return joinPointer(tokens)
}

// resolve returns the value at a JSON pointer.
func resolve(doc any, pointer string) (any, bool) {
	tokens, err := jsontree.SplitPointer(pointer)
	if err != nil {
		return nil, false
	}
	cur := doc
	for _, t := range tokens {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if isIntegral(v) {
			return "integer"
		}
		return "number"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func typeNoun(f Field) string {
	switch f.Type {
	case TypeText:
		return "a string"
	case TypeInteger:
		return "an integer"
	case TypeNumber:
		return "a number"
	case TypeBoolean:
		return "a boolean"
	case TypeDate:
		return "a date string (YYYY-MM-DD)"
	case TypeDatetime:
		return "a date-time string (RFC 3339)"
	case TypeChoice:
		return "a string"
	case TypeList:
		return "an array"
	default:
		return "an object"
	}
}

// localDateTime is a date-time without its offset, the usual slip
// (Python's datetime.utcnow().isoformat(), designer QA), its T or a
// space between date and time.
var localDateTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$`)

// Other slips a value shows, each said with its fix (verifier QA: the
// offset's advice alone led to a second refusal): no seconds, a space
// for the T, an offset without its colon (+0100, as Java writes it).
var (
	noSeconds       = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}([Zz]|[+-]\d{2}:?\d{2})$`)
	spacedDateTime  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$`)
	colonlessOffset = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{4}$`)
)

// formatMessage says what a value of f's format must be, naming the usual
// slip when value shows it (never value itself: it may be protected).
func formatMessage(f Field, value any) string {
	s, _ := value.(string)
	switch {
	case f.Type == TypeDate:
		return "must be a valid date (YYYY-MM-DD)"
	case f.Type == TypeDatetime && localDateTime.MatchString(s) && (len(s) == len("2026-12-07T10:00") || s[10] == ' '):
		// Each thing it lacks at once: one at a time, the fix of one
		// met the refusal of the next.
		var lacks []string
		if len(s) == len("2026-12-07T10:00") {
			lacks = append(lacks, "its seconds")
		}
		if s[10] == ' ' {
			lacks = append(lacks, "a T between date and time, not a space")
		}
		lacks = append(lacks, "its offset (Z for UTC, or +01:00 and the like)")
		return "must be an RFC 3339 date-time, which needs " + strings.Join(lacks, "; ") + ": 2026-12-07T10:00:00Z"
	case f.Type == TypeDatetime && localDateTime.MatchString(s):
		return "must be an RFC 3339 date-time with its offset, which this one lacks: end it with Z for UTC, or +01:00 and the like (2026-12-07T10:00:00Z)"
	case f.Type == TypeDatetime && noSeconds.MatchString(s):
		return "must be an RFC 3339 date-time, whose seconds this one lacks (2026-12-07T10:00:00Z)"
	case f.Type == TypeDatetime && spacedDateTime.MatchString(s):
		return "must be an RFC 3339 date-time, which puts a T between date and time, not a space (2026-12-07T10:00:00Z)"
	case f.Type == TypeDatetime && colonlessOffset.MatchString(s):
		return "must be an RFC 3339 date-time, whose offset has a colon (+01:00, not +0100)"
	case f.Type == TypeDatetime && len(s) == len("2026-12-07") && strings.Count(s, "-") == 2:
		return "must be an RFC 3339 date-time, which this date lacks the time of (2026-12-07T10:00:00Z); a date alone is a field of type date"
	case f.Type == TypeDatetime:
		return "must be a valid RFC 3339 date-time, its T and Z upper-case, its seconds at most 59"
	case f.Format == FormatEmail:
		return "must be a valid email address"
	case f.Format == FormatURI:
		return "must be a valid absolute URI"
	case f.Format == FormatUUID:
		return "must be a valid UUID"
	}
	return "must be a valid " + f.Format
}

func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.FormatInt(n, 10) + " " + unit + "s"
}

func derefCount(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefNumber(p *json.Number) string {
	if p == nil {
		return "0"
	}
	return string(*p)
}

// normalize deduplicates violations and sorts them by path (array indexes
// numerically) then message, so that output is stable across map orders.
func normalize(vs []Violation) []Violation {
	if len(vs) == 0 {
		return nil
	}
	sort.Slice(vs, func(i, j int) bool {
		if c := jsontree.ComparePointers(vs[i].Path, vs[j].Path); c != 0 {
			return c < 0
		}
		return vs[i].Message < vs[j].Message
	})
	out := vs[:1]
	for _, x := range vs[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

// Cache holds compiled validators keyed by revision digest, so that each
// revision's schema is compiled once per process.
type Cache struct {
	// A map under a lock rather than a sync.Map: looked up on every start
	// and settlement, a struct key in a typed map allocates nothing where
	// an interface key would.
	mu sync.RWMutex
	m  map[cacheKey]*cacheEntry
}

type cacheKey struct{ digest, part string }

type cacheEntry struct {
	once sync.Once
	v    *Validator
	err  error
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{m: map[cacheKey]*cacheEntry{}} }

// Validator returns the validator cached under digest and part (a
// revision's "inputs" or "outputs", say), compiling ct on first use.
// Concurrent callers for the same key wait for a single compilation.
// The digest must identify ct's content (for example a revision digest):
// the cache trusts it and never compiles a second contract for one key.
func (c *Cache) Validator(digest, part string, ct Contract) (*Validator, error) {
	k := cacheKey{digest, part}
	c.mu.RLock()
	entry, ok := c.m[k]
	c.mu.RUnlock()
	if !ok {
		c.mu.Lock()
		if entry, ok = c.m[k]; !ok {
			entry = &cacheEntry{}
			c.m[k] = entry
		}
		c.mu.Unlock()
	}
	entry.once.Do(func() {
		entry.v, entry.err = Compile(ct)
	})
	return entry.v, entry.err
}
