package process

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relais/relais/contracts"
)

// Looser lists, for people, the bindings whose source admits values the
// field it feeds refuses: a constraint of the field's (a pattern, a
// length, a bound, a format, a list's size; a choice's values for a text)
// that the source, a process input or an earlier node's output, lacks or
// has looser. Such a version publishes, since the source may only ever
// hold values that fit; but one that does not fails that node
// (invalid_inputs) after the instance started, where a Camunda user
// expects the start itself refused (designer QA: a start with country
// "fr" was held at check). Giving a process input the field's constraint
// makes the start refuse it instead, an output the completion. Bindings r
// cannot resolve are left out: Check reports those.
func Looser(p *Process, r Resolver) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(p.Nodes)) {
		n := p.Nodes[name]
		if n.Kind != KindPull && n.Kind != KindPush {
			continue
		}
		w, ok := r.Revision(n.Definition, n.Revision)
		if !ok {
			continue
		}
		for _, target := range slices.Sorted(maps.Keys(n.Inputs)) {
			from := n.Inputs[target].From
			tf, ok := findField(w.Inputs.Fields, target)
			if from == "" || !ok {
				continue
			}
			sf, ok := sourceField(p, r, from)
			if !ok {
				continue
			}
			gaps := looser(sf, tf, "")
			if len(gaps) == 0 {
				continue
			}
			// Where the value comes from says who can refuse it first:
			// the start judges process inputs, a completion its outputs.
			fix := "give the source the same constraint for the start to refuse such a value"
			if !strings.HasPrefix(from, srcInput+".") {
				fix = "give that output the same constraint, in a new revision of its definition, for the completion to be refused (invalid_outputs) instead"
			}
			out = append(out, fmt.Sprintf("node %s's input %s is fed from %s, which lacks or loosens the field's %s: a value outside it fails node %s (invalid_inputs) after the instance started, held or failed as its on_error says; %s",
				name, target, from, strings.Join(gaps, ", "), name, fix))
		}
	}
	return out
}

// sourceField is the field a binding's source names: a process input, or
// an earlier node's output; ok is false for any other source (an
// instance's id, a node's error), which has no constraints to compare.
func sourceField(p *Process, r Resolver, from string) (contracts.Field, bool) {
	segs := strings.Split(from, ".")
	switch {
	case len(segs) >= 2 && segs[0] == srcInput:
		src, _, ok := walk(p.Inputs.Fields, segs[1:], from)
		return src.field, ok
	case len(segs) >= 4 && segs[0] == srcNodes && segs[2] == srcOutput:
		up := p.Nodes[segs[1]]
		if up == nil || up.Kind == KindEnd {
			return contracts.Field{}, false
		}
		w, ok := r.Revision(up.Definition, up.Revision)
		if !ok {
			return contracts.Field{}, false
		}
		src, _, ok := walk(w.Outputs.Fields, segs[3:], from)
		return src.field, ok
	}
	return contracts.Field{}, false
}

// valuesOutside lists a choice's values that text field t refuses, each
// with the constraint it breaks.
func valuesOutside(values []string, t contracts.Field, at func(string) string) []string {
	var out []string
	var re *regexp.Regexp
	if t.Pattern != "" {
		re, _ = regexp.Compile(t.Pattern)
	}
	for _, v := range values {
		n := int64(utf8.RuneCountInString(v))
		switch {
		case re != nil && !re.MatchString(v):
			out = append(out, at(fmt.Sprintf("pattern %q (the choice %q does not match it)", t.Pattern, v)))
		case t.MaxLength != nil && n > *t.MaxLength:
			out = append(out, at(fmt.Sprintf("max_length %d (the choice %q is longer)", *t.MaxLength, v)))
		case t.MinLength != nil && n < *t.MinLength:
			out = append(out, at(fmt.Sprintf("min_length %d (the choice %q is shorter)", *t.MinLength, v)))
		}
	}
	return out
}

// looser lists the constraints of t that s lacks or has looser, where
// names t's place (an object's members and a list's items are compared
// too).
func looser(s, t contracts.Field, where string) []string {
	var out []string
	at := func(what string) string {
		if where == "" {
			return what
		}
		return what + " (at " + where + ")"
	}
	numeric := func(t contracts.Type) bool { return t == contracts.TypeInteger || t == contracts.TypeNumber }
	switch {
	case s.Type == t.Type:
	case numeric(s.Type) && numeric(t.Type):
	case s.Type == contracts.TypeChoice && t.Type == contracts.TypeText:
		// Its values are all it can hold: each judged against the text's
		// constraints (verifier QA: a choice's "Big" fed a lower-case
		// pattern unsaid).
		return valuesOutside(s.Values, t, at)
	default:
		return nil // a type mismatch, which Check refuses
	}
	if t.Pattern != "" && s.Pattern != t.Pattern {
		out = append(out, at("pattern "+strconv.Quote(t.Pattern)))
	}
	if t.Format != "" && s.Format != t.Format {
		out = append(out, at("format "+t.Format))
	}
	tighter := func(name string, sv, tv *int64, above bool) {
		if tv != nil && (sv == nil || above && *sv > *tv || !above && *sv < *tv) {
			out = append(out, at(name+" "+strconv.FormatInt(*tv, 10)))
		}
	}
	tighter("max_length", s.MaxLength, t.MaxLength, true)
	tighter("min_length", s.MinLength, t.MinLength, false)
	tighter("max_items", s.MaxItems, t.MaxItems, true)
	tighter("min_items", s.MinItems, t.MinItems, false)
	// A bound the source lacks, or one past the field's.
	bound := func(name string, sv, tv *json.Number, above bool) {
		if tv == nil {
			return
		}
		tf, err := tv.Float64()
		if err != nil {
			return
		}
		if sv != nil {
			if sf, err := sv.Float64(); err == nil && (above && sf <= tf || !above && sf >= tf) {
				return
			}
		}
		out = append(out, at(name+" "+tv.String()))
	}
	bound("maximum", s.Maximum, t.Maximum, true)
	bound("minimum", s.Minimum, t.Minimum, false)
	switch t.Type {
	case contracts.TypeObject:
		for _, tf := range t.Fields {
			if sf, ok := findField(s.Fields, tf.Name); ok {
				out = append(out, looser(sf, tf, strings.TrimPrefix(where+"."+tf.Name, "."))...)
			}
		}
	case contracts.TypeList:
		if s.Items != nil && t.Items != nil {
			items := where + "[]"
			if where == "" {
				items = "items"
			}
			out = append(out, looser(*s.Items, *t.Items, items)...)
		}
	}
	return out
}
