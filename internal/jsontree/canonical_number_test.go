package jsontree

import "testing"

// TestCanonicalNumber: one form per decimal value, exact, whatever the
// literal's zeros, point and exponent; a number already written plainly
// keeps its literal.
func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	same := [][]string{
		{"120.5", "120.50", "1.205e2", "1205E-1", "12050e-2", "0.1205e+3"},
		{"100", "1e2", "100.0", "1E+2", "0.001e5"},
		{"0", "-0", "0.0", "0e10", "-0.000e-3", "0e99999999999999999999"},
		{"-3.25", "-325e-2", "-3.2500"},
		{"0.05", "5e-2", "0.050", "50e-3"},
		{"1", "1.0", "10e-1"},
		{"1e101", "10e100", "0.1e102"},
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
		// Written plainly: kept as written.
		"100": "100", "7": "7", "-3.25": "-3.25", "0.05": "0.05", "120.5": "120.5", "0": "0",
		"12345678901234567890123": "12345678901234567890123",
		// Past a float64's 53 bits: two integers stay two.
		"9007199254740993": "9007199254740993", "9007199254740992": "9007199254740992",
		"120.50": "120.5", "1e2": "100", "-0.0": "0", "1e101": "1e101", "15e-102": "15e-102",
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
	if got := string(AppendCanonical(nil, n)); got != `{"a":0,"b":[1.5,2]}` {
		t.Errorf("AppendCanonical = %s", got)
	}
}
