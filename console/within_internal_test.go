package console

import (
	"context"
	"testing"

	"golang.org/x/text/language"

	"github.com/relais/relais/contracts"
)

// A field of a list's items is read as in "each item of lines", not in
// "(each item)" (designer QA), in both languages.
func TestWithinNamesTheList(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{{Name: "lines", Type: contracts.TypeList,
		Items: &contracts.Field{Type: contracts.TypeObject, Fields: []contracts.Field{{Name: "sku", Type: contracts.TypeText}}}}}}
	for tag, want := range map[language.Tag]string{language.English: "(in each item of lines)", language.French: "(dans chaque élément de lines)"} {
		ctx := context.WithValue(context.Background(), localeKey{}, newLocale(tag))
		rows := contractRows(ctx, c, "")
		if len(rows) != 3 || rows[2].Name != "sku" || rows[2].Within != want {
			t.Errorf("%v: rows %+v, want sku within %q", tag, rows, want)
		}
	}
}
