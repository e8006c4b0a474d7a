package contracts

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ChangeKind names one kind of difference between two revisions.
type ChangeKind string

// Change kinds reported by Diff.
const (
	// ChangeAdded is a field present only in the newer revision.
	ChangeAdded ChangeKind = "added"
	// ChangeRemoved is a field present only in the older revision.
	ChangeRemoved ChangeKind = "removed"
	// ChangeTypeChanged is a field whose type differs.
	ChangeTypeChanged ChangeKind = "type_changed"
	// ChangeRequiredChanged is a field that became required or optional.
	ChangeRequiredChanged ChangeKind = "required_changed"
	// ChangeChoicesChanged is a choice field whose values differ.
	ChangeChoicesChanged ChangeKind = "choices_changed"
	// ChangeClassificationChanged is a field whose effective
	// classification differs.
	ChangeClassificationChanged ChangeKind = "classification_changed"
	// ChangeConstraintChanged is one option (length, bounds, pattern,
	// format, item counts) that differs.
	ChangeConstraintChanged ChangeKind = "constraint_changed"
	// ChangeRoutingChanged is a routing output added, removed or renamed.
	ChangeRoutingChanged ChangeKind = "routing_changed"
)

// Change is one difference between two revisions and whom it breaks.
type Change struct {
	Kind ChangeKind `json:"kind"`
	// Path is the field path, such as "/inputs/company/name"; list items
	// are the segment "[]", and routing changes are at "/routing_output".
	Path   string `json:"path"`
	Detail string `json:"detail"`
	// BreaksProcesses: processes that bind the inputs, or read or route on
	// the outputs, may stop working.
	BreaksProcesses bool `json:"breaks_processes"`
	// BreaksWorkers: workers that read the inputs or write the outputs may
	// stop working.
	BreaksWorkers bool `json:"breaks_workers"`
	// LowersProtection: a classification change to a lower one (secret →
	// sensitive or normal, sensitive → normal). It may break nothing, yet
	// values masked and sealed until then are shown and stored in clear
	// from this revision on, which a reviewer wants named, not counted.
	LowersProtection bool `json:"lowers_protection"`
}

// impact says which side of the data flow a change breaks. Inputs are
// produced by processes and consumed by workers; outputs the other way
// round. Most rules are symmetric in those terms.
type impact uint8

const (
	breaksNone      impact = 0
	breaksProducers impact = 1
	breaksConsumers impact = 2
	breaksBoth      impact = breaksProducers | breaksConsumers
)

type differ struct {
	out    []Change
	inputs bool // section being compared
}

func (d *differ) add(kind ChangeKind, path, detail string, im impact) {
	c := Change{Kind: kind, Path: path, Detail: detail}
	prod, cons := im&breaksProducers != 0, im&breaksConsumers != 0
	if d.inputs {
		c.BreaksProcesses, c.BreaksWorkers = prod, cons
	} else {
		c.BreaksProcesses, c.BreaksWorkers = cons, prod
	}
	d.out = append(d.out, c)
}

// LoweredProtection lists the changes that lower a classification, each
// as its path and what changed: "/inputs/ssn (classification secret →
// normal)".
func LoweredProtection(changes []Change) []string {
	var out []string
	for _, c := range changes {
		if c.LowersProtection {
			out = append(out, c.Path+" ("+c.Detail+")")
		}
	}
	return out
}

// Diff lists every change from a (older) to b (newer), ordered by path,
// then kind, then detail. Name and description changes are not reported:
// they break nobody.
func Diff(a, b Working) []Change {
	var d differ
	d.inputs = true
	d.fields(a.Inputs.Fields, b.Inputs.Fields, "/inputs", ClassNormal, ClassNormal)
	d.inputs = false
	d.fields(a.Outputs.Fields, b.Outputs.Fields, "/outputs", ClassNormal, ClassNormal)
	if r := a.RoutingOutput; r != "" && r == b.RoutingOutput {
		// Processes route on every value of the routing output: a value
		// removed refuses their routes on it at publish, as one added
		// leaves it without a route. Whoever writes the output (the
		// worker) is judged by the field's own rule.
		for i, c := range d.out {
			if c.Path == "/outputs/"+r && c.Kind == ChangeChoicesChanged && c.Detail != "values reordered" {
				d.out[i].BreaksProcesses = true
			}
		}
	}
	if a.RoutingOutput != b.RoutingOutput {
		d.out = append(d.out, Change{
			Kind:            ChangeRoutingChanged,
			Path:            "/routing_output",
			Detail:          fmt.Sprintf("routing_output %s → %s", orNone(a.RoutingOutput), orNone(b.RoutingOutput)),
			BreaksProcesses: true,
		})
	}
	sort.SliceStable(d.out, func(i, j int) bool {
		x, y := d.out[i], d.out[j]
		if x.Path != y.Path {
			return x.Path < y.Path
		}
		if x.Kind != y.Kind {
			return x.Kind < y.Kind
		}
		return x.Detail < y.Detail
	})
	return d.out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return strconv.Quote(s)
}

func describe(f Field) string {
	if f.Required {
		return "required " + string(f.Type) + " field"
	}
	return "optional " + string(f.Type) + " field"
}

func (d *differ) fields(a, b []Field, path string, pa, pb Classification) {
	for _, fa := range a {
		if _, ok := find(b, fa.Name); !ok {
			d.add(ChangeRemoved, path+"/"+fa.Name, "removed "+describe(fa), breaksBoth)
		}
	}
	for _, fb := range b {
		fa, ok := find(a, fb.Name)
		if !ok {
			im := breaksNone
			if fb.Required {
				im = breaksProducers
			}
			d.add(ChangeAdded, path+"/"+fb.Name, "added "+describe(fb), im)
			continue
		}
		d.field(fa, fb, path+"/"+fb.Name, pa, pb, true)
	}
}

func (d *differ) field(fa, fb Field, path string, pa, pb Classification, named bool) {
	ca, cb := MaxClass(pa, fa.Classification), MaxClass(pb, fb.Classification)

	if named && fa.Required != fb.Required {
		if fb.Required {
			d.add(ChangeRequiredChanged, path, "optional → required", breaksProducers)
		} else {
			d.add(ChangeRequiredChanged, path, "required → optional", breaksConsumers)
		}
	}

	// A list's items take its classification: changed with it, theirs is
	// the same change, not a second one (designer QA: one raise counted
	// twice, /outputs/reasons and /outputs/reasons/[]); a classification of
	// their own, above the list's on either side, is their own change. An
	// object's fields are each listed: a binding may name one, and is
	// judged by its classification.
	if ca != cb && (named || ca != pa || cb != pb) {
		// An input's bindings are judged by its classification either
		// way: lowered, a protected source may no longer feed it; raised,
		// a literal may no longer (protection may only grow along a
		// binding, so a less protected source still may). Raising an
		// output hides data processes read; lowering it breaks nothing.
		im := breaksNone
		raised := cb.Rank() > ca.Rank()
		switch {
		case d.inputs:
			im = breaksProducers
		case raised:
			im = breaksConsumers
		}
		d.add(ChangeClassificationChanged, path, fmt.Sprintf("classification %s → %s", ca, cb), im)
		d.out[len(d.out)-1].LowersProtection = !raised
	}

	if fa.Type != fb.Type {
		// A type a value of the old one still fits (integer → number,
		// choice → text) breaks only those who read the field; the
		// reverse only those who fill it.
		im := breaksBoth
		switch {
		case widens(fa.Type, fb.Type):
			im = breaksConsumers
		case widens(fb.Type, fa.Type):
			im = breaksProducers
		}
		d.add(ChangeTypeChanged, path, fmt.Sprintf("type %s → %s", fa.Type, fb.Type), im)
		if !numeric(fa.Type) || !numeric(fb.Type) {
			return
		}
	}

	switch fa.Type {
	case TypeText:
		d.countBound(path, "min_length", fa.MinLength, fb.MinLength, true)
		d.countBound(path, "max_length", fa.MaxLength, fb.MaxLength, false)
		d.textRule(path, "pattern", fa.Pattern, fb.Pattern, breaksBoth)
		// No format's values are another's (a date is never a datetime, an
		// email never a uri): a changed format both rejects what fillers
		// sent and hands readers values of a kind they never received.
		d.textRule(path, "format", fa.Format, fb.Format, breaksBoth)
	case TypeInteger, TypeNumber:
		d.numberBound(path, "minimum", fa.Minimum, fb.Minimum, true)
		d.numberBound(path, "maximum", fa.Maximum, fb.Maximum, false)
	case TypeChoice:
		d.choices(path, fa.Values, fb.Values)
	case TypeObject:
		d.fields(fa.Fields, fb.Fields, path, ca, cb)
	case TypeList:
		if fa.Items != nil && fb.Items != nil {
			d.field(*fa.Items, *fb.Items, path+"/[]", ca, cb, false)
		}
		d.countBound(path, "min_items", fa.MinItems, fb.MinItems, true)
		d.countBound(path, "max_items", fa.MaxItems, fb.MaxItems, false)
	}
}

// widens reports whether every value of type a is a value of type b, as
// bindings have it (an integer feeds a number, a choice feeds text).
func widens(a, b Type) bool {
	return a == TypeInteger && b == TypeNumber || a == TypeChoice && b == TypeText
}

func numeric(t Type) bool { return t == TypeInteger || t == TypeNumber }

// bound classifies a change of a lower (isMin) or upper bound. cmp compares
// the new value to the old one and is only called when both are set.
func (d *differ) bound(path, name string, hadA, hasB bool, a, b string, cmp func() int, isMin bool) {
	var im impact
	switch {
	case !hadA && !hasB:
		return
	case !hadA:
		im = breaksProducers // added: tightened
	case !hasB:
		im = breaksConsumers // removed: loosened
	default:
		c := cmp()
		if c == 0 {
			return
		}
		if (c > 0) == isMin {
			im = breaksProducers // min raised or max lowered
		} else {
			im = breaksConsumers
		}
	}
	d.add(ChangeConstraintChanged, path, fmt.Sprintf("%s %s → %s", name, a, b), im)
}

func (d *differ) countBound(path, name string, a, b *int64, isMin bool) {
	sa, sb := "none", "none"
	if a != nil {
		sa = strconv.FormatInt(*a, 10)
	}
	if b != nil {
		sb = strconv.FormatInt(*b, 10)
	}
	d.bound(path, name, a != nil, b != nil, sa, sb, func() int {
		switch {
		case *b > *a:
			return 1
		case *b < *a:
			return -1
		}
		return 0
	}, isMin)
}

func (d *differ) numberBound(path, name string, a, b *json.Number, isMin bool) {
	sa, sb := "none", "none"
	if a != nil {
		sa = a.String()
	}
	if b != nil {
		sb = b.String()
	}
	d.bound(path, name, a != nil, b != nil, sa, sb, func() int {
		return compareNumbers(*b, *a)
	}, isMin)
}

// textRule compares pattern or format: added tightens, removed loosens,
// changed has the given impact.
func (d *differ) textRule(path, name, a, b string, changed impact) {
	if a == b {
		return
	}
	im := changed
	switch {
	case a == "":
		im = breaksProducers
	case b == "":
		im = breaksConsumers
	}
	d.add(ChangeConstraintChanged, path, fmt.Sprintf("%s %s → %s", name, orNone(a), orNone(b)), im)
}

// choices reports added and removed values as one change: new values
// surprise consumers, removed values reject what producers still send.
func (d *differ) choices(path string, a, b []string) {
	added, removed := minus(b, a), minus(a, b)
	var parts []string
	im := breaksNone
	if len(added) > 0 {
		parts = append(parts, "values added: "+quoteList(added))
		im |= breaksConsumers
	}
	if len(removed) > 0 {
		parts = append(parts, "values removed: "+quoteList(removed))
		im |= breaksProducers
	}
	if len(parts) == 0 {
		if strings.Join(a, "\x00") != strings.Join(b, "\x00") {
			d.add(ChangeChoicesChanged, path, "values reordered", breaksNone)
		}
		return
	}
	d.add(ChangeChoicesChanged, path, strings.Join(parts, "; "), im)
}

// minus returns the values of a not in b, in a's order.
func minus(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, v := range b {
		in[v] = true
	}
	var out []string
	for _, v := range a {
		if !in[v] {
			out = append(out, v)
		}
	}
	return out
}
