package httpjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
)

// Page is a list answer (DESIGN §9): {"items": [...], "next_cursor": "..."},
// the cursor absent on the last page.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Page sizes: ?limit= defaults to DefaultLimit and may be at most MaxLimit.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// PageParams reads ?cursor=&limit= for keyset pagination and decodes the
// cursor into a C: the zero C without one (the first page). A limit out of
// range is 400 invalid_request, a cursor this API did not return 400
// invalid_cursor. filters names the route's other query parameters: any
// parameter else is 400 invalid_request at its name, because a misspelt
// filter ignored would list everything, which reads as the filter's result.
func PageParams[C any](r *http.Request, filters ...string) (C, int, error) {
	var c C
	if err := onlyParams(r, filters); err != nil {
		return c, 0, err
	}
	limit := DefaultLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return c, 0, fault.New(fault.BadRequest, "invalid_request", "limit must be an integer from 1 to %d", MaxLimit).
				WithErrors([]fault.FieldError{{Path: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", MaxLimit)}})
		}
		limit = n
	}
	if s := r.URL.Query().Get("cursor"); s != "" {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
			// Every cursor this API returns holds a key; null would
			// silently read as the first page.
			err = errNullCursor
		}
		if err == nil && bytes.Contains(b, nulEscape) {
			// No cursor this API returns holds the NUL character, which
			// would only reach PostgreSQL to be refused there.
			err = errNULCursor
		}
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if err != nil {
			return c, 0, fault.New(fault.BadRequest, "invalid_cursor", "the cursor is not one this API returned")
		}
	}
	return c, limit, nil
}

var (
	errNULCursor  = errors.New("the cursor holds the NUL character")
	errNullCursor = errors.New("the cursor is null")
)

// NewPage builds a list answer from up to limit+1 rows (the extra row only
// says there is a next page): item converts a row, cursor gives the keyset
// position of the last row returned, which PageParams decodes back.
func NewPage[T, R any](rows []T, limit int, cursor func(T) any, item func(T) R) Page[R] {
	p := Page[R]{Items: make([]R, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			p.NextCursor = encodeCursor(cursor(rows[i-1]))
			break
		}
		p.Items = append(p.Items, item(row))
	}
	return p
}

func encodeCursor(c any) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// onlyParams refuses the query parameters of r that are neither cursor,
// limit nor one of filters, and any parameter given twice (only one value
// would be read).
func onlyParams(r *http.Request, filters []string) error {
	takes := "cursor and limit"
	if len(filters) > 0 {
		takes = strings.Join(filters, ", ") + ", cursor and limit"
	}
	return knownParams(r.URL.Query(), slices.Concat(filters, []string{"cursor", "limit"}), takes)
}

// knownParams refuses (400 invalid_request, each at its name) the query
// parameters of q that are not among names, and any given twice; takes
// says in words what the route takes.
func knownParams(q url.Values, names []string, takes string) error {
	var errs []fault.FieldError
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(names, k):
			errs = append(errs, fault.FieldError{Path: k, Message: "is not a parameter of this route"})
		case len(q[k]) > 1:
			errs = append(errs, fault.FieldError{Path: k, Message: "is given more than once"})
		case q[k][0] == "" && k != "cursor":
			// An empty filter (?status=, an unset variable) would list
			// everything; an empty cursor is the first page.
			errs = append(errs, fault.FieldError{Path: k, Message: "is empty: give a value, or leave the parameter out"})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fault.New(fault.BadRequest, "invalid_request", "query parameter %s %s: this route takes %s, each once", PrintableName(errs[0].Path), errs[0].Message, takes).
		WithErrors(errs)
}

// NoParams refuses (400 invalid_request, each at its name) any query
// parameter of a route that reads none: ignored, it would do silently less
// than its client asked.
func NoParams(r *http.Request) error {
	q := r.URL.Query()
	if len(q) == 0 {
		return nil
	}
	var errs []fault.FieldError
	for _, k := range slices.Sorted(maps.Keys(q)) {
		errs = append(errs, fault.FieldError{Path: k, Message: "is not a parameter of this route"})
	}
	return fault.New(fault.BadRequest, "invalid_request", "query parameter %s is not a parameter of this route, which takes none", PrintableName(errs[0].Path)).
		WithErrors(errs)
}

// NoIdempotencyKey refuses an Idempotency-Key on a write that does not
// honour it: its client would believe a retry safe that is not.
func NoIdempotencyKey(r *http.Request) error {
	if r.Header.Get("Idempotency-Key") == "" || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	return fault.New(fault.BadRequest, "invalid_request", "this route does not honour Idempotency-Key (only POST /api/v1/processes/{key}/instances does): it would be ignored").
		WithErrors([]fault.FieldError{{Path: "Idempotency-Key", Message: "not taken by this route"}})
}

// DryRun reads a write route's only query parameter, ?dry_run=: true,
// false or absent. Anything else is 400 invalid_request, so that a dry run
// asked for wrongly (dry_run=1, dry_run= from an unset variable, dryrun=true,
// dry_run given twice) never applies the change it was meant to check.
func DryRun(r *http.Request) (bool, error) {
	q := r.URL.Query()
	if err := knownParams(q, []string{"dry_run"}, "dry_run"); err != nil {
		return false, err
	}
	switch v, given := q["dry_run"]; {
	case !given || v[0] == "false":
		return false, nil
	case v[0] == "true":
		return true, nil
	}
	return false, fault.New(fault.BadRequest, "invalid_request", "query parameter dry_run must be true or false").
		WithErrors([]fault.FieldError{{Path: "dry_run", Message: "must be true or false"}})
}

// Wait reads a read route's only query parameter, ?wait=: an ISO-8601
// duration up to ceiling (0 when absent: no wait). Anything else is 400:
// invalid_request for what is no duration (or a negative one),
// bound_exceeded above the ceiling, naming it, as a fetch's wait is.
func Wait(r *http.Request, ceiling time.Duration) (time.Duration, error) {
	q := r.URL.Query()
	if err := knownParams(q, []string{"wait"}, "wait"); err != nil {
		return 0, err
	}
	v, given := q["wait"]
	if !given {
		return 0, nil
	}
	d, err := isoduration.Parse(v[0])
	if err != nil || d < 0 {
		msg := "must be an ISO-8601 duration such as PT20S"
		if err != nil {
			msg += ": " + err.Error()
		}
		return 0, fault.New(fault.BadRequest, "invalid_request", "query parameter wait %s", msg).
			WithErrors([]fault.FieldError{{Path: "wait", Message: msg}})
	}
	if d > ceiling {
		return 0, fault.BoundExceeded("wait", "wait", isoduration.Format(ceiling))
	}
	return d, nil
}
