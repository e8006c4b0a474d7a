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
		Hint: T(ctx, "Type an instance or occurrence id (a UUID, as the pages show on hover), or a business key.")}
	switch {
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
	v.Message = T(ctx, "No instance or occurrence has the id “%s”, and no instance has it as its business key.", q)
	c.render(w, r, http.StatusNotFound, searchPage(v))
}

func isNotFound(err error) bool {
	fe, ok := fault.As(err)
	return ok && fe.Kind == fault.NotFound
}
