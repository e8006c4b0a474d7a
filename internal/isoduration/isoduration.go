// Package isoduration parses and formats ISO-8601 durations (PT1M, P1D,
// PT0.5S), the only duration syntax Relais accepts in configuration and in
// its API, so that every client language can produce them without guessing
// at Go's time.ParseDuration dialect.
package isoduration

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("not an ISO-8601 duration")

// calendarError refuses a valid ISO-8601 duration in years or months: it
// is one, so saying it is not would send its author looking for a typo.
type calendarError string

func (e calendarError) Error() string {
	msg := fmt.Sprintf("%q: years and months have no fixed length, so Relais does not accept them: use days (P30D, P365D)", string(e))
	if minutes := minutesMeant(string(e)); minutes != "" {
		// P10M is the usual slip for ten minutes (designer QA).
		msg += "; for minutes, " + minutes + " (time units come after T)"
	}
	return msg
}

// minutesMeant is s with the T it lacks before its months, when that reads
// as minutes (P10M: PT10M, P1D30M: P1DT30M); "" otherwise.
func minutesMeant(s string) string {
	if strings.Contains(s, "T") || strings.Contains(s, "Y") || !strings.HasSuffix(s, "M") {
		return ""
	}
	i := len(s) - 1
	for i > 0 && (s[i-1] >= '0' && s[i-1] <= '9') {
		i--
	}
	candidate := s[:i] + "T" + s[i:]
	if _, err := Parse(candidate); err != nil {
		return ""
	}
	return candidate
}

// Unwrap makes it an ErrSyntax for callers that tell parse errors apart.
func (e calendarError) Unwrap() error { return ErrSyntax }

// tooLongError refuses a valid duration longer than a time.Duration holds,
// naming the longest one accepted rather than calling it malformed.
type tooLongError string

func (e tooLongError) Error() string {
	return fmt.Sprintf("%q is longer than Relais can count: at most %s (about 292 years)", string(e), Format(time.Duration(math.MaxInt64).Truncate(24*time.Hour)))
}

// Unwrap makes it an ErrSyntax for callers that tell parse errors apart.
func (e tooLongError) Unwrap() error { return ErrSyntax }

// Parse reads an ISO-8601 duration made of days, hours, minutes and seconds
// (P[nD][T[nH][nM][n[.f]S]]). Weeks are accepted (PnW). Years and months are
// refused because their length depends on a calendar date; negative durations
// are refused because no Relais setting means anything negative.
func Parse(s string) (time.Duration, error) {
	orig := s
	fail := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("%q: %w (%s; examples: PT30S, PT5M, PT1H, P1D)", orig, ErrSyntax, why)
	}
	if strings.HasPrefix(s, "-") {
		// -PT1S is ISO 8601's, yet no Relais setting means anything
		// negative: said, rather than "must start with P" (OpenAPI QA).
		return fail("a duration here is never negative")
	}
	if !strings.HasPrefix(s, "P") {
		return fail("must start with P" + spelledOtherwise(s))
	}
	s = s[1:]
	if s == "" || s == "T" {
		return fail("no components")
	}
	var total float64
	inTime := false
	seen := ""
	components := 0
	for len(s) > 0 {
		if s[0] == 'T' {
			if inTime {
				return fail("T appears twice")
			}
			inTime = true
			s = s[1:]
			if s == "" {
				return fail("T without time components")
			}
			continue
		}
		at := len(orig) - len(s) // where this component starts in orig
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return fail("expected a number followed by a unit")
		}
		num, unit := s[:i], s[i]
		s = s[i+1:]
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' {
			return fail("bad number " + strconv.Quote(num))
		}
		key := string(unit)
		if inTime {
			key = "T" + key
		}
		if strings.Contains(seen, key+",") {
			return fail("unit " + string(unit) + " repeated")
		}
		seen += key + ","
		var unitDur float64
		switch {
		case !inTime && unit == 'W':
			unitDur = float64(7 * 24 * time.Hour)
		case !inTime && unit == 'D':
			unitDur = float64(24 * time.Hour)
		case !inTime && (unit == 'Y' || unit == 'M'):
			return 0, calendarError(orig)
		case inTime && unit == 'H':
			unitDur = float64(time.Hour)
		case inTime && unit == 'M':
			unitDur = float64(time.Minute)
		case inTime && unit == 'S':
			unitDur = float64(time.Second)
		default:
			why := "unknown unit " + string(unit)
			if up := inUpperCase(orig); up != "" {
				why += up
			} else if !inTime && (unit == 'H' || unit == 'S') {
				// P1H, P30S, P1H30M: the T forgotten (verifier QA).
				if meant := orig[:at] + "T" + orig[at:]; meant != orig {
					if _, err := Parse(meant); err == nil {
						why += ", as in " + meant + " (time units come after T)"
					}
				}
			}
			return fail(why)
		}
		if strings.Contains(num, ".") && !(inTime && unit == 'S') {
			return fail("only seconds may have a fraction")
		}
		total += v * unitDur
		components++
	}
	if components == 0 {
		return fail("no components")
	}
	// float64(math.MaxInt64) is 2^63, one past it: a total that rounds to
	// it would convert to the most negative duration.
	if math.Round(total) >= math.MaxInt64 {
		return 0, tooLongError(orig)
	}
	return time.Duration(math.Round(total)), nil
}

// spelledOtherwise names the ISO-8601 spelling of a duration written in
// lower case (pt10s) or in Go's dialect (10s, 1h30m), the two mistakes
// people who know what they mean make; it is empty for anything else.
func spelledOtherwise(s string) string {
	if up := inUpperCase(s); up != "" {
		return up
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 && s != "0" {
		return ", as in " + Format(d) + " for " + s
	}
	// Days and weeks, which Go's durations do not write, and units
	// spelled out (designer QA: 7d was told only that it must start with
	// P; 1d2h and 7days then got nothing).
	if d, ok := shorthand(s); ok {
		return ", as in " + Format(d) + " for " + s
	}
	return ""
}

// shorthandUnits are the units people write in a duration's shorthand.
var shorthandUnits = map[string]time.Duration{
	"w": 7 * 24 * time.Hour, "wk": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
}

// shorthand reads whole numbers each followed by a unit, spaces allowed
// between them (1d2h, 7days, 2 hours 30 min), each unit once; ok is false
// for anything else, a zero or an overflowing total included.
func shorthand(s string) (d time.Duration, ok bool) {
	seen := map[time.Duration]bool{}
	s = strings.TrimSpace(s)
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i > 7 {
			return 0, false
		}
		n, _ := strconv.Atoi(s[:i])
		s = strings.TrimLeft(s[i:], " ")
		j := 0
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
			j++
		}
		// M alone is a month as often as a minute: no guess.
		unit, known := shorthandUnits[strings.ToLower(s[:j])]
		if !known || seen[unit] || s[:j] == "M" {
			return 0, false
		}
		seen[unit] = true
		if time.Duration(n) > (math.MaxInt64-d)/unit {
			return 0, false
		}
		d += time.Duration(n) * unit
		s = strings.TrimLeft(s[j:], " ")
	}
	return d, d > 0
}

// inUpperCase names s in upper case when that is a duration and s is not
// (pt10s, PT10m); it is empty otherwise.
func inUpperCase(s string) string {
	if up := strings.ToUpper(s); up != s && strings.HasPrefix(up, "P") {
		if _, err := Parse(up); err == nil {
			return ", in upper case: " + up
		}
	}
	return ""
}

// Format writes d in the shortest ISO-8601 form Parse reads back exactly:
// days, hours, minutes and (fractional) seconds. Zero is "PT0S".
func Format(d time.Duration) string {
	if d == 0 {
		return "PT0S"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	b.WriteByte('P')
	if days := d / (24 * time.Hour); days > 0 {
		fmt.Fprintf(&b, "%dD", days)
		d -= days * 24 * time.Hour
	}
	if d == 0 {
		return b.String()
	}
	b.WriteByte('T')
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dH", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dM", m)
		d -= m * time.Minute
	}
	if d > 0 {
		secs := d / time.Second
		frac := d % time.Second
		if frac == 0 {
			fmt.Fprintf(&b, "%dS", secs)
		} else {
			f := strings.TrimRight(fmt.Sprintf("%09d", int64(frac)), "0")
			fmt.Fprintf(&b, "%d.%sS", secs, f)
		}
	}
	return b.String()
}

// Duration is a time.Duration that reads and writes itself as an ISO-8601
// string in JSON. The zero value is zero.
type Duration time.Duration

// MarshalJSON writes the ISO-8601 form.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(Format(time.Duration(d)))
}

// UnmarshalJSON reads an ISO-8601 string; any other JSON type is an error.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w (a string such as \"PT1M\" is expected)", ErrSyntax)
	}
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
