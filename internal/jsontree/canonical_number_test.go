package jsontree

import "testing"

// TestCanonicalNumber: one form per decimal value, exact, whatever the
// literal's zeros, point and exponent.
func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	same := [][]string{
		{"120.5", "120.50", "1.205e2", "1205E-1", "12050e-2", "0.1205e+3"},
		{"100", "1e2", "100.0", "1E+2", "0.001e5"},
		{"0", "-0", "0.0", "0e10", "-0.000e-3"},
		{"-3.25", "-325e-2", "-3.2500"},
		{"1", "1.0", "10e-1"},
	}
	for _, group := range same {
		want := CanonicalNumber(group[0])
		for _, lit := range group[1:] {
			if got := CanonicalNumber(lit); got != want {
				t.Errorf("CanonicalNumber(%s) = %s, want %s as for %s", lit, got, want, group[0])
			}
		}
	}
	for lit, want := range map[string]string{
		"120.50": "1205e-1", "100": "1e2", "0.0": "0", "-3.25": "-325e-2", "7": "7",
		// Past a float64's 53 bits: two integers stay two.
		"9007199254740993": "9007199254740993", "9007199254740992": "9007199254740992",
		// Not read: returned as is.
		"1e99999999999999999999": "1e99999999999999999999", "abc": "abc", "-": "-",
	} {
		if got := CanonicalNumber(lit); got != want {
			t.Errorf("CanonicalNumber(%s) = %s, want %s", lit, got, want)
		}
	}
	n, err := Read([]byte(`{"b":[1.50,2e0],"a":-0.0}`), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendCanonical(nil, n)); got != `{"a":0,"b":[15e-1,2]}` {
		t.Errorf("AppendCanonical = %s", got)
	}
}
