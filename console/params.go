package console

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"

	"github.com/relais/relais/internal/suggest"
)

// A page reads the query parameters it knows and refuses every other one:
// ignored, a misspelt filter (?proces=alerte) would show, or let an
// operator act on, far more than was asked for, with nothing to say so.
// Each page lists what it reads next to its handler; the links, forms and
// redirects the console makes use those names only.

// pagingParams are a keyset list's page parameters (see page).
var pagingParams = []string{"before", "after", "from"}

// maxShownParam bounds how much of a parameter's name an error repeats.
const maxShownParam = 40

// queryProblems says what is wrong with a query that a page reads known
// of, one translated message each: a parameter it does not read (with the
// known one most likely meant), one given more than once (only the first
// would count), and a query that cannot be read whole (a stray % or a
// semicolon: its pair would be dropped).
func queryProblems(ctx context.Context, rawQuery string, known ...string) []string {
	q, err := url.ParseQuery(rawQuery)
	var errs []string
	if err != nil {
		errs = append(errs, T(ctx, "This address holds a parameter that cannot be read (a percent sign not followed by two hexadecimal digits, or a semicolon): correct the address."))
	}
	return append(errs, paramProblems(ctx, q, known...)...)
}

// apiNames are the API's names of the console's date filters: an address
// written from the API's documentation (created_after) is told the
// console's name (created_from), which no spelling distance finds.
var apiNames = map[string]string{
	"created_after": "created_from", "created_before": "created_to",
	"settled_after": "settled_from", "settled_before": "settled_to",
	"acted_after": "acted_from", "acted_before": "acted_to",
}

// paramProblems is queryProblems for parameters already parsed (a form).
func paramProblems(ctx context.Context, q url.Values, known ...string) []string {
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(known, name):
			shown := clipParam(name)
			best, ok := apiNames[name], true
			if !slices.Contains(known, best) {
				best, ok = suggest.Closest(name, known)
			}
			if ok {
				errs = append(errs, T(ctx, "Unknown parameter “%s” (did you mean “%s”?).", shown, best))
			} else {
				errs = append(errs, T(ctx, "Unknown parameter “%s”.", shown))
			}
		case len(q[name]) > 1:
			n := len(q[name])
			errs = append(errs, T(ctx, "The parameter “%s” is given %d times: give it once.", name, n))
		}
	}
	return errs
}

// formProblems is queryProblems for a form posted to a page: its fields
// are the form's known ones, and its address takes no query at all (a
// form reads only its body: a parameter in the address would be ignored).
func formProblems(ctx context.Context, r *http.Request, known ...string) []string {
	return append(queryProblems(ctx, r.URL.RawQuery), paramProblems(ctx, r.PostForm, known...)...)
}

func clipParam(name string) string {
	if r := []rune(name); len(r) > maxShownParam {
		return string(r[:maxShownParam]) + "…"
	}
	return name
}

// keyCursor is what a list by key (definitions, processes) pages after:
// a key the list showed, of the keys' grammar (lower-case segments of
// letters, digits and underscores, dotted for definitions). Anything else
// is a mangled link, which would otherwise list from the start.
var keyCursor = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// maxKeyCursor is the longest key there is (a definition key).
const maxKeyCursor = 200

// keyCursorProblems checks a list's after= key; a problem is a translated
// message.
func keyCursorProblems(ctx context.Context, after string) []string {
	if after == "" || len(after) <= maxKeyCursor && keyCursor.MatchString(after) {
		return nil
	}
	return []string{invalidCursor(ctx)}
}

// idCursorProblems checks a list's numeric cursor (the tokens' after=, the
// audit log's before=), no lower than least; a problem is a translated
// message. An empty cursor is the first page (0).
func idCursorProblems(ctx context.Context, cursor string, least int64) (int64, []string) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || n < least {
		return 0, []string{invalidCursor(ctx)}
	}
	return n, nil
}

func invalidCursor(ctx context.Context) string {
	return T(ctx, "The page cursor is invalid: go back to the first page.")
}
