package camunda

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/jsontree"
)

// dateLayout is Camunda's default REST date format, yyyy-MM-dd'T'HH:mm:ss.SSSZ
// (2026-12-01T15:04:05.000+0000). Relais writes it in UTC.
const dateLayout = "2006-01-02T15:04:05.000-0700"

// camundaTime is a time written in Camunda's date format.
type camundaTime time.Time

// MarshalJSON writes the time in UTC, to the millisecond.
func (t camundaTime) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Time(t).UTC().Format(dateLayout))
}

func timePtr(t *time.Time) *camundaTime {
	if t == nil {
		return nil
	}
	c := camundaTime(*t)
	return &c
}

// parseDate reads a date as Camunda clients send it: Camunda's format (a
// numeric zone without colon, as the JavaScript client writes
// 2026-12-01T15:04:05.000+0000), or RFC 3339.
func parseDate(s string) (time.Time, bool) {
	for _, layout := range []string{dateLayout, "2006-01-02T15:04:05-0700", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// Camunda value types, as Camunda writes them (clients may send any case).
const (
	typeString  = "String"
	typeInteger = "Integer"
	typeLong    = "Long"
	typeDouble  = "Double"
	typeBoolean = "Boolean"
	typeDate    = "Date"
	typeJSON    = "Json"
	typeNull    = "Null"
)

// variable is a Camunda typed value.
type variable struct {
	Type      string          `json:"type"`
	Value     json.RawMessage `json:"value"`
	ValueInfo map[string]any  `json:"valueInfo"`
}

// variableIn is a typed value as a client sends it: type and valueInfo
// are optional.
type variableIn struct {
	Type      string          `json:"type"`
	Value     json.RawMessage `json:"value"`
	ValueInfo json.RawMessage `json:"valueInfo"`
}

// topFields indexes a contract's top-level fields by name.
func topFields(c contracts.Contract) map[string]contracts.Field {
	m := make(map[string]contracts.Field, len(c.Fields))
	for _, f := range c.Fields {
		m[f.Name] = f
	}
	return m
}

// variablesOf makes Camunda typed values of an occurrence's inputs, typed
// by the pinned revision's inputs contract: text and choice are String,
// integer is Integer or Long by magnitude, number Double, boolean Boolean,
// date and datetime Date, object and list Json (the value as a JSON
// string).
func variablesOf(inputs json.RawMessage, c contracts.Contract) (map[string]variable, error) {
	var values map[string]json.RawMessage
	if err := json.Unmarshal(inputs, &values); err != nil {
		return nil, fmt.Errorf("camunda: inputs are not an object: %w", err)
	}
	fields := topFields(c)
	out := make(map[string]variable, len(values))
	for name, raw := range values {
		f, ok := fields[name]
		if !ok {
			// Not in the contract (never stored so): typed by its JSON.
			f = contracts.Field{Type: inferType(raw)}
		}
		v, err := typedValue(raw, f)
		if err != nil {
			return nil, fmt.Errorf("camunda: input %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func inferType(raw json.RawMessage) contracts.Type {
	switch t := bytes.TrimSpace(raw); {
	case len(t) == 0:
		return contracts.TypeText
	case t[0] == '"':
		return contracts.TypeText
	case t[0] == 't' || t[0] == 'f':
		return contracts.TypeBoolean
	case t[0] == '{' || t[0] == '[':
		return contracts.TypeObject
	case t[0] == 'n':
		return contracts.TypeText // null is typed below
	default:
		return contracts.TypeNumber
	}
}

func typedValue(raw json.RawMessage, f contracts.Field) (variable, error) {
	v := variable{ValueInfo: map[string]any{}}
	if string(bytes.TrimSpace(raw)) == "null" {
		v.Type, v.Value = typeNull, json.RawMessage("null")
		return v, nil
	}
	switch f.Type {
	case contracts.TypeText, contracts.TypeChoice:
		v.Type, v.Value = typeString, raw
	case contracts.TypeBoolean:
		v.Type, v.Value = typeBoolean, raw
	case contracts.TypeNumber:
		v.Type, v.Value = typeDouble, raw
	case contracts.TypeInteger:
		n, ok := integerOf(raw)
		if !ok {
			v.Type, v.Value = typeDouble, raw
			break
		}
		v.Type, v.Value = typeLong, json.RawMessage(fmt.Sprint(n))
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			v.Type = typeInteger
		}
	case contracts.TypeDate, contracts.TypeDatetime:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return v, err
		}
		layout := time.RFC3339Nano
		if f.Type == contracts.TypeDate {
			layout = time.DateOnly
		}
		t, err := time.Parse(layout, s)
		if err != nil {
			// Valid for the contract, yet not in the form Go reads (a
			// lower-case t or z): the worker gets the text as it is.
			v.Type, v.Value = typeString, raw
			break
		}
		v.Type = typeDate
		v.Value, _ = json.Marshal(t.UTC().Format(dateLayout))
	default: // object, list
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return v, err
		}
		v.Type = typeJSON
		v.Value, _ = json.Marshal(compact.String())
	}
	return v, nil
}

// integerOf reads an integral JSON number that fits 64 bits (1e3 is 1000).
func integerOf(raw json.RawMessage) (int64, bool) {
	f, _, err := big.ParseFloat(string(bytes.TrimSpace(raw)), 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return 0, false
	}
	n, acc := f.Int64()
	return n, acc == big.Exact
}

// valueInfoError is a variable refused for its valueInfo, not its value:
// reported at valueInfo's member (Camunda QA: at /value, a client looked
// for the fault in the value).
type valueInfoError string

func (e valueInfoError) Error() string { return string(e) }

// outputsOf converts the typed values a worker completes with (variables,
// then localVariables) into an outputs document for the pinned revision's
// outputs contract, by the contract's types: a Date becomes a date or a
// date-time, a Json (or JSON-serialized Object) string the object or list
// it holds; other values pass as they are, for the contract to judge. A
// null value leaves the field unset. A name set by both lists with other
// values is refused. With the refusal of values that do not convert come
// the outputs of those that do.
func outputsOf(variables, local map[string]variableIn, c contracts.Contract) (json.RawMessage, error) {
	fields := topFields(c)
	out := map[string]json.RawMessage{}
	var errs []fault.FieldError
	convert := func(list string, vars map[string]variableIn) {
		names := make([]string, 0, len(vars))
		for name := range vars {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			at := jsontree.Pointer("", list, name, "value")
			value, set, err := outputValue(vars[name], fields[name])
			if err != nil {
				if _, ok := err.(valueInfoError); ok {
					at = jsontree.Pointer("", list, name, "valueInfo", "serializationDataFormat")
				}
				errs = append(errs, fault.FieldError{Path: at, Message: err.Error()})
				continue
			}
			if !set {
				continue
			}
			if prev, dup := out[name]; dup && !jsonEqual(prev, value) {
				errs = append(errs, fault.FieldError{Path: at, Message: "differs from the value variables gives it"})
				continue
			}
			out[name] = value
		}
	}
	convert("variables", variables)
	convert("localVariables", local)
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return b, fault.New(fault.BadRequest, "invalid_request", "the variables cannot be converted to the outputs").WithErrors(errs)
	}
	return b, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// integerBits are the sizes of the Java types behind Camunda's integer
// types (Short, Integer, Long), by lowercase name.
var integerBits = map[string]int{"short": 16, "integer": 32, "long": 64}

// outputValue converts one typed value for field f (the zero Field for a
// name the contract lacks: its value passes, and the contract refuses it
// by name).
func outputValue(v variableIn, f contracts.Field) (json.RawMessage, bool, error) {
	kind := strings.ToLower(v.Type)
	raw := bytes.TrimSpace(v.Value)
	if len(raw) == 0 || string(raw) == "null" || kind == "null" {
		return nil, false, nil
	}
	switch kind {
	case "", "string", "integer", "long", "short", "double", "boolean", "date", "json", "object":
	default:
		return nil, false, fmt.Errorf("type %s is not supported by Relais (String, Integer, Long, Short, Double, Boolean, Date, Json, Object as JSON, Null)", v.Type)
	}
	if value, set, ok, err := scalarFromString(kind, raw); ok {
		// Camunda reads an Integer, Double or Boolean from a string
		// holding one, and an empty one as null. A text field takes any
		// other string as it is, whatever its type name.
		switch {
		case err == nil && !set:
			return nil, false, nil
		case f.Type == contracts.TypeInteger || f.Type == contracts.TypeNumber || f.Type == contracts.TypeBoolean:
			if err != nil {
				return nil, false, err
			}
			raw = value
		}
	}
	if names, ok := typeNamesFor[f.Type]; ok && kind != "" && !slices.Contains(names, kind) && fitsJSON(f.Type, raw) {
		// The value alone would pass (5 in an integer field), but a
		// worker that says Date for it holds something else than it
		// thinks: refused, as Camunda's own conversion would fail. A
		// value that does not fit either is left to the contract, which
		// reports it with every other problem.
		return nil, false, fmt.Errorf("%s %s does not fit %s %s field: give it as %s", article(v.Type), v.Type, article(string(f.Type)), f.Type, typeNameList[f.Type])
	}
	if kind == "object" {
		var info struct {
			SerializationDataFormat string `json:"serializationDataFormat"`
		}
		_ = json.Unmarshal(v.ValueInfo, &info)
		if info.SerializationDataFormat != "application/json" {
			return nil, false, valueInfoError("an Object is accepted serialized as application/json only (valueInfo.serializationDataFormat)")
		}
	}
	if bits, ok := integerBits[kind]; ok && len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		// A value beyond what Java holds fails in Camunda, and stored here
		// it would reach a Java worker that cannot read it back. JSON
		// writes 1e19 or 40000.0 too (JavaScript's JSON.stringify writes
		// 1e21 so): the value is judged, not its spelling.
		lo, hi := int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1)
		n, isNumber := new(big.Rat).SetString(string(raw))
		if isNumber && (!n.IsInt() || n.Num().Cmp(big.NewInt(lo)) < 0 || n.Num().Cmp(big.NewInt(hi)) > 0) {
			return nil, false, fmt.Errorf("%s %s must be a whole number between %d and %d", article(v.Type), v.Type, lo, hi)
		}
	}
	var s string
	isString := json.Unmarshal(raw, &s) == nil
	switch f.Type {
	case contracts.TypeDate, contracts.TypeDatetime:
		if !isString {
			break
		}
		t, ok := parseDate(s)
		if _, err := time.Parse(time.DateOnly, s); !ok && kind == "date" && (err != nil || f.Type != contracts.TypeDate) {
			// Said a Date, it was told to be RFC 3339, which Relais does
			// not write either (Camunda QA).
			return nil, false, fmt.Errorf("a Date is written as Camunda writes it, yyyy-MM-dd'T'HH:mm:ss.SSSZ (2026-03-01T10:20:00.000+0100), or in RFC 3339, not %q", s)
		}
		if !ok {
			break // a String the contract will judge (a full-date passes)
		}
		if f.Type == contracts.TypeDatetime {
			b, _ := json.Marshal(t.Format(time.RFC3339Nano))
			return b, true, nil
		}
		if h, m, sec := t.Clock(); h != 0 || m != 0 || sec != 0 || t.Nanosecond() != 0 {
			return nil, false, fmt.Errorf("a date field takes a Date at midnight (in its own offset) or a yyyy-MM-dd String, not %s", s)
		}
		b, _ := json.Marshal(t.Format(time.DateOnly))
		return b, true, nil
	case contracts.TypeObject, contracts.TypeList:
		if isString && (kind == "json" || kind == "object") {
			var doc json.RawMessage
			if err := json.Unmarshal([]byte(s), &doc); err != nil {
				return nil, false, fmt.Errorf("%s %s value must hold JSON: %v", article(v.Type), v.Type, err)
			}
			// Held in a string, the document escaped the body's strict
			// check: a duplicate key or a lone surrogate would be stored
			// as the last duplicate or U+FFFD, not as sent.
			if ps := jsontree.CheckText(doc, maxJSONDepth); len(ps) > 0 {
				return nil, false, fmt.Errorf("%s %s value must hold strict JSON: %s: %s", article(v.Type), v.Type, cmp.Or(ps[0].Pointer, "/"), ps[0].Message)
			}
			return doc, true, nil
		}
	}
	return json.RawMessage(raw), true, nil
}

// maxJSONDepth bounds the nesting the strict check of a Json value
// follows, as the body's.
const maxJSONDepth = 10_000

// typeNamesFor lists the Camunda type names (lower case) a completion may
// give a field of each contract type; a value without a type name is
// judged by its JSON alone, and text and choice fields take any name
// (docs/camunda.md).
var typeNamesFor = map[contracts.Type][]string{
	contracts.TypeInteger:  {"integer", "long", "short", "double"},
	contracts.TypeNumber:   {"integer", "long", "short", "double"},
	contracts.TypeBoolean:  {"boolean"},
	contracts.TypeDate:     {"date", "string"},
	contracts.TypeDatetime: {"date", "string"},
	contracts.TypeObject:   {"json", "object"},
	contracts.TypeList:     {"json", "object"},
}

// fitsJSON reports whether raw is of the JSON kind a field of type t
// holds (a number, a boolean, an object, a list, a string for dates).
func fitsJSON(t contracts.Type, raw []byte) bool {
	switch t {
	case contracts.TypeInteger, contracts.TypeNumber:
		return raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'
	case contracts.TypeBoolean:
		return string(raw) == "true" || string(raw) == "false"
	case contracts.TypeObject:
		return raw[0] == '{'
	case contracts.TypeList:
		return raw[0] == '['
	case contracts.TypeDate, contracts.TypeDatetime:
		return raw[0] == '"'
	}
	return false
}

// typeNameList says typeNamesFor's names as a message does.
var typeNameList = map[contracts.Type]string{
	contracts.TypeInteger:  "an Integer, Long, Short or Double",
	contracts.TypeNumber:   "an Integer, Long, Short or Double",
	contracts.TypeBoolean:  "a Boolean",
	contracts.TypeDate:     "a Date or a yyyy-MM-dd String",
	contracts.TypeDatetime: "a Date or an RFC 3339 String",
	contracts.TypeObject:   "Json (or an Object serialized as application/json)",
	contracts.TypeList:     "Json (or an Object serialized as application/json)",
}

// article is the indefinite article before a type name: "an Integer", "a
// Long".
func article(typ string) string {
	if typ != "" && strings.ContainsRune("AEIOUaeiou", rune(typ[0])) {
		return "an"
	}
	return "a"
}
