package contracts

import (
	"strings"
	"testing"
)

// A pattern whose program is too large to check values quickly is named
// at its pointer, nested fields and list items included; a usual one is
// not.
func TestCostlyPatterns(t *testing.T) {
	costly := strings.Repeat("[a-z]{1000}", 3) + "!"
	c := Contract{Fields: []Field{
		{Name: "email", Type: TypeText, Pattern: `^[^@\s]+@[^@\s]+\.[a-z]{2,}$`},
		{Name: "ref", Type: TypeText, Pattern: `^[A-Za-z0-9]{1,1000}$`},
		{Name: "code", Type: TypeText, Pattern: costly},
		{Name: "address", Type: TypeObject, Fields: []Field{{Name: "zip", Type: TypeText, Pattern: costly}}},
		{Name: "tags", Type: TypeList, Items: &Field{Type: TypeText, Pattern: costly}},
	}}
	var got []string
	for _, v := range CostlyPatterns(c, "/inputs") {
		got = append(got, v.Path)
		if !strings.Contains(v.Message, "at most 2500") {
			t.Errorf("%s: %q", v.Path, v.Message)
		}
	}
	want := []string{"/inputs/fields/2/pattern", "/inputs/fields/3/fields/0/pattern", "/inputs/fields/4/items/pattern"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("CostlyPatterns = %v, want %v", got, want)
	}
	if n := PatternSteps(`[a-z]{1000}`); n <= 1000 || n > 1100 {
		t.Errorf("PatternSteps([a-z]{1000}) = %d, want about a thousand", n)
	}
}
