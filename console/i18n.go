package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	// The generated catalog registers the en and fr translations as
	// message.DefaultCatalog, which every printer below reads.
	_ "github.com/relais/relais/locales"
)

// langCookie names the cookie the language switcher sets. Its values are the
// base language codes of supported.
const langCookie = "lang"

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

// withLanguage puts the negotiated locale in the request's context.
func withLanguage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	return localeOf(ctx).printer.Sprintf(format, args...)
}

// number formats n with the language's digit grouping (1,234 / 1 234).
func number[N int | int64](ctx context.Context, n N) string {
	return localeOf(ctx).printer.Sprint(n)
}

// timeView is an instant as shown: text for people, ISO for <time datetime>.
type timeView struct {
	Text string
	ISO  string
}

// Set reports whether the instant exists (zero values render as a dash).
func (t timeView) Set() bool { return t.ISO != "" }

// formatTime shows an instant in UTC, the way the language writes dates:
// "Nov 30, 2026, 14:05:03 UTC" or "30 nov. 2026, 14:05:03 UTC". The
// console knows nothing of the operator's time zone, so it says UTC rather
// than guess.
func formatTime(ctx context.Context, t time.Time) timeView {
	t = t.UTC()
	month := monthAbbr(ctx, t.Month())
	day := strconv.Itoa(t.Day())
	year := strconv.Itoa(t.Year()) // not through the printer: no digit grouping in years
	clock := t.Format("15:04:05")
	return timeView{
		Text: T(ctx, "%[1]s %[2]s, %[3]s, %[4]s UTC", month, day, year, clock),
		ISO:  t.Format(time.RFC3339),
	}
}

// formatTimePtr is formatTime for optional instants.
func formatTimePtr(ctx context.Context, t *time.Time) timeView {
	if t == nil {
		return timeView{}
	}
	return formatTime(ctx, *t)
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
	out := parts[0]
	for _, p := range parts[1:] {
		out += " " + p
	}
	return out
}
