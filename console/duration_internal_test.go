package console

import (
	"context"
	"golang.org/x/text/language"
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

// A column of durations reads in one form: the short units, one or
// several (operator QA: "3 secondes" above "3 s 376 ms").
func TestShortDurationKeepsOneForm(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		3 * time.Second:                      "3 s",
		3*time.Second + 376*time.Millisecond: "3 s 376 ms",
		time.Minute:                          "1 min",
		0:                                    "0 s",
		500 * time.Microsecond:               "0 ms",
		2*time.Hour + 5*time.Second:          "2 h 5 s",
	} {
		if got := spaced(formatShortDuration(context.Background(), d)); got != want {
			t.Errorf("formatShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// A time zone reads as its place in the page's language, the zone's
// name beside it (French pages read "Algiers", console QA).
func TestPlaceName(t *testing.T) {
	t.Parallel()
	en := context.WithValue(context.Background(), localeKey{}, newLocale(language.English))
	fr := context.WithValue(context.Background(), localeKey{}, newLocale(language.French))
	for _, c := range []struct {
		ctx        context.Context
		zone, want string
	}{
		{en, "America/Sao_Paulo", "São Paulo (America/Sao_Paulo)"},
		{en, "Europe/Paris", "Paris (Europe/Paris)"},
		{en, "Africa/Algiers", "Algiers (Africa/Algiers)"},
		{en, "America/Argentina/Buenos_Aires", "Buenos Aires (America/Argentina/Buenos_Aires)"},
		{fr, "Africa/Algiers", "Alger (Africa/Algiers)"},
		{fr, "Indian/Reunion", "La Réunion (Indian/Reunion)"},
		{fr, "America/Los_Angeles", "Los Angeles (America/Los_Angeles)"},
	} {
		if got := placeName(c.ctx, c.zone); got != c.want {
			t.Errorf("placeName(%s, %q) = %q, want %q", langCode(c.ctx), c.zone, got, c.want)
		}
	}
	// Every French name is for a zone the page offers.
	for zone := range cityNames {
		if namedZone(zone) == nil {
			t.Errorf("cityNames has %s, which is not offered", zone)
		}
	}
}

// A definition's open count links to its one status's list, or to the
// whole list when its open occurrences are in several.
func TestOpenHref(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		by   map[string]int64
		want string
	}{
		{map[string]int64{"available": 2, "completed": 9}, "/console/occurrences?definition=d&status=available"},
		{map[string]int64{"reserved": 1}, "/console/occurrences?definition=d&status=reserved"},
		{map[string]int64{"available": 1, "deferred": 1}, "/console/occurrences?definition=d"},
		{map[string]int64{"completed": 3}, "/console/occurrences?definition=d"},
	} {
		if got := openHref("d", c.by); got != c.want {
			t.Errorf("openHref(%v) = %q, want %q", c.by, got, c.want)
		}
	}
}
