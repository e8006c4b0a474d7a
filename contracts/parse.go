package contracts

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

// MaxDepth is the deepest field nesting a contract may declare. Top-level
// fields are at depth 1; every object or list level adds one.
const MaxDepth = 32

// maxJSONDepth bounds the nesting of any contract document. Legitimate
// documents at the field nesting limit stay far below it; the bound exists
// so that hostile input cannot drive the recursive reader arbitrarily deep.
const maxJSONDepth = 128

// maxCount bounds length and item counts. JSON Schema validators commonly
// carry these as float64, so larger values would silently lose precision.
const maxCount = 1<<53 - 1

var fieldNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// IsFieldName reports whether name is of the field names' grammar: a
// name outside it names no field of any contract.
func IsFieldName(name string) bool { return fieldNameRe.MatchString(name) }

// Bounds of a Working's free text, in bytes of UTF-8. They keep documents
// (stored, digested, diffed, shown in the console) to a size people write;
// a longer value is a violation at its pointer.
const (
	MaxNameBytes             = 200    // the Working's name
	MaxDescriptionBytes      = 10_000 // the Working's description
	MaxFieldDescriptionBytes = 2_000  // a field's description
	MaxPatternBytes          = 1_000  // a text field's pattern
	MaxChoiceValueBytes      = 200    // one value of a choice field (a route when it is the routing output)
)

// longer reports s at path as a violation when it exceeds maxBytes.
func (p *parser) longer(path, s string, maxBytes int) bool {
	if len(s) <= maxBytes {
		return false
	}
	p.add(path, "is longer than %d bytes", maxBytes)
	return true
}

// parser accumulates violations; it never stops at the first one because
// the editor shows every problem of a submission at once.
type parser struct {
	vs []Violation
}

func (p *parser) add(path, format string, args ...any) {
	p.vs = append(p.vs, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
}

// ParseWorking strictly parses a working-copy document and reports every
// problem found, each at a JSON pointer into data. The returned Working is
// the zero value whenever violations are reported.
func ParseWorking(data []byte) (Working, []Violation) {
	root, err := jsontree.Read(data, maxJSONDepth)
	if err != nil {
		return Working{}, ReadViolations(err)
	}
	var p parser
	w := p.working(root)
	if len(p.vs) > 0 {
		return Working{}, p.vs
	}
	return w, nil
}

// ParseContract strictly parses a bare contract document {"fields":[...]}
// with the same rules as the inputs and outputs of ParseWorking.
func ParseContract(data []byte) (Contract, []Violation) {
	root, err := jsontree.Read(data, maxJSONDepth)
	if err != nil {
		return Contract{}, ReadViolations(err)
	}
	var p parser
	c := p.contract(root, "", "")
	if len(p.vs) > 0 {
		return Contract{}, p.vs
	}
	return c, nil
}

// ReadViolations reports a document that jsontree.Read refused as
// Malformed violations: the NUL character at each of its pointers (the
// document is well-formed JSON, but not one Relais can store), anything
// else at the root.
func ReadViolations(err error) []Violation {
	var nul *jsontree.NULError
	if errors.As(err, &nul) {
		vs := make([]Violation, len(nul.Pointers))
		for i, at := range nul.Pointers {
			vs[i] = Violation{Path: at, Message: jsontree.ErrNUL.Error(), Cause: Malformed}
		}
		return vs
	}
	return []Violation{{Path: "", Message: "malformed json: " + err.Error(), Cause: Malformed}}
}

// members reports unknown and duplicate keys of an object node.
// A misspelt key is named with the key it most likely meant.
func (p *parser) members(n *jsontree.Node, path string, allowed []string) {
	for _, i := range n.Dups {
		p.add(jsontree.Pointer(path, n.Keys[i]), "duplicate key %q", n.Keys[i])
	}
	for _, k := range n.Keys {
		if !slices.Contains(allowed, k) {
			p.vs = append(p.vs, Violation{Path: jsontree.Pointer(path, k), Message: fmt.Sprintf("unknown key %q", k) + keyHint(k, path, allowed), Cause: UnknownKey})
		}
	}
}

// yamlBoolWord reports whether s is a word YAML 1.1 read as a boolean.
func yamlBoolWord(s string) bool {
	switch strings.ToLower(s) {
	case "yes", "no", "on", "off", "y", "n":
		return true
	}
	return false
}

// schemaWords are JSON Schema's words for what a contract names otherwise:
// a designer who knows JSON Schema writes them first.
var schemaWords = map[string]string{"enum": "values", "properties": "fields", "minLength": "min_length", "maxLength": "max_length",
	"minItems": "min_items", "maxItems": "max_items"}

// ApplyKeysHint explains an unknown kind or key at a document's root: a
// relais apply file's header, copied into a request body.
const ApplyKeysHint = " (kind and key head a relais apply file; over the API the route's path names the key, and the body is the document without them)"

// keyHint names the allowed key k most likely meant: a misspelling of it,
// JSON Schema's word for it, or another usual word (suggest.Synonym: min
// for minimum); at the root, kind and key are an apply file's.
func keyHint(k, path string, allowed []string) string {
	if path == "" && (k == "kind" || k == "key") {
		return ApplyKeysHint
	}
	if h := suggest.Hint(k, allowed); h != "" {
		return h
	}
	if w, ok := schemaWords[k]; ok && slices.Contains(allowed, w) {
		return fmt.Sprintf(" (did you mean %q? it is JSON Schema's word for it)", w)
	}
	return suggest.Synonym(k, allowed)
}

// str reads an optional string member. JSON null counts as absent because
// many clients serialise unset optional values that way.
func (p *parser) str(n *jsontree.Node, key, path string) (string, bool) {
	v, ok := n.Get(key)
	if !ok || v.Kind == jsontree.Null {
		return "", false
	}
	if v.Kind != jsontree.String {
		p.add(jsontree.Pointer(path, key), "%s must be a string, not %s", key, v.Kind)
		return "", false
	}
	return v.Str, true
}

func (p *parser) working(root *jsontree.Node) Working {
	var w Working
	if root.Kind != jsontree.Object {
		p.add("", "document must be an object, not %s", root.Kind)
		return w
	}
	p.members(root, "", []string{"name", "description", "inputs", "outputs", "routing_output"})

	if name, ok := p.str(root, "name", ""); !ok {
		if v, present := root.Get("name"); !present || v.Kind == jsontree.Null {
			p.add("/name", "name is required")
		}
	} else if strings.TrimSpace(name) == "" {
		p.add("/name", "name must not be empty")
	} else if !p.longer("/name", name, MaxNameBytes) {
		w.Name = name
	}
	if d, ok := p.str(root, "description", ""); ok && !p.longer("/description", d, MaxDescriptionBytes) {
		w.Description = d
	}

	for _, sec := range []struct {
		key string
		dst *Contract
	}{{"inputs", &w.Inputs}, {"outputs", &w.Outputs}} {
		v, ok := root.Get(sec.key)
		if !ok || v.Kind == jsontree.Null {
			p.add("/"+sec.key, "%s is required", sec.key)
			continue
		}
		*sec.dst = p.contract(v, "/"+sec.key, sec.key)
	}

	if ro, ok := p.str(root, "routing_output", ""); ok {
		w.RoutingOutput = ro
		p.routing(w, root)
	}
	return w
}

// routing checks the routing output against the parsed outputs. Processes
// branch on its value, so it must always be present, from a closed set, and
// safe to show.
func (p *parser) routing(w Working, root *jsontree.Node) {
	const at = "/routing_output"
	ro := w.RoutingOutput
	if ro == "" {
		p.add(at, "routing_output must name an output field")
		return
	}
	f, ok := find(w.Outputs.Fields, ro)
	if !ok {
		// A field that failed to parse is not in w.Outputs; say so only when
		// the document really has no such output.
		if !rawHasOutput(root, ro) {
			names := make([]string, len(w.Outputs.Fields))
			for i, f := range w.Outputs.Fields {
				names[i] = f.Name
			}
			p.add(at, "routing_output %q is not an output field%s", ro, suggest.Hint(ro, names))
		}
		return
	}
	if f.Type != TypeChoice {
		p.add(at, "routing_output %q must be a choice field, not %s", ro, f.Type)
	}
	if !f.Required {
		p.add(at, "routing_output %q must be required", ro)
	}
	if f.Classification.Rank() != 0 {
		p.add(at, "routing_output %q must have classification normal, not %s", ro, f.Classification)
	}
}

func rawHasOutput(root *jsontree.Node, name string) bool {
	out, ok := root.Get("outputs")
	if !ok || out.Kind != jsontree.Object {
		return false
	}
	fields, ok := out.Get("fields")
	if !ok || fields.Kind != jsontree.Array {
		return false
	}
	for _, f := range fields.Items {
		if f.Kind != jsontree.Object {
			continue
		}
		if n, ok := f.Get("name"); ok && n.Kind == jsontree.String && n.Str == name {
			return true
		}
	}
	return false
}

// contract parses {"fields":[...]} at path; label names it in messages.
func (p *parser) contract(n *jsontree.Node, path, label string) Contract {
	var c Contract
	if label == "" {
		label = "contract"
	}
	if n.Kind != jsontree.Object {
		p.add(path, "%s must be an object, not %s", label, n.Kind)
		return c
	}
	p.members(n, path, []string{"fields"})
	fv, ok := n.Get("fields")
	if !ok || fv.Kind == jsontree.Null {
		p.add(jsontree.Pointer(path, "fields"), "fields is required")
		return c
	}
	c.Fields = p.fields(fv, jsontree.Pointer(path, "fields"), ClassNormal, 1)
	return c
}

// fields parses a list of named fields whose parent has effective
// classification parent.
func (p *parser) fields(n *jsontree.Node, path string, parent Classification, depth int) []Field {
	if n.Kind != jsontree.Array {
		p.add(path, "fields must be an array, not %s", n.Kind)
		return nil
	}
	var out []Field
	seen := map[string]bool{}
	for i, item := range n.Items {
		fp := jsontree.PointerIndex(path, i)
		f, ok := p.field(item, fp, parent, depth, false)
		if f.Name != "" {
			if seen[f.Name] {
				p.add(jsontree.Pointer(fp, "name"), "duplicate field name %q", f.Name)
				ok = false
			}
			seen[f.Name] = true
		}
		if ok {
			out = append(out, f)
		}
	}
	return out
}

var fieldKeys = []string{"name", "type", "required", "classification", "description",
	"min_length", "max_length", "pattern", "format", "minimum", "maximum",
	"values", "fields", "items", "min_items", "max_items"}

// field parses one field (or list items description when items is true).
// It returns false when the field has problems of its own, so that callers
// can leave it out of the model; nested problems are reported all the same.
func (p *parser) field(n *jsontree.Node, path string, parent Classification, depth int, items bool) (Field, bool) {
	var f Field
	before := len(p.vs)
	what := "field"
	if items {
		what = "items"
	}
	if n.Kind != jsontree.Object {
		p.add(path, "%s must be an object, not %s", what, n.Kind)
		return f, false
	}
	if depth > MaxDepth {
		p.add(path, "fields nested deeper than %d levels", MaxDepth)
		return f, false
	}
	p.members(n, path, fieldKeys)

	// name
	if items {
		if _, ok := n.Get("name"); ok {
			p.add(jsontree.Pointer(path, "name"), "list items must not have a name")
		}
	} else if name, ok := p.str(n, "name", path); ok {
		if !fieldNameRe.MatchString(name) {
			p.add(jsontree.Pointer(path, "name"), "field name %q must match %s", name, fieldNameRe)
		} else {
			f.Name = name
		}
	} else if v, present := n.Get("name"); !present || v.Kind == jsontree.Null {
		p.add(jsontree.Pointer(path, "name"), "name is required")
	}

	// type
	if t, ok := p.str(n, "type", path); ok {
		if validType(Type(t)) {
			f.Type = Type(t)
		} else {
			p.add(jsontree.Pointer(path, "type"), "unknown type %q%s; the types are %s", t, suggest.Hint(t, typeNames), strings.Join(typeNames, ", "))
		}
	} else if v, present := n.Get("type"); !present || v.Kind == jsontree.Null {
		p.add(jsontree.Pointer(path, "type"), "type is required")
	}

	// required
	if v, ok := n.Get("required"); ok && v.Kind != jsontree.Null {
		switch {
		case items:
			p.add(jsontree.Pointer(path, "required"), "list items must not set required")
		case v.Kind == jsontree.String && yamlBoolWord(v.Str):
			// YAML 1.1 read yes as true; the YAML 1.2 apply reads, and
			// JSON, take it for text.
			p.add(jsontree.Pointer(path, "required"), "required must be a boolean, not string %q: write true or false (YAML 1.2 reads yes, no, on and off as text)", v.Str)
		case v.Kind != jsontree.Bool:
			p.add(jsontree.Pointer(path, "required"), "required must be a boolean, not %s", v.Kind)
		default:
			f.Required = v.Bool
		}
	}

	// classification: the effective one is stored, so that nothing
	// downstream has to remember to combine it with the parents'.
	f.Classification = parent
	if c, ok := p.str(n, "classification", path); ok {
		if validClass(Classification(c)) {
			f.Classification = MaxClass(parent, Classification(c))
		} else {
			p.add(jsontree.Pointer(path, "classification"), "unknown classification %q%s, want normal, sensitive or secret", c,
				suggest.Hint(c, []string{string(ClassNormal), string(ClassSensitive), string(ClassSecret)}))
		}
	}
	if d, ok := p.str(n, "description", path); ok && !p.longer(jsontree.Pointer(path, "description"), d, MaxFieldDescriptionBytes) {
		f.Description = d
	}

	p.options(n, path, &f, depth)

	return f, len(p.vs) == before
}

// options parses the type-specific options of f.
func (p *parser) options(n *jsontree.Node, path string, f *Field, depth int) {
	o := optionReader{p: p, n: n, path: path, f: f}
	f.MinLength, f.MaxLength = o.count("min_length"), o.count("max_length")
	if f.MinLength != nil && f.MaxLength != nil && *f.MinLength > *f.MaxLength {
		p.add(jsontree.Pointer(path, "min_length"), "min_length %d is above max_length %d", *f.MinLength, *f.MaxLength)
	}
	f.Pattern = o.pattern()
	f.Format = o.format()
	f.Minimum, f.Maximum = o.bound("minimum"), o.bound("maximum")
	if f.Minimum != nil && f.Maximum != nil && compareNumbers(*f.Minimum, *f.Maximum) > 0 {
		p.add(jsontree.Pointer(path, "minimum"), "minimum %s is above maximum %s", *f.Minimum, *f.Maximum)
	}

	if v, ok := o.present("values"); ok {
		p.values(v, jsontree.Pointer(path, "values"), f)
	} else if f.Type == TypeChoice {
		p.add(jsontree.Pointer(path, "values"), "values is required on choice fields")
	}
	if v, ok := o.present("fields"); ok {
		f.Fields = p.fields(v, jsontree.Pointer(path, "fields"), f.Classification, depth+1)
	} else if f.Type == TypeObject {
		p.add(jsontree.Pointer(path, "fields"), "fields is required on object fields")
	}
	if v, ok := o.present("items"); ok {
		items, ok := p.field(v, jsontree.Pointer(path, "items"), f.Classification, depth+1, true)
		if ok {
			f.Items = &items
		}
	} else if f.Type == TypeList {
		p.add(jsontree.Pointer(path, "items"), "items is required on list fields")
	}

	f.MinItems, f.MaxItems = o.count("min_items"), o.count("max_items")
	if f.MinItems != nil && f.MaxItems != nil && *f.MinItems > *f.MaxItems {
		p.add(jsontree.Pointer(path, "min_items"), "min_items %d is above max_items %d", *f.MinItems, *f.MaxItems)
	}
}

// optionReader reads the options of field f from its node n, at path,
// reporting problems through p.
type optionReader struct {
	p    *parser
	n    *jsontree.Node
	path string
	f    *Field
}

// present returns option key unless it is absent or null. An option
// foreign to the type is reported at its own pointer; when the type itself
// is unknown there is nothing to judge it against.
func (o optionReader) present(key string) (*jsontree.Node, bool) {
	v, ok := o.n.Get(key)
	if !ok || v.Kind == jsontree.Null {
		return nil, false
	}
	if o.f.Type != "" && !allowsOption(o.f.Type, key) {
		o.p.add(jsontree.Pointer(o.path, key), "%s is not allowed on %s fields", key, o.f.Type)
		return nil, false
	}
	return v, true
}

// count reads a length or item count: an integer from 0 to maxCount.
func (o optionReader) count(key string) *int64 {
	v, ok := o.present(key)
	if !ok {
		return nil
	}
	at := jsontree.Pointer(o.path, key)
	if v.Kind != jsontree.Number {
		o.p.add(at, "%s must be an integer, not %s", key, v.Kind)
		return nil
	}
	i, err := strconv.ParseInt(v.Num.String(), 10, 64)
	switch {
	case err != nil && isIntegral(v.Num):
		o.p.add(at, "%s %s is too large", key, v.Num)
	case err != nil:
		o.p.add(at, "%s must be an integer, not %s", key, v.Num)
	case i < 0:
		o.p.add(at, "%s must not be negative", key)
	case i > maxCount:
		o.p.add(at, "%s must be at most %d", key, int64(maxCount))
	default:
		return &i
	}
	return nil
}

// bound reads a minimum or maximum: a number in range, integral on
// integer fields.
func (o optionReader) bound(key string) *json.Number {
	v, ok := o.present(key)
	if !ok {
		return nil
	}
	at := jsontree.Pointer(o.path, key)
	switch {
	case v.Kind != jsontree.Number:
		o.p.add(at, "%s must be a number, not %s", key, v.Kind)
	case literalTooLong(v.Num):
		o.p.add(at, "%s is written with more than %d characters", key, MaxNumberLiteral)
	case !numberInRange(v.Num):
		o.p.add(at, "%s %s is out of range: 0, or a magnitude from 1e-%d to below 1e%d", key, v.Num, MaxNumberOrder, MaxNumberOrder+1)
	case o.f.Type == TypeInteger && !isIntegral(v.Num):
		o.p.add(at, "%s must be an integer on integer fields", key)
	default:
		num := v.Num
		return &num
	}
	return nil
}

// pattern reads a regular expression Go's regexp compiles.
func (o optionReader) pattern() string {
	v, ok := o.present("pattern")
	if !ok {
		return ""
	}
	at := jsontree.Pointer(o.path, "pattern")
	switch {
	case v.Kind != jsontree.String:
		o.p.add(at, "pattern must be a string, not %s", v.Kind)
	case o.p.longer(at, v.Str, MaxPatternBytes):
	default:
		if _, err := regexp.Compile(v.Str); err != nil {
			msg := strings.TrimPrefix(err.Error(), "error parsing regexp: ")
			for _, look := range []string{"(?=", "(?!", "(?<=", "(?<!"} {
				if strings.Contains(v.Str, look) {
					// RE2's words (an "invalid named capture" for a
					// lookbehind) do not name what is refused.
					msg = "lookarounds ((?=…), (?!…), (?<=…), (?<!…)) are not supported: patterns are RE2, which matches in linear time (" + msg + ")"
					break
				}
			}
			o.p.add(at, "pattern is not a valid regular expression: %s", msg)
			return ""
		}
		return v.Str
	}
	return ""
}

// format reads one of the known string formats.
func (o optionReader) format() string {
	v, ok := o.present("format")
	if !ok {
		return ""
	}
	at := jsontree.Pointer(o.path, "format")
	switch {
	case v.Kind != jsontree.String:
		o.p.add(at, "format must be a string, not %s", v.Kind)
	case !validFormat(v.Str):
		hint := suggest.Hint(v.Str, []string{FormatEmail, FormatURI, FormatUUID})
		switch lower := strings.ToLower(v.Str); {
		case validFormat(lower):
			hint = suggest.Meant(lower)
		case lower == "date" || lower == "date-time" || lower == "datetime":
			// JSON Schema's formats are Relais's types (verifier QA).
			hint = fmt.Sprintf(" (a %s is a type here: type: %s, without a format)", lower, map[string]Type{"date": TypeDate, "date-time": TypeDatetime, "datetime": TypeDatetime}[lower])
		}
		o.p.add(at, "unknown format %q, want email, uri or uuid%s", v.Str, hint)
	default:
		return v.Str
	}
	return ""
}

func (p *parser) values(v *jsontree.Node, at string, f *Field) {
	if v.Kind != jsontree.Array {
		p.add(at, "values must be an array, not %s", v.Kind)
		return
	}
	if len(v.Items) == 0 {
		p.add(at, "values must not be empty")
		return
	}
	seen := map[string]bool{}
	vals := make([]string, 0, len(v.Items))
	for i, item := range v.Items {
		ip := jsontree.PointerIndex(at, i)
		switch {
		case item.Kind == jsontree.Number:
			// YAML reads 1.10 as the number 1.1: quoted, it stays the
			// value its author wrote (designer QA).
			p.add(ip, "choice value must be a string, not number (quote it: %q)", item.Num.String())
		case item.Kind != jsontree.String:
			p.add(ip, "choice value must be a string, not %s", item.Kind)
		case item.Str == "":
			p.add(ip, "choice value must not be empty")
		case p.longer(ip, item.Str, MaxChoiceValueBytes):
		case seen[item.Str]:
			p.add(ip, "duplicate choice value %q", item.Str)
		default:
			seen[item.Str] = true
			vals = append(vals, item.Str)
		}
	}
	f.Values = vals
}
