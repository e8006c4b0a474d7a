// Package contracts models, parses, validates, masks and compares the typed
// input and output contracts of Relais definitions.
//
// The package is deliberately pure: it knows nothing about HTTP, storage or
// processes, so that every surface (API, engine, workers, UI) agrees on one
// interpretation of a contract.
package contracts

import (
	"encoding/json"
)

// Classification says how carefully a value must be handled on every
// observation surface and at rest.
type Classification string

// Classifications, from least to most protected.
const (
	// ClassNormal values may be shown and stored in clear.
	ClassNormal Classification = "normal"
	// ClassSensitive values are masked on every observation surface.
	ClassSensitive Classification = "sensitive"
	// ClassSecret values are masked and stored apart from the public payload.
	ClassSecret Classification = "secret"
)

// Rank orders classifications: 0 for normal (and the empty default), 1 for
// sensitive, 2 for secret. Unknown classifications rank as secret so that a
// mistake errs on the side of protection.
func (c Classification) Rank() int {
	switch c {
	case ClassNormal, "":
		return 0
	case ClassSensitive:
		return 1
	default:
		return 2
	}
}

// MaxClass returns the more protected of a and b. The empty classification
// counts as normal and is returned as ClassNormal.
func MaxClass(a, b Classification) Classification {
	ra, rb := a.Rank(), b.Rank()
	r := ra
	if rb > r {
		r = rb
	}
	return classOfRank(r)
}

func classOfRank(r int) Classification {
	switch r {
	case 0:
		return ClassNormal
	case 1:
		return ClassSensitive
	default:
		return ClassSecret
	}
}

func validClass(c Classification) bool {
	return c == ClassNormal || c == ClassSensitive || c == ClassSecret
}

// Type is the kind of value a field holds.
type Type string

// Field types.
const (
	// TypeText is a JSON string.
	TypeText Type = "text"
	// TypeInteger is a JSON number without fractional part.
	TypeInteger Type = "integer"
	// TypeNumber is any JSON number.
	TypeNumber Type = "number"
	// TypeBoolean is a JSON boolean.
	TypeBoolean Type = "boolean"
	// TypeDate is an RFC 3339 full-date string.
	TypeDate Type = "date"
	// TypeDatetime is an RFC 3339 date-time string.
	TypeDatetime Type = "datetime"
	// TypeChoice is a string restricted to a fixed list of values.
	TypeChoice Type = "choice"
	// TypeObject is a JSON object with declared fields and nothing else.
	TypeObject Type = "object"
	// TypeList is a JSON array whose items all follow one field description.
	TypeList Type = "list"
)

// Text formats accepted by the format option of text fields.
const (
	// FormatEmail is an RFC 5321 mailbox.
	FormatEmail = "email"
	// FormatURI is an absolute RFC 3986 URI.
	FormatURI = "uri"
	// FormatUUID is an RFC 4122 UUID in its hyphenated textual form.
	FormatUUID = "uuid"
)

// typeNames are the field types, as a designer writes them.
var typeNames = []string{string(TypeText), string(TypeInteger), string(TypeNumber), string(TypeBoolean), string(TypeDate),
	string(TypeDatetime), string(TypeChoice), string(TypeObject), string(TypeList)}

func validType(t Type) bool {
	switch t {
	case TypeText, TypeInteger, TypeNumber, TypeBoolean, TypeDate, TypeDatetime, TypeChoice, TypeObject, TypeList:
		return true
	}
	return false
}

func validFormat(f string) bool {
	return f == FormatEmail || f == FormatURI || f == FormatUUID
}

// Field describes one named value of a contract, or the items of a list
// (then without name and required).
type Field struct {
	Name           string         `json:"name,omitempty"`
	Type           Type           `json:"type"`
	Required       bool           `json:"required,omitempty"`
	Classification Classification `json:"classification,omitempty"`
	Description    string         `json:"description,omitempty"`

	// Options; which apply depends on Type. Pointers keep 0 representable
	// and distinguish "not set" from "set to zero".
	MinLength *int64       `json:"min_length,omitempty"`
	MaxLength *int64       `json:"max_length,omitempty"`
	Pattern   string       `json:"pattern,omitempty"`
	Format    string       `json:"format,omitempty"`
	Minimum   *json.Number `json:"minimum,omitempty"`
	Maximum   *json.Number `json:"maximum,omitempty"`
	Values    []string     `json:"values,omitempty"`
	Fields    []Field      `json:"fields,omitempty"`
	Items     *Field       `json:"items,omitempty"`
	MinItems  *int64       `json:"min_items,omitempty"`
	MaxItems  *int64       `json:"max_items,omitempty"`
}

// Contract is the typed shape of a JSON object: a list of fields.
type Contract struct {
	Fields []Field `json:"fields"`
}

// Working is the mutable copy of a definition, the thing that gets
// snapshotted into immutable revisions.
type Working struct {
	Name          string   `json:"name"`
	Description   string   `json:"description,omitempty"`
	Inputs        Contract `json:"inputs"`
	Outputs       Contract `json:"outputs"`
	RoutingOutput string   `json:"routing_output,omitempty"`
}

// Violation is one problem found in a submitted document or value.
type Violation struct {
	// Path is an RFC 6901 JSON pointer into the submitted document; the
	// empty string designates the whole document.
	Path    string `json:"path"`
	Message string `json:"message"`
	// Cause says what kind of problem it is; the zero value is Invalid.
	Cause Cause `json:"-"`
}

// NotAField starts the message of a member the contract does not have. It
// describes no value, so a caller hiding what violations say of protected
// values keeps it (the member's name is in the pointer anyway).
const NotAField = "is not a field of the contract"

// Cause classifies a Violation, so that a transport can refuse a malformed
// request (400) apart from a well-formed but invalid one (422).
type Cause uint8

// Causes of violations.
const (
	// Invalid: the document is well-formed but breaks a rule.
	Invalid Cause = iota
	// Malformed: the document is not JSON that Relais reads.
	Malformed
	// UnknownKey: an object member that the document's format does not
	// define. Known members misplaced (an option foreign to a field's
	// type, a key foreign to a node's kind) are Invalid: they are reported
	// by name because they usually reveal a misunderstanding.
	UnknownKey
)

// optionsOf lists the type-specific options a field type accepts, in
// canonical order. Everything not listed here (besides the common keys) is
// rejected by the parser and never written by the canonical encoder.
func optionsOf(t Type) []string {
	switch t {
	case TypeText:
		return []string{"min_length", "max_length", "pattern", "format"}
	case TypeInteger, TypeNumber:
		return []string{"minimum", "maximum"}
	case TypeChoice:
		return []string{"values"}
	case TypeObject:
		return []string{"fields"}
	case TypeList:
		return []string{"items", "min_items", "max_items"}
	}
	return nil
}

func allowsOption(t Type, opt string) bool {
	for _, o := range optionsOf(t) {
		if o == opt {
			return true
		}
	}
	return false
}

// find returns the field named name in fields.
func find(fields []Field, name string) (Field, bool) {
	for _, f := range fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// MarshalJSON encodes the working copy in its canonical form, so that
// encoding/json users store exactly what ParseWorking accepts.
func (w Working) MarshalJSON() ([]byte, error) { return w.Canonical(), nil }

// MarshalJSON encodes the contract in its canonical form.
func (c Contract) MarshalJSON() ([]byte, error) { return c.Canonical(), nil }

// MarshalJSON encodes the field in its canonical form, taking its own
// classification as effective.
func (f Field) MarshalJSON() ([]byte, error) {
	var b []byte
	b = appendField(b, f, ClassNormal, f.Name != "")
	return b, nil
}
