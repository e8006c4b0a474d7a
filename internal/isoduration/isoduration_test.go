package isoduration

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"PT1M", time.Minute},
		{"PT0S", 0},
		{"P1D", 24 * time.Hour},
		{"P1W", 7 * 24 * time.Hour},
		{"PT10S", 10 * time.Second},
		{"PT1H30M", 90 * time.Minute},
		{"P1DT2H", 26 * time.Hour},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1.25S", 1250 * time.Millisecond},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "1 minute", "P", "PT", "1M", "PT1", "P1M", "P1Y", "PT1.5M", "PT1M1M", "PTT1S", "P-1D", "PT.5S", "PT5.S", "PT1.2.3S", "pt1m", "PT1X"} {
		if got, err := Parse(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, %v; want ErrSyntax", in, got, err)
		}
	}
}

// A duration in lower case or in Go's dialect is refused with its ISO-8601
// spelling, so that the fix is in the message.
func TestParseNamesTheSpellingMeant(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"pt10s":  "in upper case: PT10S",
		"p1dt2h": "in upper case: P1DT2H",
		"10s":    "as in PT10S for 10s",
		"1h30m":  "as in PT1H30M for 1h30m",
		"1.5s":   "as in PT1.5S for 1.5s",
		// Days and weeks too (designer QA: 7d said only "must start
		// with P").
		"7d": "as in P7D for 7d",
		"2w": "as in P14D for 2w",
		// And what else people write (1d2h, 7days got nothing).
		"1d2h":           "as in P1DT2H for 1d2h",
		"7days":          "as in P7D for 7days",
		"1 hour":         "as in PT1H for 1 hour",
		"2 Hours 30 min": "as in PT2H30M for 2 Hours 30 min",
		"1w1w":           "",
		"1M":             "",
		"3Min":           "as in PT3M for 3Min",
		"0d":             "",
		"5 parsecs":      "",
		"d":              "",
		"pt1x":           "",
		"-10s":           "never negative",
		"-PT1S":          "never negative",
		// Units in lower case after a P (designer QA: PT10m), and months
		// meant as minutes.
		"PT10m":  "in upper case: PT10M",
		"P1DT2h": "in upper case: P1DT2H",
		"P10M":   "for minutes, PT10M (time units come after T)",
		"P1D30M": "for minutes, P1DT30M",
		"P1H":    "as in PT1H (time units come after T)",
		"P30S":   "as in PT30S",
		"P1H30M": "as in PT1H30M",
		"P2D3H":  "as in P2DT3H",
		"P1Y":    "use days (P30D, P365D)",
		"P1Y10M": "use days",
	} {
		_, err := Parse(in)
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v; want ErrSyntax", in, err)
			continue
		}
		if in == "P1Y" || in == "P1Y10M" {
			if strings.Contains(err.Error(), "for minutes") {
				t.Errorf("Parse(%q) = %v; years are no minutes", in, err)
			}
		}
		if want == "" {
			if strings.Contains(err.Error(), "upper case") || strings.Contains(err.Error(), "as in") {
				t.Errorf("Parse(%q) = %v; want no spelling offered", in, err)
			}
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v; want it to say %q", in, err, want)
		}
	}
}

// A valid duration past what Relais can count is refused naming the
// longest one it takes, not called malformed.
func TestParseRefusesTooLongNamingTheLongest(t *testing.T) {
	t.Parallel()
	if _, err := Parse("P106751D"); err != nil {
		t.Errorf("Parse(P106751D) = %v, want the longest accepted", err)
	}
	_, err := Parse("P106752D")
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "at most P106751D") || strings.Contains(err.Error(), "not an ISO-8601") {
		t.Errorf("Parse(P106752D) = %v; want a refusal naming P106751D", err)
	}
	// Within a float's rounding of 2^63 ns: refused, never read as the
	// most negative duration (which went under every ceiling).
	for _, s := range []string{"P106751DT23H47M16.854775807S", "PT9223372036.8547758S", "PT9223372036.854775807S"} {
		if d, err := Parse(s); err == nil {
			t.Errorf("Parse(%s) = %v, want refused as too long", s, d)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, time.Second, 90 * time.Minute, 26*time.Hour + 5*time.Second, 1500 * time.Millisecond, 3 * 24 * time.Hour} {
		s := Format(d)
		back, err := Parse(s)
		if err != nil || back != d {
			t.Errorf("Parse(Format(%v)) = Parse(%q) = %v, %v", d, s, back, err)
		}
	}
	if got := Format(time.Minute); got != "PT1M" {
		t.Errorf("Format(1m) = %q, want PT1M", got)
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	var d Duration
	if err := d.UnmarshalJSON([]byte(`"PT2M"`)); err != nil || d.Std() != 2*time.Minute {
		t.Fatalf("got %v, %v", d, err)
	}
	if err := d.UnmarshalJSON([]byte(`120`)); err == nil {
		t.Fatal("a number must be refused")
	}
	b, _ := Duration(time.Hour).MarshalJSON()
	if string(b) != `"PT1H"` {
		t.Fatalf("got %s", b)
	}
}
