package console

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/language"
)

func inLanguage(tag language.Tag) context.Context {
	return context.WithValue(context.Background(), localeKey{}, newLocale(tag))
}

var (
	en = inLanguage(language.English)
	fr = inLanguage(language.French)
)

func TestFormatTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, time.November, 30, 14, 5, 3, 0, time.FixedZone("CET", 3600)).Add(time.Hour)
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{
		{en, "Nov 30, 2026, 14:05:03 UTC"},
		{fr, "30 nov. 2026, 14:05:03 UTC"},
	} {
		got := formatTime(tc.ctx, at)
		if got.Text != tc.want || got.ISO != "2026-11-30T14:05:03Z" {
			t.Errorf("formatTime(%s) = %+v, want %q", langCode(tc.ctx), got, tc.want)
		}
	}
	if got := formatTime(fr, time.Date(2027, time.February, 1, 0, 0, 0, 0, time.UTC)).Text; got != "1 févr. 2027, 00:00:00 UTC" {
		t.Errorf("February in French = %q", got)
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d      time.Duration
		en, fr string
	}{
		{90 * time.Second, "1 min 30 s", "1 min 30 s"},
		{2 * time.Hour, "2 hours", "2 heures"},
		{time.Hour, "1 hour", "1 heure"},
		{24 * time.Hour, "1 day", "1 jour"},
		{26 * time.Hour, "1 d 2 h", "1 j 2 h"},
		{10 * time.Second, "10 seconds", "10 secondes"},
		{time.Second, "1 second", "1 seconde"},
		{1500 * time.Millisecond, "1 s 500 ms", "1 s 500 ms"},
		{0, "0 seconds", "0 seconde"},
	} {
		if got := spaced(formatDuration(en, tc.d)); got != tc.en {
			t.Errorf("en %v = %q, want %q", tc.d, got, tc.en)
		}
		if got := spaced(formatDuration(fr, tc.d)); got != tc.fr {
			t.Errorf("fr %v = %q, want %q", tc.d, got, tc.fr)
		}
	}
}

func TestPlurals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n      int
		en, fr string
	}{
		{0, "0 attempts", "0 tentative"},
		{1, "1 attempt", "1 tentative"},
		{2, "2 attempts", "2 tentatives"},
		{1200, "1,200 attempts", "1\u202f200 tentatives"},
	} {
		if got := T(en, "%d attempts", tc.n); got != tc.en {
			t.Errorf("en %d = %q, want %q", tc.n, got, tc.en)
		}
		if got := T(fr, "%d attempts", tc.n); got != tc.fr {
			t.Errorf("fr %d = %q, want %q", tc.n, got, tc.fr)
		}
	}
	if got := number(fr, int64(1234567)); got != "1\u202f234\u202f567" {
		t.Errorf("number fr = %q", got)
	}
}

func TestNegotiate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cookie, accept, want string
	}{
		{"", "", "en"},
		{"", "fr-CA,fr;q=0.9,en;q=0.5", "fr"},
		{"", "de-DE,de;q=0.9", "en"},
		{"", "de, fr;q=0.5", "fr"},
		{"en", "fr", "en"},
		{"fr", "en", "fr"},
		{"xx", "fr", "fr"},
		{"", "not a header;;;", "en"},
	} {
		r := httptest.NewRequest("GET", "/console/", nil)
		if tc.accept != "" {
			r.Header.Set("Accept-Language", tc.accept)
		}
		if tc.cookie != "" {
			r.Header.Set("Cookie", langCookie+"="+tc.cookie)
		}
		got := negotiate(r)
		if b, _ := got.Base(); b.String() != tc.want {
			t.Errorf("cookie %q, Accept-Language %q: got %v, want %s", tc.cookie, tc.accept, got, tc.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                   homePath,
		"/console/occurrences?status=failed": "/console/occurrences?status=failed",
		"/console/definitions/x#revision-2":  "/console/definitions/x",
		"/console":                           "/console",
		"https://evil.example/console":       homePath,
		"//evil.example/console":             homePath,
		"/\\evil.example":                    homePath,
		"/consoles":                          homePath,
		"/api/v1/whoami":                     homePath,
		"/console/../api":                    homePath,
		"/console/sign-in?next=x":            homePath,
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
	// The language switcher may return to sign-in.
	if got := consolePath("/console/sign-in?next=%2Fconsole%2Fdefinitions"); got != "/console/sign-in?next=%2Fconsole%2Fdefinitions" {
		t.Errorf("consolePath(sign-in) = %q", got)
	}
	if got := consolePath("javascript:alert(1)"); got != "" {
		t.Errorf("consolePath(javascript:) = %q", got)
	}
}

// at is ctx seen from now, with times shown in zone ("UTC", "+02:00" or
// "Europe/Paris").
func at(ctx context.Context, now time.Time, zone string) context.Context {
	named, utc, off := readZone(zone)
	return context.WithValue(ctx, prefsKey{}, prefs{named: named, utc: utc, offset: off, now: now})
}

func TestTimesInTheChosenZoneWithRelativeSpans(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, time.December, 1, 13, 21, 0, 0, time.UTC)
	retry := time.Date(2026, time.December, 1, 15, 20, 0, 0, time.UTC)
	for _, tc := range []struct {
		ctx              context.Context
		text, rel, clock string
	}{
		{at(en, now, "UTC"), "Dec 1, 2026, 15:20:00 UTC", "in 1 h 59 min", "15:20 UTC"},
		{at(fr, now, "UTC"), "1 déc. 2026, 15:20:00 UTC", "dans 1 h 59 min", "15:20 UTC"},
		{at(en, now, "+02:00"), "Dec 1, 2026, 17:20:00 UTC+02:00", "in 1 h 59 min", "17:20 UTC+02:00"},
		{at(fr, now, "-03:30"), "1 déc. 2026, 11:50:00 UTC−03:30", "dans 1 h 59 min", "11:50 UTC−03:30"},
		// A zone nobody uses falls back to UTC.
		{at(en, now, "+01:17"), "Dec 1, 2026, 15:20:00 UTC", "in 1 h 59 min", "15:20 UTC"},
		// A place follows its daylight saving time: Paris is UTC+01:00 in
		// December, its offset named with each time.
		{at(fr, now, "Europe/Paris"), "1 déc. 2026, 16:20:00 UTC+01:00", "dans 1 h 59 min", "16:20 UTC+01:00"},
		{at(en, now, "America/New_York"), "Dec 1, 2026, 10:20:00 UTC−05:00", "in 1 h 59 min", "10:20 UTC−05:00"},
	} {
		got := formatTime(tc.ctx, retry)
		if got.Text != tc.text || spaced(got.Rel) != tc.rel || got.ISO != "2026-12-01T15:20:00Z" {
			t.Errorf("formatTime = %+v, want %q, %q", got, tc.text, tc.rel)
		}
		if c := clockTime(tc.ctx, retry); c != tc.clock {
			t.Errorf("clockTime = %q, want %q", c, tc.clock)
		}
	}
	for _, tc := range []struct {
		d      time.Duration
		en, fr string
	}{
		{-3 * time.Minute, "3 min ago", "il y a 3 min"},
		{-40 * time.Second, "40 s ago", "il y a 40 s"},
		{0, "just now", "à l’instant"},
		{26*time.Hour + 5*time.Minute, "in 1 d 2 h", "dans 1 j 2 h"},
		{2 * time.Hour, "in 2 h", "dans 2 h"},
	} {
		if got := spaced(relative(at(en, now, "UTC"), now.Add(tc.d))); got != tc.en {
			t.Errorf("en relative %v = %q, want %q", tc.d, got, tc.en)
		}
		if got := spaced(relative(at(fr, now, "UTC"), now.Add(tc.d))); got != tc.fr {
			t.Errorf("fr relative %v = %q, want %q", tc.d, got, tc.fr)
		}
	}
	// In July, Paris is UTC+02:00.
	july := time.Date(2026, time.July, 1, 15, 20, 0, 0, time.UTC)
	if got := formatTime(at(fr, july, "Europe/Paris"), july).Text; got != "1 juil. 2026, 17:20:00 UTC+02:00" {
		t.Errorf("Paris in July: %q", got)
	}
	// Another day says which.
	if got := clockTime(at(fr, now, "UTC"), now.Add(24*time.Hour)); got != "2 déc., 13:21 UTC" {
		t.Errorf("clockTime tomorrow = %q", got)
	}
}

func TestLocalNumbersAndLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, en, fr string }{
		{"1000", "1,000", "1\u202f000"},
		{"-2.50", "-2.50", "-2,50"},
		{"1234.5", "1,234.5", "1\u202f234,5"},
		{"1e3", "1e3", "1e3"},
		{"^[a-z]+$", "^[a-z]+$", "^[a-z]+$"},
	} {
		if got := localNumber(en, tc.in); got != tc.en {
			t.Errorf("en %s = %q, want %q", tc.in, got, tc.en)
		}
		if got := localNumber(fr, tc.in); got != tc.fr {
			t.Errorf("fr %s = %q, want %q", tc.in, got, tc.fr)
		}
	}
	if got := semicolonList(fr, []string{"a", "b", "c"}); got != "a\u202f; b\u202f; c" {
		t.Errorf("fr list = %q", got)
	}
	if got := semicolonList(en, []string{"a", "b"}); got != "a; b" {
		t.Errorf("en list = %q", got)
	}
}

// TestFrenchElisionBeforeNames: the French messages that put a name after
// que, de, le or la elide it before a vowel, accented or not, in either
// case; not before a consonant or an h, not inside a longer word, and not
// in English.
func TestFrenchElisionBeforeNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ctx        context.Context
		s, name    string
		want       string
		whatIsDone string
	}{
		{fr, "Connecté en tant que Éloïse (opérateur)", "Éloïse", "Connecté en tant qu’Éloïse (opérateur)", "an accented capital"},
		{fr, "Connecté en tant que operator (opérateur)", "operator", "Connecté en tant qu’operator (opérateur)", "a lower-case vowel"},
		{fr, "Connecté en tant que Yann (opérateur)", "Yann", "Connecté en tant qu’Yann (opérateur)", "a y"},
		{fr, "Connecté en tant que Œdipe (opérateur)", "Œdipe", "Connecté en tant qu’Œdipe (opérateur)", "an œ"},
		{fr, "Connecté en tant que âme (opérateur)", "âme", "Connecté en tant qu’âme (opérateur)", "a circumflex"},
		{fr, "Connecté en tant que Bruno (opérateur)", "Bruno", "Connecté en tant que Bruno (opérateur)", "a consonant"},
		{fr, "Connecté en tant que Hélène (opérateur)", "Hélène", "Connecté en tant que Hélène (opérateur)", "an h"},
		{fr, "Graphe de onboarding, version 2", "onboarding", "Graphe d’onboarding, version 2", "de"},
		{fr, "3 nœuds, à partir de enrich. Le tableau", "enrich", "3 nœuds, à partir d’enrich. Le tableau", "de, a node"},
		{fr, "chaque ami, de ami", "ami", "chaque ami, d’ami", "the end of a longer word"},
		{fr, "Le ami", "ami", "L’ami", "a capital word"},
		{en, "Signed in as Éloïse (operator)", "Éloïse", "Signed in as Éloïse (operator)", "English"},
		{fr, "Connecté en tant que  (opérateur)", "", "Connecté en tant que  (opérateur)", "no name"},
	} {
		if got := elided(c.ctx, c.s, c.name); got != c.want {
			t.Errorf("%s: elided(%q, %q) = %q, want %q", c.whatIsDone, c.s, c.name, got, c.want)
		}
	}
}

// spaced reads a duration's no-break spaces as spaces (TestDurationsDoNotWrap
// checks they are there).
func spaced(s string) string { return strings.ReplaceAll(s, "\u00a0", " ") }
