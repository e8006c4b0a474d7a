package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	// The named zones' rules, on a machine without /usr/share/zoneinfo
	// (a distroless image) too.
	_ "time/tzdata"
)

// Display preferences of one browser, each in a cookie of its own: how
// times are shown (UTC, or an offset the operator picks: the console runs
// no script, so it cannot read the browser's time zone) and whether list
// and detail pages reload themselves. They authorize nothing, so they are
// preference cookies (SameSite=Lax) like the language.
const (
	zoneCookie    = "tz"
	refreshCookie = "refresh"
)

// refreshChoices are the auto-refresh periods offered, in seconds; 0 is
// off, the default.
var refreshChoices = []int{0, 5, 10, 30}

// zoneChoices are the UTC offsets offered, in minutes: every offset in use
// somewhere, from UTC−12:00 to UTC+14:00.
var zoneChoices = []int{
	-720, -660, -600, -570, -540, -480, -420, -360, -300, -240, -210, -180, -120, -60,
	0, 60, 120, 180, 210, 240, 270, 300, 330, 345, 360, 390, 420, 480, 525, 540, 570, 600, 630, 660, 720, 765, 780, 840,
}

// namedZones are the places offered, whose local time follows their
// daylight saving rules (an offset would be an hour off half the year):
// where French- and English-speaking operators mostly are, and the main
// zones of every continent.
var namedZones = loadZones(
	"Africa/Abidjan", "Africa/Algiers", "Africa/Casablanca", "Africa/Dakar", "Africa/Johannesburg", "Africa/Kinshasa", "Africa/Lagos", "Africa/Tunis",
	"America/Chicago", "America/Denver", "America/Guadeloupe", "America/Cayenne", "America/Los_Angeles", "America/Martinique", "America/Mexico_City",
	"America/New_York", "America/Sao_Paulo", "America/Toronto", "America/Vancouver",
	"Asia/Dubai", "Asia/Hong_Kong", "Asia/Kolkata", "Asia/Shanghai", "Asia/Singapore", "Asia/Tokyo",
	"Australia/Sydney",
	"Europe/Amsterdam", "Europe/Athens", "Europe/Berlin", "Europe/Brussels", "Europe/Dublin", "Europe/Helsinki", "Europe/Istanbul", "Europe/Lisbon",
	"Europe/London", "Europe/Luxembourg", "Europe/Madrid", "Europe/Moscow", "Europe/Paris", "Europe/Rome", "Europe/Stockholm", "Europe/Warsaw", "Europe/Zurich",
	"Indian/Mayotte", "Indian/Reunion", "Pacific/Auckland", "Pacific/Noumea", "Pacific/Tahiti",
)

// loadZones loads each named zone, in name order; the embedded tzdata has
// them all, so a missing one is a typo in the list.
func loadZones(names ...string) []*time.Location {
	slices.Sort(names)
	out := make([]*time.Location, len(names))
	for i, n := range names {
		loc, err := time.LoadLocation(n)
		if err != nil {
			panic(fmt.Sprintf("console: time zone %s: %v", n, err))
		}
		out[i] = loc
	}
	return out
}

// namedZone is the offered place called name, or nil.
func namedZone(name string) *time.Location {
	for _, loc := range namedZones {
		if loc.String() == name {
			return loc
		}
	}
	return nil
}

// prefs are a request's display preferences and the instant "now" is for
// every relative time of the page.
type prefs struct {
	// offset is the chosen UTC offset in minutes; utc is true when the
	// operator keeps UTC (the default), which is not the same as +00:00
	// chosen as a local offset only in its label.
	offset int
	utc    bool
	// named is the place chosen instead of an offset (nil for none): its
	// offset follows its daylight saving rules.
	named   *time.Location
	refresh int
	now     time.Time
}

type prefsKey struct{}

// zoneCode is the cookie value of an offset: "UTC" or "+02:00".
func zoneCode(utc bool, offset int) string {
	if utc {
		return "UTC"
	}
	sign := '+'
	if offset < 0 {
		sign, offset = '-', -offset
	}
	return fmt.Sprintf("%c%02d:%02d", sign, offset/60, offset%60)
}

// readZone reads a zone cookie or form value: a place offered (named), or
// an offset (parseZone).
func readZone(s string) (named *time.Location, utc bool, offset int) {
	if named = namedZone(s); named != nil {
		return named, false, 0
	}
	utc, offset = parseZone(s)
	return nil, utc, offset
}

// parseZone reads a zone cookie value; anything not offered is UTC.
func parseZone(s string) (utc bool, offset int) {
	if len(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return true, 0
	}
	h, err1 := strconv.Atoi(s[1:3])
	m, err2 := strconv.Atoi(s[4:6])
	if err1 != nil || err2 != nil {
		return true, 0
	}
	offset = h*60 + m
	if s[0] == '-' {
		offset = -offset
	}
	if !slices.Contains(zoneChoices, offset) {
		return true, 0
	}
	return false, offset
}

// zoneLabel names a zone as times show it: "UTC", "UTC+02:00", "UTC−03:30".
func zoneLabel(utc bool, offset int) string {
	if utc {
		return "UTC"
	}
	code := zoneCode(false, offset)
	if code[0] == '-' {
		code = "−" + code[1:] // a minus sign, not a hyphen
	}
	return "UTC" + code
}

func parseRefresh(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || !slices.Contains(refreshChoices, n) {
		return 0
	}
	return n
}

// withPreferences puts the browser's display preferences and the engine's
// current time in the request's context.
func (c *Console) withPreferences(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := prefs{utc: true, now: c.eng.Now()}
		if ck, err := r.Cookie(zoneCookie); err == nil {
			p.named, p.utc, p.offset = readZone(ck.Value)
		}
		if ck, err := r.Cookie(refreshCookie); err == nil {
			p.refresh = parseRefresh(ck.Value)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), prefsKey{}, p)))
	})
}

func prefsOf(ctx context.Context) prefs {
	if p, ok := ctx.Value(prefsKey{}).(prefs); ok {
		return p
	}
	return prefs{utc: true, now: time.Now()}
}

// location is where a request's times are shown.
func (p prefs) location() *time.Location {
	switch {
	case p.named != nil:
		return p.named
	case p.utc:
		return time.UTC
	}
	return time.FixedZone(zoneLabel(false, p.offset), p.offset*60)
}

// zoneAt names the zone of instant t as the page writes it: "UTC", or the
// offset then ("UTC+02:00"; in a named place, its offset on that day).
func (p prefs) zoneAt(t time.Time) string {
	if p.named != nil {
		_, off := t.In(p.named).Zone()
		return zoneLabel(false, off/60)
	}
	return zoneLabel(p.utc, p.offset)
}

// zoneName names the chosen zone for the settings' summary: the place
// ("Paris", "Londres" in French), or the offset.
func (p prefs) zoneName(ctx context.Context) string {
	if p.named != nil {
		return cityName(ctx, p.named.String())
	}
	return zoneLabel(p.utc, p.offset)
}

// preferencesView is the display settings page.
type preferencesView struct {
	Chrome                            chrome
	Intro, ZoneLabel, ZoneHint        string
	RefreshLabel, RefreshHint, Submit string
	Action, CSRF, Next, Cancel        string
	ZoneOptions, RefreshOptions       []option
	Saved                             string
}

// preferencesPage shows the display settings form.
func (c *Console) preferencesPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p := prefsOf(ctx)
	next := consolePath(r.URL.Query().Get("next"))
	if next == "" {
		next = homePath
	}
	v := preferencesView{
		Chrome:       c.chrome(r, T(ctx, "Display settings"), ""),
		Intro:        T(ctx, "These settings are kept in this browser only."),
		ZoneLabel:    T(ctx, "Show times in"),
		ZoneHint:     T(ctx, "The console runs no script, so it cannot read your computer’s time zone: choose a place, whose daylight saving time is followed, or a fixed offset from UTC."),
		RefreshLabel: T(ctx, "Reload lists and detail pages"),
		RefreshHint:  T(ctx, "A reload empties what you typed but did not apply (filters, the search box) and moves the focus back to the top of the page: “Pause reloading”, on every page that reloads, stops it until you resume. Pages where you type a reason (confirmations, and occurrences with a value to reveal) never reload on their own, nor does a revealed value."),
		Submit:       T(ctx, "Save settings"),
		Action:       basePath + "/preferences",
		CSRF:         currentOf(ctx).csrf,
		Next:         next,
		Cancel:       T(ctx, "Back without saving"),
	}
	v.ZoneOptions = append(v.ZoneOptions, option{Value: "UTC", Label: T(ctx, "UTC (coordinated universal time)"), Selected: p.utc})
	for _, loc := range namedZones {
		place := placeName(ctx, loc.String())
		v.ZoneOptions = append(v.ZoneOptions, option{Value: loc.String(), Label: T(ctx, "Local time in %s", place), Selected: p.named == loc})
	}
	for _, off := range zoneChoices {
		label := zoneLabel(false, off)
		v.ZoneOptions = append(v.ZoneOptions, option{Value: zoneCode(false, off), Label: T(ctx, "%s (a fixed offset, no daylight saving time)", label),
			Selected: !p.utc && p.named == nil && p.offset == off})
	}
	for _, s := range refreshChoices {
		label := T(ctx, "Never")
		if s > 0 {
			label = T(ctx, "Every %d seconds", s)
		}
		v.RefreshOptions = append(v.RefreshOptions, option{Value: strconv.Itoa(s), Label: label, Selected: p.refresh == s})
	}
	c.render(w, r, http.StatusOK, preferencesPageView(v))
}

// savePreferences stores the settings in their cookies (the CSRF token was
// checked by requireSession), ends a pause of reloading, and goes back to
// the page they were opened from (Post/Redirect/Get).
func (c *Console) savePreferences(w http.ResponseWriter, r *http.Request) {
	year := int((365 * 24 * time.Hour).Seconds())
	named, utc, offset := readZone(r.PostFormValue("tz"))
	zone := zoneCode(utc, offset)
	if named != nil {
		zone = named.String()
	}
	http.SetCookie(w, preferenceCookie(r, zoneCookie, zone, year))
	http.SetCookie(w, preferenceCookie(r, refreshCookie, strconv.Itoa(parseRefresh(r.PostFormValue("refresh"))), year))
	// Choosing a period again means wanting pages to reload: a pause
	// ends with it.
	if err := c.sessions.setReloadPaused(r.Context(), currentOf(r.Context()).id, false); err != nil {
		c.serverError(w, r, err)
		return
	}
	next := consolePath(r.PostFormValue("next"))
	if next == "" {
		next = homePath
	}
	// Said where the browser lands, and focused as an action's outcome
	// is: the settings' page is gone, and nothing else showed they held.
	c.redirectWithFlash(w, r, next, flash{Text: T(r.Context(), "Display settings saved.")})
}

// reloadPath is where a live page's "Pause reloading" (or "Resume")
// button posts.
const reloadPath = basePath + "/preferences/reload"

// setReloadPaused pauses (pause=1) or resumes (pause=0) the auto-reload of
// the session's live pages, then goes back to the page the button was on
// (the CSRF token was checked by requireSession). Paused, pages render
// without their meta refresh, saying so with a Resume button: the only way
// without a script to keep a reload from emptying a field being typed in.
func (c *Console) setReloadPaused(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	paused := r.PostFormValue("pause") == "1"
	if err := c.sessions.setReloadPaused(ctx, currentOf(ctx).id, paused); err != nil {
		c.serverError(w, r, err)
		return
	}
	// Back to the page, never off the console nor to sign-in, saying
	// what changed: the button's new label, far down the page, was all
	// a keyboard's user learnt of it.
	msg := T(ctx, "Reloading resumed.")
	if paused {
		msg = T(ctx, "Reloading paused: this page stays as it is until you resume.")
	}
	c.redirectWithFlash(w, r, safeNext(r.PostFormValue("next")), flash{Text: msg})
}

// placeName reads a time zone's name as a place in the request's
// language: its city ("Alger" in French, "São Paulo"), then the name
// itself ("São Paulo (America/Sao_Paulo)"), which an operator may know
// from elsewhere.
func placeName(ctx context.Context, zone string) string {
	return cityName(ctx, zone) + " (" + zone + ")"
}

// cityName is the city a time zone is named after, in the request's
// language: the zone's own spelling is English without its accents
// (French pages read "Heure locale : Algiers", console QA).
func cityName(ctx context.Context, zone string) string {
	if names, ok := cityNames[zone]; ok {
		if langCode(ctx) == "fr" && names.fr != "" {
			return names.fr
		}
		if names.en != "" {
			return names.en
		}
	}
	city := zone[strings.LastIndex(zone, "/")+1:]
	return strings.ReplaceAll(city, "_", " ")
}

// cityNames are the offered zones' cities whose names differ from the
// zone's spelling, in English (en) or French (fr).
var cityNames = map[string]struct{ en, fr string }{
	"Africa/Algiers":      {fr: "Alger"},
	"Africa/Johannesburg": {fr: "Johannesbourg"},
	"America/Guadeloupe":  {fr: "Guadeloupe"},
	"America/Martinique":  {fr: "Martinique"},
	"America/Mexico_City": {fr: "Mexico"},
	"America/Sao_Paulo":   {en: "São Paulo", fr: "São Paulo"},
	"Asia/Dubai":          {fr: "Dubaï"},
	"Asia/Kolkata":        {fr: "Calcutta"},
	"Asia/Singapore":      {fr: "Singapour"},
	"Europe/Athens":       {fr: "Athènes"},
	"Europe/Brussels":     {fr: "Bruxelles"},
	"Europe/Lisbon":       {fr: "Lisbonne"},
	"Europe/London":       {fr: "Londres"},
	"Europe/Moscow":       {fr: "Moscou"},
	"Europe/Warsaw":       {fr: "Varsovie"},
	"Indian/Reunion":      {en: "Réunion", fr: "La Réunion"},
	"Pacific/Noumea":      {en: "Nouméa", fr: "Nouméa"},
}
