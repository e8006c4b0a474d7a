package console

import (
	"context"
	"testing"
	"time"
)

// A span reads rounded to its last unit, never cut: a retry due in 2 min
// 59 s is "3 min" away, not 2.
func TestApproxDurationRounds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		45 * time.Second:                               "45 s",
		59*time.Second + 600*time.Millisecond:          "1 min",
		2*time.Minute + 59*time.Second:                 "3 min",
		2*time.Minute + 29*time.Second:                 "2 min",
		59*time.Minute + 45*time.Second:                "1 h",
		time.Hour + 59*time.Minute + 31*time.Second:    "2 h",
		23*time.Hour + 59*time.Minute + 40*time.Second: "1 d",
		3*24*time.Hour + 4*time.Hour + 31*time.Minute:  "3 d 5 h",
	} {
		if got := spaced(approxDuration(context.Background(), d)); got != want {
			t.Errorf("approxDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// A time zone reads as its place, the zone's name beside it.
func TestPlaceName(t *testing.T) {
	t.Parallel()
	for zone, want := range map[string]string{
		"America/Sao_Paulo":              "Sao Paulo (America/Sao_Paulo)",
		"Europe/Paris":                   "Paris (Europe/Paris)",
		"America/Argentina/Buenos_Aires": "Buenos Aires (America/Argentina/Buenos_Aires)",
	} {
		if got := placeName(zone); got != want {
			t.Errorf("placeName(%q) = %q, want %q", zone, got, want)
		}
	}
}
