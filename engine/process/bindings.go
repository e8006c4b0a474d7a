package process

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

// Source path roots.
const (
	srcInput       = "input"
	srcNodes       = "nodes"
	srcOutput      = "output"
	srcError       = "error"
	srcErrorCode   = "code"
	srcErrorMsg    = "message"
	srcInstance    = "instance"
	srcInstanceID  = "id"
	srcBusinessKey = "business_key"
)

// instanceID and businessKey describe the instance sources as fields, so
// that they go through the same assignability rules as contract fields.
var (
	instanceIDField  = contracts.Field{Name: srcInstanceID, Type: contracts.TypeText, Required: true, Classification: contracts.ClassNormal, Format: contracts.FormatUUID}
	businessKeyField = contracts.Field{Name: srcBusinessKey, Type: contracts.TypeText, Classification: contracts.ClassNormal}
	// A failed occurrence always keeps its code and (scrubbed, maybe
	// empty) message, so both are required; both are normal (DESIGN §11).
	errorCodeField    = contracts.Field{Name: srcErrorCode, Type: contracts.TypeText, Required: true, Classification: contracts.ClassNormal}
	errorMessageField = contracts.Field{Name: srcErrorMsg, Type: contracts.TypeText, Required: true, Classification: contracts.ClassNormal}
)

// sourceForms lists every source form, for messages about an unknown one.
const sourceForms = "input.<field>, nodes.<node>.output.<field>, nodes.<node>.error.code, nodes.<node>.error.message, instance.id or instance.business_key"

// source is what a from path denotes: the field, its effective
// classification rank along the path, and whether any step may be absent.
type source struct {
	field    contracts.Field
	rank     int
	optional bool
	// kept names where the instance keeps the source's value as its own
	// class says ("" when the source is another node's outputs, whose
	// contract decided): a process input, or the business key, which
	// must then be classified at least as the field it feeds.
	kept string
}

var classNames = [...]string{"normal", "sensitive", "secret"}

func className(rank int) string {
	if rank < 0 || rank >= len(classNames) {
		return "secret"
	}
	return classNames[rank]
}

// bindings checks the input bindings of a pull or push node against its
// pinned revision w.
func (k *checker) bindings(name string, n *Node, w contracts.Working) {
	at := jsontree.Pointer("/nodes", name, "inputs")
	for _, f := range w.Inputs.Fields {
		if _, bound := n.Inputs[f.Name]; f.Required && !bound {
			k.add(at, "required input %q is not bound", f.Name)
		}
	}
	for _, target := range sortedKeys(n.Inputs) {
		b := n.Inputs[target]
		bat := jsontree.Pointer(at, target)
		tf, ok := findField(w.Inputs.Fields, target)
		if !ok {
			if parent, _, nested := strings.Cut(target, "."); nested {
				if pf, ok := findField(w.Inputs.Fields, parent); ok && pf.Type == contracts.TypeObject {
					// A designer binding an object's parts one by one
					// read no way out (designer QA).
					k.add(bat, "%q is not an input of %s@%d: an object input is bound whole; bind %q from an object with its fields, or from a value",
						target, n.Definition, n.Revision, parent)
					continue
				}
			}
			k.add(bat, "%q is not an input of %s@%d%s", target, n.Definition, n.Revision, suggest.Hint(target, fieldNames(w.Inputs.Fields)))
			continue
		}
		switch {
		case b.From != "" && b.Value != nil:
			k.add(bat, "binding must have either from or value, not both")
		case b.From == "" && b.Value == nil:
			k.add(bat, "binding must have either from or value")
		case b.Value != nil:
			if !k.literalProtected(bat, tf) {
				k.literal(bat, tf, b.Value)
			}
		default:
			src, problem, ok := k.source(name, b.From)
			if problem != "" {
				k.add(jsontree.Pointer(bat, "from"), "%s", problem)
			}
			if ok {
				k.assignBinding(bat, tf, src)
			}
		}
	}
}

// literalProtected reports at bat, and returns true, when the target
// field tf is sensitive or secret or holds such a field. A literal is
// part of the process version document, which is stored, digested and
// served to designers and operators in clear: a protected value written
// there would escape the sealing and masking that protect every other
// copy of it (DESIGN §5). Such a value must come from a process input,
// whose classification seals and masks it on each instance.
func (k *checker) literalProtected(bat string, tf contracts.Field) bool {
	where, class, ok := protectedField(tf, contracts.ClassNormal, tf.Name)
	if !ok {
		return false
	}
	if where == tf.Name {
		k.add(bat, `%s input %s cannot take a literal value: the process version would hold it in clear; bind it from a process input declared %s, as in {"from": "input.<path>"}`,
			class, tf.Name, class)
	} else {
		k.add(bat, `input %s cannot take a literal value: its field %s is %s and the process version would hold it in clear; bind %s from a process input whose fields are declared with the same classifications, as in {"from": "input.<path>"}`,
			tf.Name, where, class, tf.Name)
	}
	return true
}

// protectedField finds the first sensitive or secret field in f (f
// itself first, then its fields and list items depth first), with its
// effective classification: the most protected along the path from the
// target, parent being what f inherits. where names f in messages.
// Parsed contracts already store effective classifications; combining
// them again keeps a hand-built contract from slipping through.
func protectedField(f contracts.Field, parent contracts.Classification, where string) (string, contracts.Classification, bool) {
	class := contracts.MaxClass(parent, f.Classification)
	if class.Rank() > 0 {
		return where, class, true
	}
	for _, sf := range f.Fields {
		if w, c, ok := protectedField(sf, class, where+"."+sf.Name); ok {
			return w, c, true
		}
	}
	if f.Items != nil {
		return protectedField(*f.Items, class, where+"[]")
	}
	return "", "", false
}

// literal validates a literal value with the target field's own rules, by
// the same validator that will judge the node's inputs at run time.
func (k *checker) literal(bat string, tf contracts.Field, value json.RawMessage) {
	ct := contracts.Contract{Fields: []contracts.Field{tf}}
	digest := ct.Digest()
	v, ok := k.validators[digest]
	if !ok {
		var err error
		v, err = contracts.Compile(ct)
		if err != nil {
			k.add(jsontree.Pointer(bat, "value"), "cannot validate the literal: %v", err)
			return
		}
		k.validators[digest] = v
	}
	doc := jsontree.AppendString([]byte{'{'}, tf.Name)
	doc = append(doc, ':')
	doc = append(doc, value...)
	doc = append(doc, '}')
	prefix := jsontree.Pointer("", tf.Name)
	for _, x := range v.Validate(doc) {
		rest := x.Path
		if rest == prefix || strings.HasPrefix(rest, prefix+"/") {
			rest = rest[len(prefix):]
		} else {
			rest = ""
		}
		k.add(jsontree.Pointer(bat, "value")+rest, "%s", x.Message)
	}
}

// source resolves a from path seen from node. It returns a problem to
// report at the from pointer, and ok when the source is known well enough
// to judge assignability. A source whose node has an unknown revision is
// neither: that is already reported at the source node.
func (k *checker) source(node, from string) (src source, problem string, ok bool) {
	segs := strings.Split(from, ".")
	for _, s := range segs {
		if s == "" {
			return src, fmt.Sprintf("malformed source %q: empty path segment", from), false
		}
	}
	switch segs[0] {
	case srcInput:
		if len(segs) < 2 {
			return src, fmt.Sprintf("source %q must name a process input field, as in input.<field>", from), false
		}
		src, problem, ok := walk(k.p.Inputs.Fields, segs[1:], from)
		src.kept = "process input"
		return src, problem, ok
	case srcNodes:
		if len(segs) < 3 || (segs[2] != srcOutput && segs[2] != srcError) || (segs[2] == srcOutput && len(segs) < 4) {
			hint := ""
			if len(segs) >= 4 {
				// Only a source that, mended, names a field or the error's
				// code or message: a hint must not lead to another refusal.
				hint = segmentHint(segs, 2, srcOutput, srcError)
			}
			return src, fmt.Sprintf("source %q must look like nodes.<node>.output.<field> or nodes.<node>.error.code%s", from, hint), false
		}
		up := segs[1]
		what := "outputs"
		if segs[2] == srcError {
			what = "error"
		}
		n, known := k.p.Nodes[up]
		switch {
		case !known || n == nil:
			return src, fmt.Sprintf("source %q names unknown node %q%s", from, up, suggest.Hint(up, k.names)), false
		case up == node:
			return src, fmt.Sprintf("source %q: a node cannot read its own %s", from, what), false
		case n.Kind != KindPull && n.Kind != KindPush:
			return src, fmt.Sprintf("source %q: node %q is an end node and has no %s", from, up, what), false
		}
		if segs[2] == srcError {
			return k.errorSource(up, node, segs[3:], from)
		}
		w, pinned := k.revs[up]
		if !pinned {
			return src, "", false
		}
		src, problem, ok = walk(w.Outputs.Fields, segs[3:], from)
		if ok && !k.completes(up, node) {
			// The type is still judged: both problems are worth fixing.
			problem = fmt.Sprintf("node %q does not always complete before %q: a path from start reaches %q without a successful exit of %q (%s)",
				up, node, node, up, k.pathAvoiding(avoidKey{up, true}, node))
		}
		return src, problem, ok
	case srcInstance:
		if len(segs) == 2 {
			switch segs[1] {
			case srcInstanceID:
				return source{field: instanceIDField}, "", true
			case srcBusinessKey:
				return source{field: businessKeyField, optional: true, kept: "business key"}, "", true
			}
		}
		return src, fmt.Sprintf("unknown source %q: want instance.id or instance.business_key", from), false
	}
	return src, fmt.Sprintf("unknown source %q: want %s%s", from, sourceForms, segmentHint(segs, 0, srcInput, srcNodes, srcInstance)), false
}

// segmentHint returns ` (did you mean "…"?)` with the source segs with
// segment i replaced by the word it most likely misspells ("outputs" for
// output), or "" when none is close.
func segmentHint(segs []string, i int, words ...string) string {
	w, ok := suggest.Closest(segs[i], words)
	if !ok {
		return ""
	}
	fixed := slices.Clone(segs)
	fixed[i] = w
	return fmt.Sprintf(" (did you mean %q?)", strings.Join(fixed, "."))
}

// errorSource resolves nodes.<up>.error.<rest> read by node: the code or
// the message of up's failed occurrence. It exists only when up failed, so
// node must be reached through one of up's on_error edges on every path
// (up's failure dominates node), as a node's outputs need its success.
func (k *checker) errorSource(up, node string, rest []string, from string) (source, string, bool) {
	var src source
	switch {
	case len(rest) == 1 && rest[0] == srcErrorCode:
		src.field = errorCodeField
	case len(rest) == 1 && rest[0] == srcErrorMsg:
		src.field = errorMessageField
	default:
		return src, fmt.Sprintf("unknown source %q: a node's error has only code and message, as in nodes.%s.error.code", from, up), false
	}
	if !k.fails(up, node) {
		return src, fmt.Sprintf("node %q does not always fail before %q: a path from start reaches %q without an on_error edge of %q (%s)",
			up, node, node, up, k.pathAvoiding(avoidKey{up, false}, node)), true
	}
	return src, "", true
}

// walk follows dotted field names through objects. Lists are not
// traversed: an item has no name and a binding must denote one value.
func walk(fields []contracts.Field, path []string, from string) (source, string, bool) {
	var src source
	for i, seg := range path {
		if i > 0 {
			switch src.field.Type {
			case contracts.TypeObject:
			case contracts.TypeList:
				return source{}, fmt.Sprintf("unknown source %q: %s is a list and its items cannot be addressed", from, path[i-1]), false
			default:
				return source{}, fmt.Sprintf("unknown source %q: %s is a %s, not an object", from, path[i-1], src.field.Type), false
			}
		}
		f, ok := findField(fields, seg)
		if !ok {
			return source{}, fmt.Sprintf("unknown source %q: no field %q%s", from, seg, suggest.Hint(seg, fieldNames(fields))), false
		}
		src.field = f
		src.rank = max(src.rank, f.Classification.Rank())
		src.optional = src.optional || !f.Required
		fields = f.Fields
	}
	return src, "", true
}

// assignBinding reports at bat every reason src cannot feed the top-level
// target field tf.
func (k *checker) assignBinding(bat string, tf contracts.Field, src source) {
	if src.optional && tf.Required {
		k.add(bat, "source may be absent but input %s is required", tf.Name)
	}
	for _, m := range assign(src.field, tf, src.rank, 0, tf.Name, true, src.kept) {
		k.add(bat, "%s", m)
	}
}

// assign lists why a value of field s (effective rank sRank from its
// parents) cannot always be accepted by field t (rank tRank from its
// parents). where names the target field for messages; kept says where
// the instance keeps s's value as s's class says (see source.kept).
func assign(s, t contracts.Field, sRank, tRank int, where string, top bool, kept string) []string {
	var out []string
	sRank = max(sRank, s.Classification.Rank())
	tRank = max(tRank, t.Classification.Rank())
	switch {
	case sRank > tRank && kept == "process input":
		// The one input may also feed a field of a higher class elsewhere,
		// which its class had to rise to: no class fits both, and saying
		// so spares a designer going round between the two refusals.
		// Either side may move: the field's class up, which keeps the
		// value protected (designer QA: only lowering it was offered).
		out = append(out, fmt.Sprintf("%s source cannot feed %s field %s: protection may only grow; classify %s %s in a new revision of the node's definition, or feed it from a process input classified %s (an input feeding fields of two classes fits neither: give each field an input of its own)",
			className(sRank), className(tRank), where, where, className(sRank), className(tRank)))
	case sRank > tRank:
		// Protection may only grow: a lower class would show or store in
		// clear what the source promised to protect.
		// The fix is the target's (designer QA: the message said none).
		out = append(out, fmt.Sprintf("%s source cannot feed %s field %s: protection may only grow; classify %s %s in a new revision of the node's definition",
			className(sRank), className(tRank), where, where, className(sRank)))
	case kept == "business key" && sRank < tRank:
		// Nor may it grow from what the instance keeps less protected:
		// the value the definition protects would be stored and shown
		// there as it is.
		out = append(out, fmt.Sprintf("the business key, stored and shown in clear, cannot feed %s field %s; bind a process input classified %s",
			className(tRank), where, className(tRank)))
	case kept != "" && sRank < tRank:
		out = append(out, fmt.Sprintf("%s process input cannot feed %s field %s: the instance would store and show the value as its input, less protected; classify the process input %s (an input feeding fields of two classes fits neither: give each field an input of its own)",
			className(sRank), className(tRank), where, className(tRank)))
	}
	mismatch := func() {
		if top {
			out = append(out, fmt.Sprintf("type %s cannot feed %s", s.Type, t.Type))
		} else {
			out = append(out, fmt.Sprintf("field %s: type %s cannot feed %s", where, s.Type, t.Type))
		}
	}
	switch {
	case s.Type == t.Type:
		switch s.Type {
		case contracts.TypeChoice:
			for _, v := range s.Values {
				if !contains(t.Values, v) {
					out = append(out, fmt.Sprintf("choice value %q of the source is not a value of field %s", v, where))
				}
			}
		case contracts.TypeObject:
			for _, tf := range t.Fields {
				sf, ok := findField(s.Fields, tf.Name)
				if tf.Required && (!ok || !sf.Required) {
					out = append(out, fmt.Sprintf("field %s.%s is required but the source may lack it", where, tf.Name))
				}
			}
			for _, sf := range s.Fields {
				tf, ok := findField(t.Fields, sf.Name)
				if !ok {
					// Unknown properties are rejected at run time, so a
					// source field the target lacks would fail every time
					// it is present.
					out = append(out, fmt.Sprintf("source field %s.%s is not a field of the target: an object is bound whole, its fields the target's; bind it from an object of the target's fields, or add %s to the target in a new revision of its definition",
						where, sf.Name, sf.Name))
					continue
				}
				out = append(out, assign(sf, tf, sRank, tRank, where+"."+sf.Name, false, kept)...)
			}
		case contracts.TypeList:
			if s.Items != nil && t.Items != nil {
				out = append(out, assign(*s.Items, *t.Items, sRank, tRank, where+"[]", false, kept)...)
			}
		}
	case s.Type == contracts.TypeInteger && t.Type == contracts.TypeNumber:
	case s.Type == contracts.TypeChoice && t.Type == contracts.TypeText:
	default:
		mismatch()
	}
	return out
}

// fieldNames are the names of fields, for a suggestion.
func fieldNames(fields []contracts.Field) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}
