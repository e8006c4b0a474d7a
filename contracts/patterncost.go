package contracts

import (
	"fmt"
	"regexp/syntax"
	"strconv"
	"strings"
)

// MaxPatternSteps bounds a pattern's compiled program: Go's regexp runs in
// time linear in the value, times the program's size, and a counted
// repetition multiplies its part ("[a-z]{1000}" is a thousand steps per
// character). Eighty of those, under MaxPatternBytes, took 85 s of a core
// to check one 100,000-character value. 2,500 leave room for any one
// class repeated up to Go's bound of 1,000 ("^[A-Za-z0-9]{1,1000}$" is
// 2,003) and bound the worst case to about 2.5 s of a core per 100,000
// characters.
const MaxPatternSteps = 2_500

// PatternSteps is the size of pattern's compiled program, the work Go's
// regexp does per character of a value in the worst case; 0 for a pattern
// that does not compile (the parser reports it).
func PatternSteps(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// PatternProblems lists the patterns of c, at pointers under base (a
// contract's pointer, "/inputs"), whose programs exceed MaxPatternSteps,
// or that open a repeat count they never close (^[A-Z]{2 for ^[A-Z]{2}:
// RE2 reads it as the characters themselves, so the field would refuse
// every value meant, designer QA; ECMA-262, which JSON Schema's patterns
// follow, refuses it). It is checked when a Working is saved or a process
// published, not when a stored one is read: a revision saved before a
// rule stays readable.
func PatternProblems(c Contract, base string) []Violation {
	var out []Violation
	var walk func(fs []Field, at string)
	var field func(f Field, at string)
	field = func(f Field, at string) {
		if f.Pattern != "" {
			if n := PatternSteps(f.Pattern); n > MaxPatternSteps {
				out = append(out, Violation{Path: at + "/pattern", Message: fmt.Sprintf(
					"pattern is too costly to check: it compiles to %d steps per character, at most %d (a counted repetition such as {1000} repeats its part that many times: bound the length with max_length instead)",
					n, MaxPatternSteps)})
			}
			if what := ecmaOnly(f.Pattern); what != "" {
				out = append(out, Violation{Path: at + "/pattern", Message: "pattern uses " + what +
					" (patterns are published in the JSON Schema, whose readers follow ECMA-262: keep to what it shares with RE2)"})
			}
			if i := unclosedRepeat(f.Pattern); i >= 0 {
				out = append(out, Violation{Path: at + "/pattern", Message: fmt.Sprintf(
					"pattern has a { that opens a repeat it never closes (%q): RE2 would read it as the characters themselves, where a count was meant; close it ({2}) or, for the character, escape it (\\{)",
					f.Pattern[i:min(len(f.Pattern), i+8)])})
			}
		}
		if f.Items != nil {
			field(*f.Items, at+"/items")
		}
		walk(f.Fields, at+"/fields")
	}
	walk = func(fs []Field, at string) {
		for i, f := range fs {
			field(f, at+"/"+strconv.Itoa(i))
		}
	}
	walk(c.Fields, base+"/fields")
	return out
}

// unclosedRepeat is the offset of a { that begins a repeat count never
// closed, or -1. A { in a character class, escaped, or followed by no
// digit is left alone.
func unclosedRepeat(p string) int {
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p) && p[i+1] == 'Q':
			// \Q…\E quotes what it holds (to the end without \E).
			end := strings.Index(p[i+2:], `\E`)
			if end < 0 {
				return -1
			}
			i += 2 + end + 1
		case c == '\\' && i+2 < len(p) && strings.IndexByte("xpP", p[i+1]) >= 0 && p[i+2] == '{':
			// \x{263A}, \p{Greek}: braces that hold no count.
			if end := strings.IndexByte(p[i+3:], '}'); end >= 0 {
				i += 3 + end
			} else {
				i += 2
			}
		case c == '\\':
			i++ // the escaped character
		case inClass && c == '[' && i+1 < len(p) && p[i+1] == ':':
			// A POSIX class, [:alpha:], inside a class.
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				i += 2 + end + 1
			}
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass, i = true, classOpen(p, i)
		case c == '{':
			if j, digits := countEnd(p, i); digits && (j >= len(p) || p[j] != '}') {
				return i
			}
		}
	}
	return -1
}

// countEnd reads what follows the { at p[i] as a repeat count, digits
// then an optional comma and more digits: it returns where that stops
// (a count's } when there is one) and whether digits came first.
func countEnd(p string, i int) (j int, digits bool) {
	j = i + 1
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	digits = j > i+1
	if j < len(p) && p[j] == ',' {
		j++
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
	}
	return j, digits
}

// classOpen is where the members of the class opening at p[i] ('[')
// begin, less one: past a negation's ^, and past a leading ], which is a
// member, not the class's end.
func classOpen(p string, i int) int {
	if i+1 < len(p) && p[i+1] == '^' {
		i++
	}
	if i+1 < len(p) && p[i+1] == ']' {
		i++
	}
	return i
}
