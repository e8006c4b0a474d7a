package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relais/relais/contracts"
)

// maxDepth caps indentation classes (depth-0 … depth-8 in the stylesheet);
// deeper fields keep the deepest indentation.
const maxDepth = 8

// depthClass is the CSS class indenting a nested row. Indentation is a
// class, not a style attribute: the content security policy forbids inline
// styles.
func depthClass(depth int) string {
	if depth > maxDepth {
		depth = maxDepth
	}
	return "depth-" + strconv.Itoa(depth)
}

// contractRow is one field of a contract as the definitions page lists it.
type contractRow struct {
	Depth int
	// Within names the parent of a nested field, for screen readers: the
	// indentation and its arrow say the depth to eyes alone.
	Within         string
	Name           string
	Type           string
	Required       string
	Classification string
	ClassKey       string // normal, sensitive or secret: styles the badge
	Constraints    string
	Description    string
	Routing        string // set on the routing output
}

// contractRows flattens a contract, nested fields after their parent and
// one level deeper. Classifications shown are effective: a nested field is
// at least as protected as its parent.
func contractRows(ctx context.Context, c contracts.Contract, routing string) []contractRow {
	var rows []contractRow
	var walk func(fields []contracts.Field, depth int, parent contracts.Classification, within string)
	var field func(f contracts.Field, name string, depth int, parent contracts.Classification, named bool, within string)
	field = func(f contracts.Field, name string, depth int, parent contracts.Classification, named bool, within string) {
		class := contracts.MaxClass(parent, f.Classification)
		row := contractRow{Depth: depth, Within: withinText(ctx, within), Name: name, Type: typeLabel(ctx, f.Type), Classification: classLabel(ctx, class),
			ClassKey: string(class), Constraints: constraints(ctx, f), Description: visibleBidi(f.Description)}
		if named {
			row.Required = yesNo(ctx, f.Required)
		}
		if depth == 0 && routing != "" && f.Name == routing {
			row.Routing = T(ctx, "routing output")
		}
		rows = append(rows, row)
		switch f.Type {
		case contracts.TypeObject:
			parentName := name
			if !named {
				// A list's item: its fields are in "each item of lines",
				// not in "(each item)" (designer QA).
				list := within
				parentName = T(ctx, "each item of %s", list)
			}
			walk(f.Fields, depth+1, class, parentName)
		case contracts.TypeList:
			if f.Items != nil {
				field(*f.Items, T(ctx, "(each item)"), depth+1, class, false, name)
			}
		}
	}
	walk = func(fields []contracts.Field, depth int, parent contracts.Classification, within string) {
		for _, f := range fields {
			field(f, f.Name, depth, parent, true, within)
		}
	}
	walk(c.Fields, 0, contracts.ClassNormal, "")
	return rows
}

// constraints describes a field's options for people.
func constraints(ctx context.Context, f contracts.Field) string {
	var parts []string
	if f.MinLength != nil {
		parts = append(parts, T(ctx, "at least %d characters", *f.MinLength))
	}
	if f.MaxLength != nil {
		parts = append(parts, T(ctx, "at most %d characters", *f.MaxLength))
	}
	if f.Pattern != "" {
		parts = append(parts, T(ctx, "pattern %s", f.Pattern))
	}
	if f.Format != "" {
		parts = append(parts, T(ctx, "format %s", f.Format))
	}
	if f.Minimum != nil {
		minimum := localNumber(ctx, f.Minimum.String())
		parts = append(parts, T(ctx, "minimum %s", minimum))
	}
	if f.Maximum != nil {
		maximum := localNumber(ctx, f.Maximum.String())
		parts = append(parts, T(ctx, "maximum %s", maximum))
	}
	if len(f.Values) > 0 {
		values := strings.Join(f.Values, ", ")
		parts = append(parts, T(ctx, "one of: %s", values))
	}
	if f.MinItems != nil {
		parts = append(parts, T(ctx, "at least %d items", *f.MinItems))
	}
	if f.MaxItems != nil {
		parts = append(parts, T(ctx, "at most %d items", *f.MaxItems))
	}
	return semicolonList(ctx, parts)
}

// valueRow is one value of an occurrence's inputs or outputs.
type valueRow struct {
	Depth int
	Label string
	// Pointer is the RFC 6901 JSON pointer of the value in its document
	// ("/contacts/0/email"): what a reveal names and the audit records.
	Pointer string
	// Within names the parent of a nested value, for screen readers (as
	// contractRow.Within).
	Within    string
	Value     string
	Masked    bool // Value is the masked marker
	Sensitive bool // masked as sensitive, not secret: an admin may reveal it
	Missing   bool // Value says the field was not provided
	Group     bool // an object or list: its members follow
	// RevealNotice is set on the row whose value an admin just revealed:
	// Revealed shows in place of the marker, for this one response.
	Revealed     string
	RevealNotice string
	// RevealName is the accessible name of the row's reveal button, which
	// names the field (every button shows the same words); RevealField
	// names the field alone ("Inputs /contact"), for the reason's label;
	// RevealID is the reason field's id, unique on the page.
	RevealName, RevealField, RevealID string
	// RowID is the row's id, unique on the page, for a row an admin may
	// reveal: the reveal form's action ends with it as a fragment, so
	// that its answer (the value, or the form with its error) opens at
	// the row.
	RowID string
	// RevealError says why the reveal just posted from this row was
	// refused (no reason, or one too long); RevealReason is the reason
	// typed, shown again in the field.
	RevealError, RevealReason string
}

// maskClass styles a masked marker: secret apart from sensitive.
func (r valueRow) maskClass() string {
	if r.Sensitive {
		return "masked masked-sensitive"
	}
	return "masked masked-secret"
}

// valueRows lays out a (masked) JSON object along its contract, labelled
// by field names, nested values after their parent and one level deeper.
//
// The engine already replaced protected values by {"$masked": ...}; this
// function does not rely on it. A field whose effective classification is
// sensitive or secret shows the masked marker whatever the JSON holds, so
// a value that escaped masking upstream still never reaches the page, and
// neither do its length or a prefix. Properties the contract does not
// declare are not shown.
func valueRows(ctx context.Context, c contracts.Contract, raw json.RawMessage) []valueRow {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil
	}
	var rows []valueRow
	objectRows(ctx, &rows, c.Fields, obj, "", 0, contracts.ClassNormal, "")
	if len(rows) > maxValueRows {
		// A list of thousands of items would make a page of megabytes that
		// a browser lays out slowly, and reloads: the first rows show, the
		// API's detail has them all.
		more := len(rows) - maxValueRows
		rows = append(rows[:maxValueRows:maxValueRows], valueRow{Label: "…", Missing: true,
			Value: T(ctx, "%d more values not shown: the page shows the first %d, the API's detail has them all.", more, maxValueRows)})
	}
	return rows
}

// maxValueRows and maxValueChars bound what a value table shows: rows,
// and characters of one text value.
const (
	maxValueRows  = 500
	maxValueChars = 2000
)

// within is the label of the value the rows are nested in ("" at the top).
func objectRows(ctx context.Context, rows *[]valueRow, fields []contracts.Field, obj map[string]json.RawMessage, pointer string, depth int, parent contracts.Classification, within string) {
	for _, f := range fields {
		p := pointer + "/" + pointerEscaper.Replace(f.Name)
		v, ok := obj[f.Name]
		if !ok {
			*rows = append(*rows, valueRow{Depth: depth, Within: withinText(ctx, within), Label: f.Name, Pointer: p, Value: T(ctx, "not provided"), Missing: true})
			continue
		}
		oneValue(ctx, rows, f, f.Name, p, v, depth, parent, within)
	}
}

func oneValue(ctx context.Context, rows *[]valueRow, f contracts.Field, label, pointer string, v json.RawMessage, depth int, parent contracts.Classification, within string) {
	class := contracts.MaxClass(parent, f.Classification)
	if m := maskedClass(v); m != "" {
		class = contracts.MaxClass(class, m)
	}
	in := withinText(ctx, within)
	if class.Rank() > 0 {
		*rows = append(*rows, valueRow{Depth: depth, Within: in, Label: label, Pointer: pointer, Value: maskedMarker(ctx, class), Masked: true,
			Sensitive: class == contracts.ClassSensitive})
		return
	}
	switch f.Type {
	case contracts.TypeObject:
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) == nil && obj != nil {
			*rows = append(*rows, valueRow{Depth: depth, Within: in, Label: label, Pointer: pointer, Group: true})
			objectRows(ctx, rows, f.Fields, obj, pointer, depth+1, class, label)
			return
		}
	case contracts.TypeList:
		var items []json.RawMessage
		if json.Unmarshal(v, &items) == nil && items != nil && f.Items != nil {
			count := len(items)
			*rows = append(*rows, valueRow{Depth: depth, Within: in, Label: label, Pointer: pointer, Group: true, Value: T(ctx, "%d items", count)})
			for i, item := range items {
				oneValue(ctx, rows, *f.Items, "#"+strconv.Itoa(i+1), pointer+"/"+strconv.Itoa(i), item, depth+1, class, label)
			}
			return
		}
	}
	*rows = append(*rows, valueRow{Depth: depth, Within: in, Label: label, Pointer: pointer, Value: scalar(ctx, v)})
}

// withinText says, for screen readers, which value a nested row belongs
// to ("" at the top): the arrow and the indentation say it to eyes alone.
func withinText(ctx context.Context, parent string) string {
	if parent == "" {
		return ""
	}
	return T(ctx, "(in %s)", parent)
}

// pointerEscaper escapes one JSON pointer reference token (RFC 6901: "~"
// first, then "/").
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// revealedText shows a revealed value: a scalar as scalar shows it, an
// object or list as its JSON, indented, in which nested secret values are
// still masked markers (the engine re-masked them).
func revealedText(ctx context.Context, v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
		// Indented, a member a line, as the page shows nested fields
		// (the revealed block keeps its line breaks).
		var out bytes.Buffer
		if json.Indent(&out, v, "", "  ") == nil {
			return out.String()
		}
		return string(v)
	}
	return scalar(ctx, v)
}

// maskedClass returns the classification of a {"$masked": ...} marker, or
// "" when v is not one.
func maskedClass(v json.RawMessage) contracts.Classification {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '{' {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return ""
	}
	raw, ok := m[contracts.MaskedKey]
	if !ok {
		return ""
	}
	var c string
	if json.Unmarshal(raw, &c) != nil || (c != string(contracts.ClassSensitive) && c != string(contracts.ClassSecret)) {
		// An unknown marker is treated as the most protected.
		return contracts.ClassSecret
	}
	return contracts.Classification(c)
}

// visibleBidi names the characters that reorder text (U+202E, the
// right-to-left override, shows "invoice \u202efdp.exe" as "invoice
// exe.pdf"; the isolates and embeddings alike) as ⟨U+202E⟩: a value or a
// service's message shown as data must read as stored, not reordered.
func visibleBidi(s string) string {
	if !strings.ContainsFunc(s, bidiControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if bidiControl(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func bidiControl(r rune) bool {
	// The marks (U+200E, U+200F) that right-to-left text uses around
	// numbers reorder nothing around them: left as they are.
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// scalar shows a normal JSON value: strings as they are, numbers as
// written (they are data, such as identifiers, not quantities to regroup),
// booleans and null in words.
func scalar(ctx context.Context, v json.RawMessage) string {
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		return ""
	}
	switch x := x.(type) {
	case string:
		if n := utf8.RuneCountInString(x); n > maxValueChars {
			cut := 0
			for range maxValueChars {
				_, size := utf8.DecodeRuneInString(x[cut:])
				cut += size
			}
			return visibleBidi(x[:cut]) + "… " + T(ctx, "(%d characters in all)", n)
		}
		return visibleBidi(x)
	case json.Number:
		return x.String()
	case bool:
		return yesNo(ctx, x)
	case nil:
		return T(ctx, "null")
	}
	// A structure where the contract expects a scalar: never dump it.
	return T(ctx, "unexpected value")
}
