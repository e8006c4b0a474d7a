package console

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
)

func revealHref(id uuid.UUID) string { return occurrenceHref(id) + "/reveal" }

// occurrenceReveal shows an admin one sensitive value of an occurrence in
// place of its masked marker (the CSRF token was checked by
// requireSession). The engine records the reveal in the audit log before
// it returns the value.
//
// The page is rendered in answer to the POST rather than after a redirect:
// a redirected GET could only show the value if it were stored somewhere
// (session, URL, cookie), and it must not be. render marks the response
// no-store, so the value stays out of the browser's caches and history;
// reloading posts again, which is a new reveal, recorded again.
func (c *Console) occurrenceReveal(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	p, ok := auth.FromContext(ctx)
	if !ok || p.Role != auth.RoleAdmin {
		c.revealRefused(w, r, id, http.StatusForbidden, T(ctx, "Not allowed"), T(ctx, "Only administrators may reveal a sensitive value."))
		return
	}
	v, err := c.occurrenceView(r, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	side, field := r.PostFormValue("side"), r.PostFormValue("field")
	var table *valueTable
	switch side {
	case engine.SideInputs:
		table = &v.Inputs
	case engine.SideOutputs:
		table = &v.Outputs
	}
	// The console reveals only what it offers to: a row of this page
	// masked as sensitive, so that the value always has a place to show.
	var row *valueRow
	if table != nil {
		for i := range table.Rows {
			if table.Rows[i].Pointer == field && table.Rows[i].Masked {
				row = &table.Rows[i]
				break
			}
		}
	}
	switch {
	case row == nil:
		c.cannotReveal(w, r, id)
		return
	case !row.Sensitive:
		c.secretNotRevealable(w, r, id)
		return
	}
	// A reason missing (blank passes the browser's required) or too long
	// (said as an action's reason is: the same bound) shows the page again
	// with the error at the field, the reason typed kept, as the action
	// forms do.
	reason := r.PostFormValue("reason")
	msg, refused := reasonRefused(ctx, reason)
	if strings.TrimSpace(reason) == "" {
		msg, refused = T(ctx, "Say why you reveal this value: the reason is recorded with the reveal in the audit log."), true
	}
	if refused {
		row.RevealError, row.RevealReason = msg, reason
		v.Chrome.still()
		c.render(w, r, http.StatusUnprocessableEntity, occurrencePage(v))
		return
	}
	got, err := c.eng.RevealValue(ctx, p, id, side, field, reason)
	if err != nil {
		fe, _ := fault.As(err)
		switch {
		case fe != nil && fe.Code == "not_revealable":
			c.secretNotRevealable(w, r, id)
		case fe != nil && (fe.Kind == fault.Unprocessable || fe.Kind == fault.BadRequest):
			c.cannotReveal(w, r, id)
		case fe != nil && fe.Code == "data_key_missing":
			// Not the database's absence, which the 503 page says.
			w.Header().Set("Retry-After", "1")
			c.errorPageBack(w, r, http.StatusServiceUnavailable, T(ctx, "Cannot reveal it here"),
				T(ctx, "This replica lacks the data key the value was sealed with, so it cannot open it (nothing was recorded). Another replica may reveal it; ask your administrator to start every replica with the same data keys."),
				"occurrences", T(ctx, "Back to the occurrence"), occurrenceHref(id))
		default:
			c.fail(w, r, err)
		}
		return
	}
	who := got.Audit.Principal
	when := formatTime(ctx, got.Audit.RevealedAt).Text
	row.Revealed = revealedText(ctx, got.Value)
	row.RevealNotice = T(ctx, "Revealed by %s at %s; recorded in the audit log.", who, when)
	// A reload would GET the reveal's address, which leads to the
	// occurrence: the value would vanish, and reading it again would take
	// another reveal.
	v.Chrome.still()
	c.render(w, r, http.StatusOK, occurrencePage(v))
}

// occurrenceRevealGet answers a GET of the reveal address (a bookmark, or
// going back to the no-store answer): revealing takes a POST, so it goes
// to the occurrence.
func (c *Console) occurrenceRevealGet(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	http.Redirect(w, r, occurrenceHref(id), http.StatusSeeOther)
}

// revealRefused answers a reveal that was refused: its page leads back to
// the occurrence the form was on.
func (c *Console) revealRefused(w http.ResponseWriter, r *http.Request, id uuid.UUID, status int, title, message string) {
	c.errorPageBack(w, r, status, title, message, "occurrences", T(r.Context(), "Back to the occurrence"), occurrenceHref(id))
}

func (c *Console) cannotReveal(w http.ResponseWriter, r *http.Request, id uuid.UUID) {
	ctx := r.Context()
	c.revealRefused(w, r, id, http.StatusUnprocessableEntity, T(ctx, "Cannot reveal"),
		T(ctx, "Only a value this page shows as hidden (sensitive) can be revealed."))
}

func (c *Console) secretNotRevealable(w http.ResponseWriter, r *http.Request, id uuid.UUID) {
	ctx := r.Context()
	c.revealRefused(w, r, id, http.StatusForbidden, T(ctx, "Not allowed"), T(ctx, "Secret values can never be revealed."))
}
