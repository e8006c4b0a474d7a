package console

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
)

// tokensPath is the admins' page of staff tokens.
const tokensPath = basePath + "/tokens"

// tokensPageSize is the token list's page size.
const tokensPageSize = 50

// requireAdmin guards the token pages, consumers, destinations and the
// reveal log: they are an administrator's business, as in the API.
func (c *Console) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := auth.FromContext(r.Context()); !ok || p.Role != auth.RoleAdmin {
			ctx := r.Context()
			c.errorPage(w, r, http.StatusForbidden, T(ctx, "Not allowed"), T(ctx, "Only administrators see this page: tokens, consumers, destinations, the reveal log and erasures are theirs."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tokenRow is one staff token of the list.
type tokenRow struct {
	ID         string
	Name       string
	Role       string
	Created    timeView
	LastUsed   timeView
	Expires    timeView
	Expired    bool
	RevokeHref string
	Current    bool
}

// tokenListView is the staff tokens page.
type tokenListView struct {
	Chrome                                                             chrome
	List                                                               cardList
	HeadID, HeadName, HeadRole, HeadCreated, HeadLastUsed, HeadExpires string
	HeadAction                                                         string
	Never, NeverUsed, ExpiredLabel, RevokeLabel, CurrentLabel          string
	Rows                                                               []tokenRow
}

// tokenList lists the staff tokens that are not revoked, keyset-paginated.
func (c *Console) tokenList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	after, errs := idCursorProblems(ctx, r.URL.Query().Get("after"), 0)
	errs = append(queryProblems(ctx, r.URL.RawQuery, "after"), errs...)
	p, _ := auth.FromContext(ctx)
	v := tokenListView{
		Chrome: c.chrome(r, T(ctx, "Tokens"), "tokens"),
		List: newCardList(ctx, "tokens",
			T(ctx, "Staff tokens (administrators, designers, operators) that are not revoked. Consumer tokens are managed with their consumers. Revoking a token refuses its next request."),
			T(ctx, "Staff tokens, oldest first"), T(ctx, "No token."), errs),
		HeadID: T(ctx, "ID"), HeadName: T(ctx, "Name"), HeadRole: T(ctx, "Role"), HeadCreated: T(ctx, "Created on"),
		HeadLastUsed: T(ctx, "Last used"), HeadExpires: T(ctx, "Expires"), HeadAction: T(ctx, "Action"),
		Never: T(ctx, "never"), NeverUsed: T(ctx, "not yet"), ExpiredLabel: T(ctx, "Expired token"),
		RevokeLabel: T(ctx, "Revoke…"), CurrentLabel: T(ctx, "this session"),
	}
	if len(errs) > 0 {
		c.render(w, r, http.StatusBadRequest, tokenListPage(v))
		return
	}
	tokens, more, err := onePage(tokensPageSize, func(limit int) ([]engine.StaffToken, error) {
		return c.eng.ListStaffTokens(ctx, after, limit)
	})
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	now := c.now()
	for _, t := range tokens {
		v.Rows = append(v.Rows, tokenRow{
			ID: strconv.FormatInt(t.ID, 10), Name: t.Name, Role: roleLabel(ctx, t.Role),
			Created: formatTime(ctx, t.CreatedAt), LastUsed: formatTimePtr(ctx, t.LastUsedAt), Expires: formatTimePtr(ctx, t.ExpiresAt),
			Expired:    t.ExpiresAt != nil && !t.ExpiresAt.After(now),
			RevokeHref: tokenHref(t.ID) + "/revoke", Current: t.ID == p.TokenID,
		})
	}
	linkPages(&v.List, tokensPath, "after", tokens, more, after == 0, func(t engine.StaffToken) string { return strconv.FormatInt(t.ID, 10) })
	c.render(w, r, http.StatusOK, tokenListPage(v))
}

func tokenHref(id int64) string { return tokensPath + "/" + strconv.FormatInt(id, 10) }

// revokeTokenView is the confirmation step before revoking a token.
type revokeTokenView struct {
	Chrome      chrome
	Question    string
	Consequence string
	Error       string
	Action      string
	CSRF        string
	Confirm     string
	Cancel      string
	BackHref    string
	// Blocked hides the confirmation: the last usable admin token is
	// refused, said before anyone tries.
	Blocked bool
}

func (c *Console) revokeTokenView(r *http.Request, t engine.StaffToken) revokeTokenView {
	ctx := r.Context()
	v := revokeTokenView{
		Chrome:      c.chrome(r, T(ctx, "Revoke token %d", t.ID), "tokens"),
		Question:    T(ctx, "Revoke the %s token “%s”?", roleLabel(ctx, t.Role), t.Name),
		Consequence: T(ctx, "Its next request is refused, and console sessions opened with it end. This cannot be undone: whoever uses it needs a new token."),
		Action:      tokenHref(t.ID) + "/revoke",
		CSRF:        currentOf(ctx).csrf,
		Confirm:     T(ctx, "Revoke the token"),
		Cancel:      T(ctx, "Keep it"),
		BackHref:    tokensPath,
	}
	if p, _ := auth.FromContext(ctx); p.TokenID == t.ID {
		v.Consequence = T(ctx, "This is the token you signed in with: revoking it signs you out. Its next request is refused. This cannot be undone.")
	}
	return v
}

// tokenFromPath reads the {id} of a token page.
func (c *Console) tokenFromPath(w http.ResponseWriter, r *http.Request) (engine.StaffToken, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		c.notFound(w, r)
		return engine.StaffToken{}, false
	}
	t, err := c.eng.GetStaffToken(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return engine.StaffToken{}, false
	}
	return t, true
}

// tokenRevokeConfirm asks before revoking.
func (c *Console) tokenRevokeConfirm(w http.ResponseWriter, r *http.Request) {
	t, ok := c.tokenFromPath(w, r)
	if !ok {
		return
	}
	v := c.revokeTokenView(r, t)
	last, err := c.eng.IsLastUsableAdmin(r.Context(), t.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if last {
		// Refused before it is asked: no consequence to weigh.
		v.Error, v.Blocked, v.Consequence = lastAdminText(r.Context()), true, ""
	}
	c.render(w, r, http.StatusOK, revokeTokenPage(v))
}

func lastAdminText(ctx context.Context) string {
	return T(ctx, "This is the last usable administrator token: create another one before revoking it.")
}

// tokenRevoke revokes the token (the CSRF token was checked by
// requireSession) and goes back to the list.
func (c *Console) tokenRevoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	t, ok := c.tokenFromPath(w, r)
	if !ok {
		return
	}
	if err := c.eng.RevokeStaffToken(ctx, t.ID); err != nil {
		if fault.HasCode(err, "last_admin_token") {
			v := c.revokeTokenView(r, t)
			v.Error, v.Blocked, v.Consequence = lastAdminText(ctx), true, ""
			c.render(w, r, http.StatusConflict, revokeTokenPage(v))
			return
		}
		c.fail(w, r, err)
		return
	}
	p, _ := auth.FromContext(ctx)
	c.logger.Info("console: token revoked", "token_id", t.ID, "by", p.Name)
	if p.TokenID == t.ID {
		// The session went with it: the sign-in page says the revocation
		// was done (console QA: it only said a session had ended, for one
		// of five reasons).
		// The token is revoked: its sessions are over whatever the delete
		// does (every request looks the token up).
		if err := c.sessions.delete(ctx, currentOf(ctx).id); err != nil {
			c.logger.Warn("console: a revoked token's session could not be deleted", "err", err)
		}
		http.SetCookie(w, cookie(r, sessionCookie, "", -1))
		http.Redirect(w, r, basePath+"/sign-in?revoked=1", http.StatusSeeOther)
		return
	}
	c.redirectWithFlash(w, r, tokensPath, flash{Text: T(ctx, "The token “%s” (%s) was revoked: its next request is refused.", t.Name, roleLabel(ctx, t.Role))})
}
