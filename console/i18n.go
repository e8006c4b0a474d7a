package console

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	xnumber "golang.org/x/text/number"
	"golang.org/x/text/unicode/norm"

	// The generated catalog registers the en and fr translations as
	// message.DefaultCatalog, which every printer below reads.
	_ "github.com/relais/relais/locales"
)

// langCookie names the cookie the language switcher sets. Its values are the
// base language codes of supported.
const langCookie = "lang"

// langCookieAge is how long the language chosen is remembered: a year.
const langCookieAge = 365 * 24 * 60 * 60

// supported are the console's languages; the first is the fallback.
var supported = []language.Tag{language.English, language.French}

// matcher is built once: building one compiles the supported list, and it
// is safe for concurrent use.
var matcher = language.NewMatcher(supported)

// locale is the language a request is served in.
type locale struct {
	tag     language.Tag
	printer *message.Printer
}

type localeKey struct{}

// newLocale returns the locale of one of the supported tags.
func newLocale(tag language.Tag) *locale {
	return &locale{tag: tag, printer: message.NewPrinter(tag)}
}

// supportedTag returns the supported tag whose base language is code ("en",
// "fr"), if any.
func supportedTag(code string) (language.Tag, bool) {
	for _, t := range supported {
		if b, _ := t.Base(); b.String() == code {
			return t, true
		}
	}
	return language.Tag{}, false
}

// negotiate picks the request's language: the switcher's cookie, else the
// best Accept-Language match, else English.
func negotiate(r *http.Request) language.Tag {
	if c, err := r.Cookie(langCookie); err == nil {
		if t, ok := supportedTag(c.Value); ok {
			return t
		}
	}
	if h := r.Header.Get("Accept-Language"); h != "" {
		if tags, _, err := language.ParseAcceptLanguage(h); err == nil && len(tags) > 0 {
			// The matched tag may carry extensions (fr-u-rg-cazzzz for
			// fr-CA); the index gives the plain supported tag the catalog
			// is keyed by.
			_, i, conf := matcher.Match(tags...)
			if conf != language.No {
				return supported[i]
			}
		}
	}
	return supported[0]
}

// withoutParam is u's request URI without the query parameter name.
func withoutParam(u *url.URL, name string) string {
	q := u.Query()
	q.Del(name)
	out := *u
	out.RawQuery = q.Encode()
	return out.RequestURI()
}

// withLanguage puts the negotiated locale in the request's context. A
// page asked for with ?lang=fr (a link shared in a language: designer QA)
// is the switcher's: the choice is remembered, and the page served again
// without the parameter, which no page's filters take.
func withLanguage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has(langCookie) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			code := strings.ToLower(r.URL.Query().Get(langCookie))
			if _, ok := supportedTag(code); ok {
				http.SetCookie(w, preferenceCookie(r, langCookie, code, langCookieAge))
			}
			http.Redirect(w, r, withoutParam(r.URL, langCookie), http.StatusSeeOther)
			return
		}
		ctx := context.WithValue(r.Context(), localeKey{}, newLocale(negotiate(r)))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

var english = newLocale(language.English)

func localeOf(ctx context.Context) *locale {
	if l, ok := ctx.Value(localeKey{}).(*locale); ok {
		return l
	}
	return english
}

// langCode is the language of ctx as an HTML lang value ("en", "fr").
func langCode(ctx context.Context) string {
	b, _ := localeOf(ctx).tag.Base()
	return b.String()
}

// T translates a message into the request's language. format must be a
// string literal at the call site: `gotext extract` finds messages by
// following the format argument of this function back to its callers, and
// it cannot see strings passed through variables or into templ components.
// Arguments are formatted for the language (digit grouping, plurals).
func T(ctx context.Context, format string, args ...any) string {
	l := localeOf(ctx)
	return l.grouped(l.printer.Sprintf(format, args...))
}

// elidable are the French words T's messages put before a name (someone's,
// a process's, a node's) that elide before a vowel: "Connecté en tant que
// {Name}", "Graphe de {Name}".
var elidable = []string{"que", "de", "le", "la"}

// elided writes, in French, the elision a name starting with a vowel
// calls for in s, a message T made with name in it: "en tant que Éloïse"
// becomes "en tant qu’Éloïse", "à partir de enrich" "à partir d’enrich".
// The name's value is only known at run time, so no translation can
// write it. A mute h is not told from an aspirate one (le héros): h is
// left as it is, as are other languages.
func elided(ctx context.Context, s, name string) string {
	if localeOf(ctx).tag != language.French || !startsWithVowel(name) {
		return s
	}
	for _, w := range elidable {
		for _, word := range []string{w, strings.ToUpper(w[:1]) + w[1:]} {
			s = elideWord(s, word, name)
		}
	}
	return s
}

// elideWord replaces each "word name" of s, word a whole word, with
// "w’name" (word without its final e or a).
func elideWord(s, word, name string) string {
	from := word + " " + name
	var b strings.Builder
	for {
		i := strings.Index(s, from)
		if i < 0 {
			break
		}
		prev, _ := utf8.DecodeLastRuneInString(s[:i])
		if i > 0 && (unicode.IsLetter(prev) || prev == '’' || prev == '\'') {
			// The end of a longer word (chaque, presque): not this one.
			b.WriteString(s[:i+len(word)])
			s = s[i+len(word):]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(word[:len(word)-1] + "’" + name)
		s = s[i+len(from):]
	}
	b.WriteString(s)
	return b.String()
}

// startsWithVowel reports whether s starts with a vowel, accented or not,
// in either case (Éloïse, ulysse, Yvonne, Œdipe).
func startsWithVowel(s string) bool {
	r, _ := utf8.DecodeRuneInString(norm.NFD.String(firstRune(s)))
	return strings.ContainsRune("aeiouyæœ", unicode.ToLower(r))
}

func firstRune(s string) string {
	_, n := utf8.DecodeRuneInString(s)
	return s[:n]
}

// number formats n with the language's digit grouping (1,234 / 1 234).
func number[N int | int64](ctx context.Context, n N) string {
	l := localeOf(ctx)
	return l.grouped(l.printer.Sprint(n))
}

// digitGroup is a no-break space between two digits: x/text's French
// thousands separator.
var digitGroup = regexp.MustCompile("([0-9])\u00a0([0-9])")

// grouped writes French digit groups apart with the narrow no-break space
// (U+202F) that French typography and current CLDR use, where x/text's
// older data gives a full no-break space (1 000 000 rather than
// 1 000 000). Other no-break spaces (5 min, n° 7) stay.
func (l *locale) grouped(s string) string {
	if l.tag != language.French || !strings.Contains(s, "\u00a0") {
		return s
	}
	return digitGroup.ReplaceAllString(s, "$1\u202f$2")
}

// localNumber writes a number taken from a document (a contract's
// minimum, a constraint in a diff) the way the language writes numbers:
// "1,000.5" or "1 000,5". Anything that is not a plain decimal number is
// returned as it is.
func localNumber(ctx context.Context, s string) string {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return number(ctx, n)
	}
	if strings.ContainsAny(s, "eE") {
		return s // an exponent: keep the author's notation
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		decimals := 0
		if _, frac, ok := strings.Cut(s, "."); ok {
			decimals = len(frac)
		}
		l := localeOf(ctx)
		return l.grouped(l.printer.Sprint(xnumber.Decimal(f, xnumber.MinFractionDigits(decimals), xnumber.MaxFractionDigits(decimals))))
	}
	return s
}

// semicolonList joins clauses the way the language writes them: "a; b",
// and in French "a ; b" with a narrow no-break space.
func semicolonList(ctx context.Context, parts []string) string {
	if len(parts) == 0 {
		return ""
	}
	out := parts[0]
	for _, next := range parts[1:] {
		out = T(ctx, "%[1]s; %[2]s", out, next)
	}
	return out
}

// timeView is an instant as shown: text for people, ISO for <time
// datetime>, and how far it is from now ("in 5 min", "3 min ago").
type timeView struct {
	Text string
	ISO  string
	Rel  string
	// Title, when set, is the full date on hover of a shortened Text.
	Title string
}

// Set reports whether the instant exists (zero values render as a dash).
func (t timeView) Set() bool { return t.ISO != "" }

// formatTime shows an instant in the zone the operator chose (UTC unless
// set otherwise), the way the language writes dates, the zone always
// named: "Nov 30, 2026, 14:05:03 UTC" or "30 nov. 2026, 16:05:03
// UTC+02:00"; Rel says how far it is from now.
func formatTime(ctx context.Context, t time.Time) timeView {
	p := prefsOf(ctx)
	local := t.In(p.location())
	month := monthAbbr(ctx, local.Month())
	day := strconv.Itoa(local.Day())
	year := strconv.Itoa(local.Year()) // not through the printer: no digit grouping in years
	clock := local.Format("15:04:05")
	zone := p.zoneAt(t)
	return timeView{
		Text: T(ctx, "%[1]s %[2]s, %[3]s, %[4]s %[5]s", month, day, year, clock, zone),
		ISO:  t.UTC().Format(time.RFC3339),
		Rel:  relative(ctx, t),
	}
}

// formatTimePtr is formatTime for optional instants.
func formatTimePtr(ctx context.Context, t *time.Time) timeView {
	if t == nil {
		return timeView{}
	}
	return formatTime(ctx, *t)
}

// listTime is formatTime shortened for a list's column ("14:05 UTC"
// today, "Nov 30, 14:05 UTC" another day), the full date on hover.
func listTime(ctx context.Context, t time.Time) timeView {
	v := formatTime(ctx, t)
	v.Title, v.Text = v.Text, clockTime(ctx, t)
	return v
}

// listTimePtr is listTime for optional instants.
func listTimePtr(ctx context.Context, t *time.Time) timeView {
	if t == nil {
		return timeView{}
	}
	return listTime(ctx, *t)
}

// nextAttempt says when a waiting retry is due, how soon and at what time
// ("next attempt in 29 min, at 15:20 UTC"): an on-call operator planning
// around it reads the time, not only the countdown (QA: the time was in a
// tooltip only).
func nextAttempt(ctx context.Context, due time.Time) string {
	rel, at := relative(ctx, due), clockTime(ctx, due)
	return T(ctx, "next attempt %s, at %s", rel, at)
}

// clockTime is a short form of an instant for sentences: "15:20 UTC" on
// the current day, "Dec 2, 15:20 UTC" on another.
func clockTime(ctx context.Context, t time.Time) string {
	p := prefsOf(ctx)
	loc := p.location()
	local, today := t.In(loc), p.now.In(loc)
	clock := local.Format("15:04")
	zone := p.zoneAt(t)
	if local.Year() == today.Year() && local.YearDay() == today.YearDay() {
		return T(ctx, "%[1]s %[2]s", clock, zone)
	}
	month := monthAbbr(ctx, local.Month())
	day := strconv.Itoa(local.Day())
	return T(ctx, "%[1]s %[2]s, %[3]s %[4]s", month, day, clock, zone)
}

// relative says how far t is from the request's now: "in 1 h 59 min",
// "3 min ago", "just now".
func relative(ctx context.Context, t time.Time) string {
	d := t.Sub(prefsOf(ctx).now)
	switch {
	case d >= time.Second:
		span := approxDuration(ctx, d)
		return T(ctx, "in %s", span)
	case d <= -time.Second:
		span := approxDuration(ctx, -d)
		return T(ctx, "%s ago", span)
	}
	return T(ctx, "just now")
}

// approxDuration rounds a span for reading at a glance, to the nearest of
// its last unit: seconds under a minute, minutes under an hour, hours and
// minutes under a day, then days and hours ("45 s", "12 min", "1 h 59
// min", "3 d 4 h"). Rounded, not cut: a retry due in 2 min 59 s reads
// "in 3 min", not earlier than it is.
func approxDuration(ctx context.Context, d time.Duration) string {
	return unbroken(approxDurationText(ctx, d))
}

// unbroken joins a duration's numbers and units with no-break spaces: a
// column never shows "5 s 3" above "ms".
func unbroken(s string) string { return strings.ReplaceAll(s, " ", "\u00a0") }

func approxDurationText(ctx context.Context, d time.Duration) string {
	// The variables are named as in formatDuration: gotext names a
	// message's placeholders after them, so both share one message.
	if r := d.Round(time.Second); r < time.Minute {
		seconds := int64(r / time.Second)
		return T(ctx, "%d s", seconds)
	}
	if r := d.Round(time.Minute); r < time.Hour {
		minutes := int64(r / time.Minute)
		return T(ctx, "%d min", minutes)
	} else if r < 24*time.Hour {
		hours, minutes := int64(r/time.Hour), int64(r%time.Hour/time.Minute)
		if minutes == 0 {
			return T(ctx, "%d h", hours)
		}
		return T(ctx, "%d h", hours) + " " + T(ctx, "%d min", minutes)
	}
	r := d.Round(time.Hour)
	days, hours := int64(r/(24*time.Hour)), int64(r%(24*time.Hour)/time.Hour)
	if hours == 0 {
		return T(ctx, "%d d", days)
	}
	return T(ctx, "%d d", days) + " " + T(ctx, "%d h", hours)
}

func monthAbbr(ctx context.Context, m time.Month) string {
	switch m {
	case time.January:
		return T(ctx, "Jan")
	case time.February:
		return T(ctx, "Feb")
	case time.March:
		return T(ctx, "Mar")
	case time.April:
		return T(ctx, "Apr")
	case time.May:
		return T(ctx, "May")
	case time.June:
		return T(ctx, "Jun")
	case time.July:
		return T(ctx, "Jul")
	case time.August:
		return T(ctx, "Aug")
	case time.September:
		return T(ctx, "Sep")
	case time.October:
		return T(ctx, "Oct")
	case time.November:
		return T(ctx, "Nov")
	default:
		return T(ctx, "Dec")
	}
}

// durationParts splits d into days, hours, minutes, seconds and
// milliseconds (the units ISO-8601 durations are written in here).
func durationParts(d time.Duration) (days, hours, minutes, seconds, millis int64) {
	ms := d.Milliseconds()
	millis = ms % 1000
	s := ms / 1000
	seconds = s % 60
	m := s / 60
	minutes = m % 60
	h := m / 60
	hours = h % 24
	days = h / 24
	return
}

// formatDuration humanizes a duration for the language. A single unit is
// spelled out with its plural ("2 hours", "2 heures", "1 day"); several
// units use the short forms ("1 min 30 s", "1 j 2 h").
func formatDuration(ctx context.Context, d time.Duration) string {
	return unbroken(formatDurationText(ctx, d))
}

func formatDurationText(ctx context.Context, d time.Duration) string {
	if d <= 0 {
		return T(ctx, "0 seconds")
	}
	days, hours, minutes, seconds, millis := durationParts(d)
	var set int
	for _, v := range []int64{days, hours, minutes, seconds, millis} {
		if v != 0 {
			set++
		}
	}
	if set == 1 {
		switch {
		case days > 0:
			return T(ctx, "%d days", days)
		case hours > 0:
			return T(ctx, "%d hours", hours)
		case minutes > 0:
			return T(ctx, "%d minutes", minutes)
		case seconds > 0:
			return T(ctx, "%d seconds", seconds)
		default:
			return T(ctx, "%d ms", millis)
		}
	}
	return shortDurationText(ctx, d)
}

// formatShortDuration is formatDuration in the short forms only ("3 s",
// "3 s 376 ms"): a column of them reads alike (operator QA: "3 secondes"
// above "3 s 376 ms").
func formatShortDuration(ctx context.Context, d time.Duration) string {
	if d <= 0 {
		var seconds int64 // named as shortDurationText's, one message
		return unbroken(T(ctx, "%d s", seconds))
	}
	return unbroken(shortDurationText(ctx, d))
}

func shortDurationText(ctx context.Context, d time.Duration) string {
	days, hours, minutes, seconds, millis := durationParts(d)
	var parts []string
	if days > 0 {
		parts = append(parts, T(ctx, "%d d", days))
	}
	if hours > 0 {
		parts = append(parts, T(ctx, "%d h", hours))
	}
	if minutes > 0 {
		parts = append(parts, T(ctx, "%d min", minutes))
	}
	if seconds > 0 {
		parts = append(parts, T(ctx, "%d s", seconds))
	}
	if millis > 0 {
		parts = append(parts, T(ctx, "%d ms", millis))
	}
	if len(parts) == 0 {
		// Under a millisecond.
		return T(ctx, "%d ms", millis)
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += " " + p
	}
	return out
}
