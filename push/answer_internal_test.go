package push

import (
	"strings"
	"testing"
)

// A destination's answer that is not {"outputs": {...}} fails the
// occurrence with a message that says what is wrong with it.
func TestAnswerOf(t *testing.T) {
	for body, want := range map[string]string{
		`{"outputs":{"score":42}}`:                    "",
		` {"outputs": {"score": 42}} `:                "",
		`{"outputs":{"score":42},"note":"x","a/b":1}`: "members other than outputs: /a~1b, /note",
		`{"outputs":{`:                                "not a JSON object",
		`[1]`:                                         "not a JSON object",
		`null`:                                        "not a JSON object",
		// What came is quoted, as an error answer's body is.
		`<html>Bad Gateway</html>`:   `not a JSON object (a destination answers {"outputs": {...}}): <html>Bad Gateway</html>`,
		`{"outputs":{}} {}`:          "data after its JSON object",
		`{"outputs":{}}]`:            "data after its JSON object",
		`{}`:                         "no outputs object",
		`{"outputs":null}`:           "no outputs object",
		`{"outputs":[1]}`:            "no outputs object",
		`{"outputs":{"a":"\ud800"}}`: "not strict JSON at /outputs/a",
		`{"outputs":{"a":1,"a":2}}`:  "not strict JSON at /outputs/a",
		// What each is, rather than "not a JSON object" (push QA).
		``:                                  "has no body",
		" \n":                               "has no body",
		"\ufeff{\"outputs\":{\"score\":1}}": "byte order mark",
	} {
		got := answerOf([]byte(body))
		switch {
		case want == "" && (got.ErrorCode != "" || len(got.Outputs) == 0):
			t.Errorf("%s: %+v, want outputs", body, got)
		case want != "" && (got.ErrorCode != "invalid_outputs" || !strings.Contains(got.Message, want)):
			t.Errorf("%s: %s %q, want invalid_outputs saying %q", body, got.ErrorCode, got.Message, want)
		}
	}
}
