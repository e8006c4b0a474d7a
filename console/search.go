package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
)

// maxSearch bounds what the search box reads: a business key or an id.
const maxSearch = 500

// searchView answers a search that goes nowhere: nothing typed, or nothing
// found.
type searchView struct {
	Chrome  chrome
	Message string
	Hint    string
}

// search is the header's search box (a GET form): an instance or
// occurrence id goes to its page, a business key to the instances list
// filtered by it; what matches nothing says so (404), in the page's words.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	v := searchView{Chrome: c.chrome(r, T(ctx, "Search"), ""),
		Hint: T(ctx, "Type an instance or occurrence id (a whole UUID, as the title of its page shows it), or a business key.")}
	switch errs := queryProblems(ctx, r.URL.RawQuery, "q"); {
	case len(errs) > 0:
		// A search box other than the header's: say so rather than search
		// for what was not typed.
		v.Message = strings.Join(errs, " ")
		c.render(w, r, http.StatusBadRequest, searchPage(v))
		return
	case q == "":
		v.Message = T(ctx, "Nothing to find: the search box is empty.")
		c.render(w, r, http.StatusOK, searchPage(v))
		return
	case len(q) > maxSearch:
		v.Message = T(ctx, "That is too long to be an id or a business key.")
		c.render(w, r, http.StatusBadRequest, searchPage(v))
		return
	}
	if id, err := uuid.Parse(q); err == nil {
		if _, err := c.eng.GetInstance(ctx, id); err == nil {
			http.Redirect(w, r, instanceHref(id), http.StatusSeeOther)
			return
		} else if !isNotFound(err) {
			c.serverError(w, r, err)
			return
		}
		if _, err := c.eng.GetOccurrence(ctx, id); err == nil {
			http.Redirect(w, r, occurrenceHref(id), http.StatusSeeOther)
			return
		} else if !isNotFound(err) {
			c.serverError(w, r, err)
			return
		}
	}
	// Ids are business keys too: a business key may look like a UUID.
	insts, err := c.eng.ListInstances(ctx, engine.InstanceFilter{BusinessKey: q, Limit: 1})
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if len(insts) > 0 {
		http.Redirect(w, r, instancesPath+"?business_key="+url.QueryEscape(q), http.StatusSeeOther)
		return
	}
	v.Chrome = c.chrome(r, T(ctx, "Not found"), "")
	v.Chrome.Search.Value = q
	// Not an id: what was typed is read as a business key, which matches
	// only whole and exact (console QA: the start of a long key, as a list
	// shows it, was told it is no id).
	v.Message = T(ctx, "No instance has “%s” as its business key. A business key is found only whole and exactly as given, capitals and accents included: a list shows a long one shortened, so copy it from its instance’s page. An ended instance is deleted once the retention period (RELAIS_RETENTION) has passed, or at once when an administrator erases it.", q)
	if _, err := uuid.Parse(q); err == nil {
		// A whole id that was once shown, most likely: say where it may
		// have gone, as the page at its address does.
		v.Message = T(ctx, "No instance or occurrence has the id “%s”, and no instance has it as its business key. An ended instance is deleted, with its occurrences and attempts, once the retention period (RELAIS_RETENTION) has passed, or at once when an administrator erases it; the audit log keeps the operator actions taken on it.", q)
	}
	if partialID(q) {
		// What the lists show (…7d08993c) is the end of an id: finding
		// an id by its end would read every id there is.
		v.Message = T(ctx, "No instance has “%s” as its business key, and it is not a whole id: the lists show the end of each id. Open the row, or copy its link, for the whole id.", q)
	}
	c.render(w, r, http.StatusNotFound, searchPage(v))
}

// partialID reports whether q looks like a piece of an id, as the lists
// show them: hexadecimal digits (and dashes), fewer than an id has.
func partialID(q string) bool {
	q = strings.TrimPrefix(q, "…")
	digits := 0
	for _, r := range q {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f', r >= 'A' && r <= 'F':
			digits++
		case r == '-':
		default:
			return false
		}
	}
	return digits >= 4 && digits < 32
}

func isNotFound(err error) bool {
	fe, ok := fault.As(err)
	return ok && fe.Kind == fault.NotFound
}
