package camunda

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// jsonInt is an integer member of a Camunda request body (maxTasks,
// lockDuration, retries...). Camunda's REST layer reads one from a JSON
// string holding it too ("3", as Jackson coerces scalars): a client that
// writes every value as a string works against Camunda, and so here.
type jsonInt int64

// UnmarshalJSON reads a JSON integer, or a string holding one (blanks
// around it allowed).
func (n *jsonInt) UnmarshalJSON(b []byte) error {
	text, quoted := string(b), false
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		text, quoted = strings.TrimSpace(s), true
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil && !quoted && !isJSONInteger(text) {
		// 1.0 or 1e3, which Jackson takes for an int (Camunda QA): a
		// whole value is read, whatever its spelling; 1.5 is refused
		// where Jackson would cut it to 1.
		if r, ok := new(big.Rat).SetString(text); ok && json.Valid([]byte(text)) && r.IsInt() {
			if !r.Num().IsInt64() {
				return fmt.Errorf("is out of range: at most %d", int64(math.MaxInt64))
			}
			v, err = r.Num().Int64(), nil
			text = strconv.FormatInt(v, 10)
		}
	}
	if err != nil && isJSONInteger(text) {
		return fmt.Errorf("is out of range: at most %d", int64(math.MaxInt64))
	}
	if err != nil || !isJSONInteger(text) {
		if quoted {
			return fmt.Errorf("must be a whole number (or a string holding one, as %q does not)", text)
		}
		return fmt.Errorf("must be a whole number, not %s", text)
	}
	*n = jsonInt(v)
	return nil
}

// jsonBool is a boolean member of a Camunda request body (usePriority,
// includeExtensionProperties...): true or false, or a string holding one,
// in any case ("true", "FALSE"), as Jackson coerces scalars (Camunda QA:
// "true" refused the whole fetch).
type jsonBool bool

// UnmarshalJSON reads a JSON boolean, or a string holding one (blanks
// around it allowed).
func (b *jsonBool) UnmarshalJSON(data []byte) error {
	var v bool
	if json.Unmarshal(data, &v) == nil {
		*b = jsonBool(v)
		return nil
	}
	var s string
	if json.Unmarshal(data, &s) != nil {
		return fmt.Errorf("must be a boolean, not %s", data)
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		*b = true
	case "false":
		*b = false
	default:
		return fmt.Errorf("must be a boolean (or a string holding one, as %q does not)", s)
	}
	return nil
}

// isJSONInteger reports whether s is written as JSON writes an integer: an
// optional minus, then digits without a leading zero (strconv also takes
// "+3" and "0003", which JSON does not).
func isJSONInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || s[0] == '0' && len(s) > 1 {
		return false
	}
	return strings.Trim(s, "0123456789") == ""
}

// scalarFromString reads a typed variable's value given as a JSON string
// for a numeric or boolean Camunda type (kind, lower case), as Camunda's
// REST layer does: an Integer "42", a Double "1.5", a Boolean "true". It
// returns the value as JSON, or ok false when raw is not a string or kind
// takes strings; set false for an empty string, which Camunda reads as
// null. A string that holds no such value is an error.
func scalarFromString(kind string, raw []byte) (value []byte, set, ok bool, err error) {
	if len(raw) == 0 || raw[0] != '"' {
		return nil, false, false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false, false, nil
	}
	s = strings.TrimSpace(s)
	switch kind {
	case "integer", "long", "short":
		if s == "" {
			return nil, false, true, nil
		}
		if !isJSONInteger(s) {
			return nil, false, true, errNotScalar(kind, s, "a whole number")
		}
		return []byte(s), true, true, nil
	case "double":
		if s == "" {
			return nil, false, true, nil
		}
		// JSON's number grammar: no NaN, Infinity, hexadecimal or
		// underscores, which strconv would take.
		var num json.Number
		if !json.Valid([]byte(s)) || json.Unmarshal([]byte(s), &num) != nil {
			return nil, false, true, errNotScalar(kind, s, "a number")
		}
		return []byte(s), true, true, nil
	case "boolean":
		switch {
		case s == "":
			return nil, false, true, nil
		case strings.EqualFold(s, "true"):
			return []byte("true"), true, true, nil
		case strings.EqualFold(s, "false"):
			return []byte("false"), true, true, nil
		}
		return nil, false, true, errNotScalar(kind, s, "true or false")
	}
	return nil, false, false, nil
}

func errNotScalar(kind, s, want string) error {
	name := strings.ToUpper(kind[:1]) + kind[1:]
	return fmt.Errorf("%s %s given as a string must hold %s, not %q", article(name), name, want, s)
}
