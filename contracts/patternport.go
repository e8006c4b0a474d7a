package contracts

import (
	"strings"
)

// ecmaOnly finds the first construct of RE2 pattern p that ECMA-262, the
// dialect JSON Schema's patterns follow, refuses or reads otherwise, and
// says how to write it in the subset both take; "" when there is none.
// Relais matches with RE2, but a published schema is read by workers'
// validators (Ajv, Python's jsonschema with its ECMA dialect, Node's
// RegExp with the u flag): a pattern only RE2 reads fails to compile
// there, or compiles to something else (evolution QA: (?i), \A, \z,
// (?P<x>…), [[:alpha:]] and \p{Greek} were all published silently).
func ecmaOnly(p string) string {
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			n := p[i+1]
			switch {
			case strings.IndexByte("!\"#%&',:;<=>@_`~", n) >= 0 || n == '-' && !inClass:
				return `\` + string(n) + `: ECMA-262 (with the u flag JSON Schema validators use) escapes only its own syntax characters; write ` + string(n) + ` alone`
			case n == 'a':
				return `\a: ECMA-262 has no \a; write \x07`
			case n >= '1' && n <= '7', n == '0' && i+2 < len(p) && p[i+2] >= '0' && p[i+2] <= '7':
				j := i + 1
				for j < len(p) && j < i+4 && p[j] >= '0' && p[j] <= '7' {
					j++
				}
				return p[i:j] + `: an octal escape, which ECMA-262 reads as a back-reference; write the character itself, or \xHH`
			}
			switch n {
			case 'A':
				return `\A: ECMA-262 has no \A; ^ means the same in a pattern, which is never multi-line`
			case 'z':
				return `\z: ECMA-262 has no \z; $ means the same in a pattern, which is never multi-line`
			case 'Q':
				return `\Q…\E: ECMA-262 has no quoting; escape each special character with \ instead`
			case 'C':
				return `\C: ECMA-262 has no single-byte match; use . for any character`
			case 'x':
				if i+2 < len(p) && p[i+2] == '{' {
					return `\x{…}: ECMA-262 reads \x as two hexadecimal digits only; write the character itself (or \xHH below 100)`
				}
			case 'p', 'P':
				if i+2 >= len(p) || p[i+2] != '{' {
					return `\` + string(n) + string(p[min(i+2, len(p)-1)]) + `: ECMA-262 takes a class's name in braces only, as \` + string(n) + `{L}`
				}
				end := strings.IndexByte(p[i+3:], '}')
				if end < 0 {
					break
				}
				name := p[i+3 : i+3+end]
				if strings.HasPrefix(name, "^") {
					return `\` + string(n) + `{` + name + `}: ECMA-262 negates a class with \P{…}, not \p{^…}`
				}
				if !ecmaClass(name) {
					return `\` + string(n) + `{` + name + `}: a script's name, which ECMA-262 writes \p{Script=` + name + `} and RE2 refuses; list the script's characters as ranges instead, as [Ͱ-Ͽ] for Greek`
				}
				i += 3 + end
				continue
			}
			i++ // the escaped character
		case inClass && c == '[' && i+1 < len(p) && p[i+1] == ':':
			end := strings.Index(p[i+2:], ":]")
			if end < 0 {
				break
			}
			return p[i:i+2+end+2] + `: ECMA-262 has no POSIX classes; list the ranges ([:alpha:] is a-zA-Z, [:digit:] is 0-9)`
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass, i = true, classOpen(p, i)
		case c == '{':
			j, digits := countEnd(p, i)
			switch {
			case digits && j < len(p) && p[j] == '}':
				i = j // a count
			case digits:
				// An unclosed count, which unclosedRepeat reports.
			case j < len(p) && p[j] == '}' && j > i+1:
				return p[i:j+1] + `: RE2 reads it as the characters and ECMA-262 refuses it; a count names its least ({0,` + p[i+2:j] + `})`
			default:
				return `{: ECMA-262 (with the u flag JSON Schema validators use) takes a brace only in a count ({2}, {1,3}); escape it (\{) for the character`
			}
		case c == '}':
			return `}: ECMA-262 (with the u flag JSON Schema validators use) takes a brace only in a count ({2}, {1,3}); escape it (\}) for the character`
		case c == '(' && i+1 < len(p) && p[i+1] == '?':
			rest := p[i+2:]
			switch {
			case strings.HasPrefix(rest, "P<"):
				return `(?P<…>: ECMA-262 names a group (?<name>…), which RE2 takes too`
			case len(rest) > 0 && strings.IndexByte("imsU-", rest[0]) >= 0:
				j := strings.IndexAny(rest, ":)")
				if j < 0 {
					j = len(rest) - 1
				}
				return `(?` + rest[:j+1] + `: ECMA-262 has no flags in a pattern; spell them out ([Ff][Rr] for (?i)fr, [\s\S] for (?s).)`
			}
		}
	}
	return ""
}

// ecmaClass says whether \p{name} means the same to RE2 and ECMA-262: a
// Unicode general category, short form (both take them), or Any.
func ecmaClass(name string) bool {
	switch name {
	case "Any",
		"C", "Cc", "Cf", "Co", "Cs",
		"L", "Ll", "Lm", "Lo", "Lt", "Lu",
		"M", "Mc", "Me", "Mn",
		"N", "Nd", "Nl", "No",
		"P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps",
		"S", "Sc", "Sk", "Sm", "So",
		"Z", "Zl", "Zp", "Zs":
		return true
	}
	return false
}
