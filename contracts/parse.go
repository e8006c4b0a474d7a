package contracts

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxDepth is the deepest field nesting a contract may declare. Top-level
// fields are at depth 1; every object or list level adds one.
const MaxDepth = 32

// maxCount bounds length and item counts. JSON Schema validators commonly
// carry these as float64, so larger values would silently lose precision.
const maxCount = 1<<53 - 1

var fieldNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

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
	root, err := readTree(data)
	if err != nil {
		return Working{}, []Violation{{Path: "", Message: "malformed json: " + err.Error()}}
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
	root, err := readTree(data)
	if err != nil {
		return Contract{}, []Violation{{Path: "", Message: "malformed json: " + err.Error()}}
	}
	var p parser
	c := p.contract(root, "", "")
	if len(p.vs) > 0 {
		return Contract{}, p.vs
	}
	return c, nil
}

// members reports unknown and duplicate keys of an object node.
func (p *parser) members(n *jnode, path string, allowed func(string) bool) {
	for _, i := range n.dups {
		p.add(ptr(path, n.keys[i]), "duplicate key %q", n.keys[i])
	}
	for _, k := range n.keys {
		if !allowed(k) {
			p.add(ptr(path, k), "unknown key %q", k)
		}
	}
}

func keySet(keys ...string) func(string) bool {
	return func(k string) bool {
		for _, a := range keys {
			if a == k {
				return true
			}
		}
		return false
	}
}

// str reads an optional string member. JSON null counts as absent because
// many clients serialise unset optional values that way.
func (p *parser) str(n *jnode, key, path string) (string, bool) {
	v, ok := n.get(key)
	if !ok || v.kind == jNull {
		return "", false
	}
	if v.kind != jString {
		p.add(ptr(path, key), "%s must be a string, not %s", key, v.kind)
		return "", false
	}
	return v.str, true
}

func (p *parser) working(root *jnode) Working {
	var w Working
	if root.kind != jObject {
		p.add("", "document must be an object, not %s", root.kind)
		return w
	}
	p.members(root, "", keySet("name", "description", "inputs", "outputs", "routing_output"))

	if name, ok := p.str(root, "name", ""); !ok {
		if v, present := root.get("name"); !present || v.kind == jNull {
			p.add("/name", "name is required")
		}
	} else if strings.TrimSpace(name) == "" {
		p.add("/name", "name must not be empty")
	} else {
		w.Name = name
	}
	w.Description, _ = p.str(root, "description", "")

	for _, sec := range []struct {
		key string
		dst *Contract
	}{{"inputs", &w.Inputs}, {"outputs", &w.Outputs}} {
		v, ok := root.get(sec.key)
		if !ok || v.kind == jNull {
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
func (p *parser) routing(w Working, root *jnode) {
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
			p.add(at, "routing_output %q is not an output field", ro)
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

func rawHasOutput(root *jnode, name string) bool {
	out, ok := root.get("outputs")
	if !ok || out.kind != jObject {
		return false
	}
	fields, ok := out.get("fields")
	if !ok || fields.kind != jArray {
		return false
	}
	for _, f := range fields.items {
		if f.kind != jObject {
			continue
		}
		if n, ok := f.get("name"); ok && n.kind == jString && n.str == name {
			return true
		}
	}
	return false
}

// contract parses {"fields":[...]} at path; label names it in messages.
func (p *parser) contract(n *jnode, path, label string) Contract {
	var c Contract
	if label == "" {
		label = "contract"
	}
	if n.kind != jObject {
		p.add(path, "%s must be an object, not %s", label, n.kind)
		return c
	}
	p.members(n, path, keySet("fields"))
	fv, ok := n.get("fields")
	if !ok || fv.kind == jNull {
		p.add(ptr(path, "fields"), "fields is required")
		return c
	}
	c.Fields = p.fields(fv, ptr(path, "fields"), ClassNormal, 1)
	return c
}

// fields parses a list of named fields whose parent has effective
// classification parent.
func (p *parser) fields(n *jnode, path string, parent Classification, depth int) []Field {
	if n.kind != jArray {
		p.add(path, "fields must be an array, not %s", n.kind)
		return nil
	}
	var out []Field
	seen := map[string]bool{}
	for i, item := range n.items {
		fp := ptrIndex(path, i)
		f, ok := p.field(item, fp, parent, depth, false)
		if f.Name != "" {
			if seen[f.Name] {
				p.add(ptr(fp, "name"), "duplicate field name %q", f.Name)
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

var fieldKeys = keySet("name", "type", "required", "classification", "description",
	"min_length", "max_length", "pattern", "format", "minimum", "maximum",
	"values", "fields", "items", "min_items", "max_items")

// field parses one field (or list items description when items is true).
// It returns false when the field has problems of its own, so that callers
// can leave it out of the model; nested problems are reported all the same.
func (p *parser) field(n *jnode, path string, parent Classification, depth int, items bool) (Field, bool) {
	var f Field
	before := len(p.vs)
	what := "field"
	if items {
		what = "items"
	}
	if n.kind != jObject {
		p.add(path, "%s must be an object, not %s", what, n.kind)
		return f, false
	}
	if depth > MaxDepth {
		p.add(path, "fields nested deeper than %d levels", MaxDepth)
		return f, false
	}
	p.members(n, path, fieldKeys)

	// name
	if items {
		if _, ok := n.get("name"); ok {
			p.add(ptr(path, "name"), "list items must not have a name")
		}
	} else if name, ok := p.str(n, "name", path); ok {
		if !fieldNameRe.MatchString(name) {
			p.add(ptr(path, "name"), "field name %q must match %s", name, fieldNameRe)
		} else {
			f.Name = name
		}
	} else if v, present := n.get("name"); !present || v.kind == jNull {
		p.add(ptr(path, "name"), "name is required")
	}

	// type
	if t, ok := p.str(n, "type", path); ok {
		if validType(Type(t)) {
			f.Type = Type(t)
		} else {
			p.add(ptr(path, "type"), "unknown type %q", t)
		}
	} else if v, present := n.get("type"); !present || v.kind == jNull {
		p.add(ptr(path, "type"), "type is required")
	}

	// required
	if v, ok := n.get("required"); ok && v.kind != jNull {
		switch {
		case items:
			p.add(ptr(path, "required"), "list items must not set required")
		case v.kind != jBool:
			p.add(ptr(path, "required"), "required must be a boolean, not %s", v.kind)
		default:
			f.Required = v.b
		}
	}

	// classification: the effective one is stored, so that nothing
	// downstream has to remember to combine it with the parents'.
	f.Classification = parent
	if c, ok := p.str(n, "classification", path); ok {
		if validClass(Classification(c)) {
			f.Classification = MaxClass(parent, Classification(c))
		} else {
			p.add(ptr(path, "classification"), "unknown classification %q, want normal, sensitive or secret", c)
		}
	}
	f.Description, _ = p.str(n, "description", path)

	p.options(n, path, &f, depth)

	return f, len(p.vs) == before
}

// options parses the type-specific options of f.
func (p *parser) options(n *jnode, path string, f *Field, depth int) {
	// Options foreign to the type are reported at their own pointer; when
	// the type itself is unknown there is nothing to judge them against.
	present := func(key string) (*jnode, bool) {
		v, ok := n.get(key)
		if !ok || v.kind == jNull {
			return nil, false
		}
		if f.Type != "" && !allowsOption(f.Type, key) {
			p.add(ptr(path, key), "%s is not allowed on %s fields", key, f.Type)
			return nil, false
		}
		return v, true
	}

	count := func(key string) *int64 {
		v, ok := present(key)
		if !ok {
			return nil
		}
		at := ptr(path, key)
		if v.kind != jNumber {
			p.add(at, "%s must be an integer, not %s", key, v.kind)
			return nil
		}
		i, err := strconv.ParseInt(v.num.String(), 10, 64)
		switch {
		case err != nil && isIntegral(v.num):
			p.add(at, "%s %s is too large", key, v.num)
		case err != nil:
			p.add(at, "%s must be an integer, not %s", key, v.num)
		case i < 0:
			p.add(at, "%s must not be negative", key)
		case i > maxCount:
			p.add(at, "%s must be at most %d", key, int64(maxCount))
		default:
			return &i
		}
		return nil
	}

	bound := func(key string) *json.Number {
		v, ok := present(key)
		if !ok {
			return nil
		}
		at := ptr(path, key)
		switch {
		case v.kind != jNumber:
			p.add(at, "%s must be a number, not %s", key, v.kind)
		case !numberInRange(v.num):
			p.add(at, "%s %s is out of range", key, v.num)
		case f.Type == TypeInteger && !isIntegral(v.num):
			p.add(at, "%s must be an integer on integer fields", key)
		default:
			num := v.num
			return &num
		}
		return nil
	}

	f.MinLength, f.MaxLength = count("min_length"), count("max_length")
	if f.MinLength != nil && f.MaxLength != nil && *f.MinLength > *f.MaxLength {
		p.add(ptr(path, "min_length"), "min_length %d is above max_length %d", *f.MinLength, *f.MaxLength)
	}

	if v, ok := present("pattern"); ok {
		at := ptr(path, "pattern")
		if v.kind != jString {
			p.add(at, "pattern must be a string, not %s", v.kind)
		} else if _, err := regexp.Compile(v.str); err != nil {
			p.add(at, "pattern is not a valid regular expression: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		} else {
			f.Pattern = v.str
		}
	}
	if v, ok := present("format"); ok {
		at := ptr(path, "format")
		if v.kind != jString {
			p.add(at, "format must be a string, not %s", v.kind)
		} else if !validFormat(v.str) {
			p.add(at, "unknown format %q, want email, uri or uuid", v.str)
		} else {
			f.Format = v.str
		}
	}

	f.Minimum, f.Maximum = bound("minimum"), bound("maximum")
	if f.Minimum != nil && f.Maximum != nil && compareNumbers(*f.Minimum, *f.Maximum) > 0 {
		p.add(ptr(path, "minimum"), "minimum %s is above maximum %s", *f.Minimum, *f.Maximum)
	}

	if v, ok := present("values"); ok {
		p.values(v, ptr(path, "values"), f)
	} else if f.Type == TypeChoice {
		p.add(ptr(path, "values"), "values is required on choice fields")
	}

	if v, ok := present("fields"); ok {
		f.Fields = p.fields(v, ptr(path, "fields"), f.Classification, depth+1)
	} else if f.Type == TypeObject {
		p.add(ptr(path, "fields"), "fields is required on object fields")
	}

	if v, ok := present("items"); ok {
		items, ok := p.field(v, ptr(path, "items"), f.Classification, depth+1, true)
		if ok {
			f.Items = &items
		}
	} else if f.Type == TypeList {
		p.add(ptr(path, "items"), "items is required on list fields")
	}

	f.MinItems, f.MaxItems = count("min_items"), count("max_items")
	if f.MinItems != nil && f.MaxItems != nil && *f.MinItems > *f.MaxItems {
		p.add(ptr(path, "min_items"), "min_items %d is above max_items %d", *f.MinItems, *f.MaxItems)
	}
}

func (p *parser) values(v *jnode, at string, f *Field) {
	if v.kind != jArray {
		p.add(at, "values must be an array, not %s", v.kind)
		return
	}
	if len(v.items) == 0 {
		p.add(at, "values must not be empty")
		return
	}
	seen := map[string]bool{}
	vals := make([]string, 0, len(v.items))
	for i, item := range v.items {
		ip := ptrIndex(at, i)
		switch {
		case item.kind != jString:
			p.add(ip, "choice value must be a string, not %s", item.kind)
		case item.str == "":
			p.add(ip, "choice value must not be empty")
		case seen[item.str]:
			p.add(ip, "duplicate choice value %q", item.str)
		default:
			seen[item.str] = true
			vals = append(vals, item.str)
		}
	}
	f.Values = vals
}
