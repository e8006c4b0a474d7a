package api

import (
	"net/http"

	"github.com/relais/relais/api/openapi"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

// whoami tells a caller which principal its token stands for.
func (a *API) whoami() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		httpjson.Encode(w, http.StatusOK, map[string]any{"name": p.Name, "role": p.Role})
	})
}

// openAPI serves the OpenAPI 3.1 description of the API (this route and
// the Camunda facade included). Like every /api/v1 route it needs a token;
// the same document is in the repository at api/openapi/openapi.yaml for
// generators that run without one.
func (a *API) openAPI() http.Handler {
	doc := openapi.JSON()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(doc)
	})
}

type createTokenRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// createToken issues a staff token (admin, designer or operator); consumer
// tokens belong to consumers and are made under /consumers.
func (a *API) createToken() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[createTokenRequest](w, r, a.cfg.MaxBodyBytes)
		if err != nil {
			return err
		}
		var errs []fault.FieldError
		role, rerr := auth.ParseRole(req.Role)
		if rerr != nil || role == auth.RoleConsumer {
			errs = append(errs, fault.FieldError{Path: "/role", Message: "must be admin, designer or operator (consumers are created under /api/v1/consumers)"})
		}
		if req.Name == "" {
			errs = append(errs, fault.FieldError{Path: "/name", Message: "is required"})
		}
		if len(errs) > 0 {
			return fault.New(fault.BadRequest, "invalid_request", "the token request is invalid").WithErrors(errs)
		}
		token, err := a.eng.CreateToken(r.Context(), req.Name, role)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusCreated, map[string]any{"name": req.Name, "role": role, "token": token})
		return nil
	})
}
