package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/api/openapi"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/isoduration"
)

// whoami tells a caller which principal its token stands for.
func (a *API) whoami() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		p, _ := auth.FromContext(r.Context())
		// The id and expiry let a pipeline revoke its own token after
		// rotating it, and warn before it expires.
		out := map[string]any{"name": p.Name, "role": p.Role, "token_id": p.TokenID, "expires_at": p.ExpiresAt}
		if p.ConsumerID != 0 {
			out["consumer_id"] = p.ConsumerID
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

// openAPI serves the OpenAPI 3.1 description of the API (this route and
// the Camunda facade included), with its ETag: If-None-Match revalidates
// it (openapi.Serve). Like every /api/v1 route it needs a token; the same
// document is in the repository at api/openapi/openapi.yaml for
// generators that run without one.
func (a *API) openAPI() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		openapi.Serve(w, r)
		return nil
	})
}

type createTokenRequest struct {
	Name      string                `json:"name"`
	Role      string                `json:"role"`
	ExpiresAt *time.Time            `json:"expires_at"`
	ExpiresIn *isoduration.Duration `json:"expires_in"`
}

// tokenJSON describes a staff token: never its secret (only the creation
// answer carries it, once) nor its hash.
type tokenJSON struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Role       auth.Role  `json:"role"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	Token      string     `json:"token,omitempty"`
}

func toTokenJSON(t engine.StaffToken) tokenJSON {
	return tokenJSON{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt, ExpiresAt: t.ExpiresAt}
}

// createToken issues a staff token (admin, designer or operator), which
// may expire at expires_at (RFC 3339) or expires_in (ISO-8601) from now;
// consumer tokens belong to consumers and are made under /consumers.
func (a *API) createToken() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[createTokenRequest](w, r, a.maxBody)
		if err != nil {
			return err
		}
		// Every problem at once.
		var errs []fault.FieldError
		if fe := engine.TokenNameProblem(req.Name); fe != nil {
			errs = append(errs, *fe)
		}
		role, rerr := auth.ParseRole(req.Role)
		if rerr != nil || role == auth.RoleConsumer {
			errs = append(errs, fault.FieldError{Path: "/role", Message: "must be admin, designer or operator (consumers are created under /api/v1/consumers)"})
		}
		expiry := engine.Expiry{At: req.ExpiresAt}
		if req.ExpiresIn != nil {
			expiry.In = time.Duration(*req.ExpiresIn)
			if expiry.In <= 0 {
				errs = append(errs, fault.FieldError{Path: "/expires_in", Message: "must be a positive duration"})
			}
		}
		if len(errs) > 0 {
			return fault.New(fault.BadRequest, "invalid_request", "the token request is invalid").WithErrors(errs)
		}
		token, st, err := a.eng.CreateToken(r.Context(), req.Name, role, expiry)
		if err != nil {
			return err
		}
		out := toTokenJSON(st)
		out.Token = token
		httpjson.Encode(w, http.StatusCreated, out)
		return nil
	})
}

// listTokens lists the staff tokens that are not revoked, expired ones
// included, in creation order.
func (a *API) listTokens() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[int64](r)
		if err != nil {
			return err
		}
		ts, err := a.eng.ListStaffTokens(r.Context(), after, limit+1)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(ts, limit, func(t engine.StaffToken) any { return t.ID }, toTokenJSON))
		return nil
	})
}

// revokeToken revokes a staff token at once (409 last_admin_token for the
// last usable admin token).
func (a *API) revokeToken() http.Handler {
	return a.handleNoBody(func(w http.ResponseWriter, r *http.Request) error {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id < 1 {
			return fault.New(fault.NotFound, "not_found", "token %q not found", chi.URLParam(r, "id"))
		}
		if err := a.eng.RevokeStaffToken(r.Context(), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}
