package contracts

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// formats are the format checks of both validators (the compiled schema's
// and the fast path's): the schema library's, less what the decoders
// workers use would refuse after Relais took it.
var formats = map[string]func(any) bool{
	"date":      jsonschema.Formats["date"],
	"date-time": decodableDateTime,
	FormatEmail: trimmedEmail,
	FormatURI:   jsonschema.Formats["uri"],
	FormatUUID:  jsonschema.Formats["uuid"],
}

// dateTimePattern and trimmedPattern tell validators reading the served
// schemas what the format checks below add to the library's: with them, an
// Ajv or a jsonschema in a worker's tests judges values as Relais does.
const (
	dateTimePattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$`
	trimmedPattern  = `^[^\s](.*[^\s])?$`
)

// decodableDateTime is RFC 3339's date-time as typed decoders read it: a
// lower-case t or z, a leap second (23:59:60) and more than nine digits
// of a second are RFC 3339 too, but
// Go's time.Time, Java's OffsetDateTime and Python's datetime refuse them,
// so a value Relais took would fail the worker's decoding of every task.
func decodableDateTime(v any) bool {
	s, ok := v.(string)
	if !ok {
		return true
	}
	var t time.Time
	return jsonschema.Formats["date-time"](s) && t.UnmarshalText([]byte(s)) == nil && fractionDigits(s) <= 9
}

// fractionDigits counts the digits of a date-time's fraction of a second:
// Java's and Python's readers take nanoseconds at most, Go's any number.
func fractionDigits(s string) int {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return 0
	}
	n := 0
	for _, c := range s[dot+1:] {
		if c < '0' || c > '9' {
			break
		}
		n++
	}
	return n
}

// trimmedEmail is the library's email less the white space net/mail
// skips before an address: " a@b" would pass, and be delivered, as an
// address no mail server takes (one ending in a space is refused already).
func trimmedEmail(v any) bool {
	s, ok := v.(string)
	if !ok {
		return true
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && !unicode.IsSpace(first) && !unicode.IsSpace(last) && !strings.ContainsAny(s, "\r\n") && jsonschema.Formats["email"](s)
}
