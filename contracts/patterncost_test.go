package contracts

import (
	"strings"
	"testing"
)

// A pattern whose program is too large to check values quickly is named
// at its pointer, nested fields and list items included; a usual one is
// not.
func TestPatternProblems(t *testing.T) {
	costly := strings.Repeat("[a-z]{1000}", 3) + "!"
	c := Contract{Fields: []Field{
		{Name: "email", Type: TypeText, Pattern: `^[^@\s]+@[^@\s]+\.[a-z]{2,}$`},
		{Name: "ref", Type: TypeText, Pattern: `^[A-Za-z0-9]{1,1000}$`},
		{Name: "code", Type: TypeText, Pattern: costly},
		{Name: "address", Type: TypeObject, Fields: []Field{{Name: "zip", Type: TypeText, Pattern: costly}}},
		{Name: "tags", Type: TypeList, Items: &Field{Type: TypeText, Pattern: costly}},
	}}
	var got []string
	for _, v := range PatternProblems(c, "/inputs") {
		got = append(got, v.Path)
		if !strings.Contains(v.Message, "at most 2500") {
			t.Errorf("%s: %q", v.Path, v.Message)
		}
	}
	want := []string{"/inputs/fields/2/pattern", "/inputs/fields/3/fields/0/pattern", "/inputs/fields/4/items/pattern"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("PatternProblems = %v, want %v", got, want)
	}
	if n := PatternSteps(`[a-z]{1000}`); n <= 1000 || n > 1100 {
		t.Errorf("PatternSteps([a-z]{1000}) = %d, want about a thousand", n)
	}
}

// A repeat count never closed is refused when a document is saved, with
// where it begins; closed counts, escaped braces, braces in a class or
// before no digit are left alone (designer QA: ^[A-Z]{2 refused every
// country code once pinned).
func TestUnclosedRepeatIsAPatternProblem(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]int{
		`^a{2}b{1,}c{1,3}\{2[{3]x{y$`: -1,
		`[]{2]`:                       -1,
		`^[A-Z]{2`:                    6,
		`a{1,3$`:                      1,
		`\\{2`:                        2,
		`\Q{2\E`:                      -1,
		`\Q{2`:                        -1,
		`^[[:alpha:]{0-9]+$`:          -1,
		`\Q{\E{2`:                     5,
	} {
		if got := unclosedRepeat(p); got != want {
			t.Errorf("unclosedRepeat(%q) = %d, want %d", p, got, want)
		}
	}
	c := Contract{Fields: []Field{{Name: "o", Type: TypeObject, Fields: []Field{{Name: "country", Type: TypeText, Pattern: `^[A-Z]{2`}}}}}
	vs := PatternProblems(c, "/inputs")
	if len(vs) != 1 || vs[0].Path != "/inputs/fields/0/fields/0/pattern" || !strings.Contains(vs[0].Message, `never closes ("{2")`) {
		t.Errorf("PatternProblems = %+v; want the unclosed count at its pointer", vs)
	}
}

// What only RE2 reads is refused at save with the common spelling
// (evolution QA: five such patterns were published silently, and Ajv,
// which the README recommends to workers, cannot compile them); what
// both read, escapes and classes included, is left alone.
func TestECMAOnlyPatternsAreProblems(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		`(?i)^fr$`:         `(?i): ECMA-262 has no flags`,
		`^(?i:fr)$`:        `(?i:: ECMA-262 has no flags`,
		`(?s).`:            `(?s): ECMA-262 has no flags`,
		`\A[a-z]+\z`:       `\A: ECMA-262 has no \A; ^`,
		`^[a-z]+\z`:        `\z: ECMA-262 has no \z; $`,
		`(?P<x>a)`:         `(?P<…>: ECMA-262 names a group (?<name>…)`,
		`^[[:alpha:]]+$`:   `[:alpha:]: ECMA-262 has no POSIX classes`,
		`^[^[:digit:]x]$`:  `[:digit:]: ECMA-262 has no POSIX classes`,
		`^\p{Greek}+$`:     `\p{Greek}: a script's name, which ECMA-262 writes \p{Script=Greek}`,
		`^\pL+$`:           `\pL: ECMA-262 takes a class's name in braces only, as \p{L}`,
		`^\p{^L}$`:         `\p{^L}: ECMA-262 negates a class with \P{…}`,
		`\Q.*\E`:           `\Q…\E: ECMA-262 has no quoting`,
		`^\x{263A}$`:       `\x{…}: ECMA-262 reads \x as two hexadecimal digits only`,
		`^[A-Z]{2}$`:       "",
		`^\p{Lu}\P{Nd}$`:   "",
		`^(?:a|b)(?<n>c)$`: "",
		`^[(?i)]\\A\x41$`:  "",
		`^\d+\.\w+\s?$`:    "",
		`^[]\[:a:]]$`:      "",
	} {
		got := ecmaOnly(p)
		if want == "" && got != "" || want != "" && !strings.HasPrefix(got, want) {
			t.Errorf("ecmaOnly(%q) = %q, want it to begin %q", p, got, want)
		}
	}
	c := Contract{Fields: []Field{{Name: "tags", Type: TypeList, Items: &Field{Type: TypeText, Pattern: `(?i)^[a-z]+$`}}}}
	vs := PatternProblems(c, "/outputs")
	if len(vs) != 1 || vs[0].Path != "/outputs/fields/0/items/pattern" || !strings.Contains(vs[0].Message, "pattern uses (?i): ECMA-262 has no flags") {
		t.Errorf("PatternProblems = %+v; want the flag at its pointer", vs)
	}
}

// Braces outside a count, escapes of what ECMA-262 does not call syntax,
// and octal escapes are RE2's alone too (verifier QA: ^a{,3}$ matched
// only "a{,3}", and \- or \# compile nowhere with the u flag); a count's
// braces, escaped braces, \- in a class and \0 are common; an unclosed
// count is unclosedRepeat's to say, once; \x{…} holds no count.
func TestECMAOnlyBracesAndEscapes(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		`^a{,3}$`:            `{,3}: RE2 reads it as the characters`,
		`^a{b$`:              `{: ECMA-262 (with the u flag`,
		`^a}$`:               `}: ECMA-262 (with the u flag`,
		`^a\-b$`:             `\-: ECMA-262 (with the u flag JSON Schema validators use) escapes only`,
		`^\#$`:               `\#: ECMA-262`,
		`^[\#]$`:             `\#: ECMA-262`,
		`^\123$`:             `\123: an octal escape`,
		`^\a$`:               `\a: ECMA-262 has no \a`,
		`^a{2,}b{1,3}\{\}$`:  "",
		`^[a\-z\]]\0$`:       "",
		`^\/\.\$\^\(\)\|\*$`: "",
		`^[A-Z]{2`:           "",
	} {
		got := ecmaOnly(p)
		if want == "" && got != "" || want != "" && !strings.HasPrefix(got, want) {
			t.Errorf("ecmaOnly(%q) = %q, want it to begin %q", p, got, want)
		}
	}
	if got := unclosedRepeat(`^\x{263A}$`); got != -1 {
		t.Errorf("unclosedRepeat(\\x{263A}) = %d, want -1", got)
	}
	c := Contract{Fields: []Field{{Name: "s", Type: TypeText, Pattern: `^\x{263A}$`}}}
	if vs := PatternProblems(c, "/inputs"); len(vs) != 1 {
		t.Errorf("\\x{263A}: %+v, want one problem", vs)
	}
}
