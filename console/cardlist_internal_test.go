package console

import (
	"errors"
	"slices"
	"strconv"
	"testing"
)

func TestOnePageAndItsLinks(t *testing.T) {
	all := []int{1, 2, 3, 4, 5}
	list := func(after int) func(limit int) ([]int, error) {
		return func(limit int) ([]int, error) {
			var out []int
			for _, n := range all {
				if n > after && len(out) < limit {
					out = append(out, n)
				}
			}
			return out, nil
		}
	}
	key := func(n int) string { return strconv.Itoa(n) }
	cases := []struct {
		after           int
		rows            []int
		next, firstHref string
	}{
		{0, []int{1, 2}, "/console/x?after=2", ""},
		{2, []int{3, 4}, "/console/x?after=4", "/console/x"},
		{4, []int{5}, "", "/console/x"}, // the last page: no next, though full pages came before
		{5, nil, "", "/console/x"},      // past the end: a way back only
	}
	for _, c := range cases {
		rows, more, err := onePage(2, list(c.after))
		if err != nil || !slices.Equal(rows, c.rows) {
			t.Fatalf("after %d: rows %v, %v; want %v", c.after, rows, err, c.rows)
		}
		var l cardList
		linkPages(&l, "/console/x", "after", rows, more, c.after == 0, key)
		if l.Pager.NextHref != c.next || l.Pager.FirstHref != c.firstHref {
			t.Errorf("after %d: next %q, first %q; want %q, %q", c.after, l.Pager.NextHref, l.Pager.FirstHref, c.next, c.firstHref)
		}
	}
	// A page exactly full is not followed by a link to an empty one.
	rows, more, _ := onePage(5, list(0))
	if len(rows) != 5 || more {
		t.Errorf("5 of 5 rows: %d rows, more %v", len(rows), more)
	}
	if _, _, err := onePage(2, func(int) ([]int, error) { return nil, errors.New("down") }); err == nil {
		t.Error("a failed fetch was not reported")
	}
}
