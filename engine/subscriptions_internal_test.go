package engine

import "testing"

// Revisions are said as a person reads them, a run of three or more as a
// range.
func TestRevisionsText(t *testing.T) {
	t.Parallel()
	for want, revs := range map[string][]int{
		"revision 3":            {3},
		"revisions 1, 2":        {2, 1},
		"revisions 1–9":         {1, 2, 3, 4, 5, 6, 7, 8, 9},
		"revisions 1–3, 5, 7–9": {7, 8, 9, 1, 2, 3, 5},
		"revisions 1, 2, 4, 5":  {1, 2, 4, 5},
	} {
		if got := revisionsText(revs); got != want {
			t.Errorf("revisionsText(%v) = %q, want %q", revs, got, want)
		}
	}
}
