package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/isoduration"
)

// revisionsJSON is a grant's revisions: a list, or "all" (every revision,
// present and future).
type revisionsJSON struct {
	All  bool
	List []int
}

func (r revisionsJSON) MarshalJSON() ([]byte, error) {
	if r.All {
		return []byte(`"all"`), nil
	}
	return json.Marshal(r.List)
}

func (r *revisionsJSON) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte(`"all"`)) {
		r.All = true
		return nil
	}
	if err := json.Unmarshal(b, &r.List); err != nil {
		return errors.New(`revisions must be a list of revision numbers or "all"`)
	}
	if r.List == nil {
		r.List = []int{}
	}
	return nil
}

type grantJSON struct {
	Definition string        `json:"definition"`
	Revisions  revisionsJSON `json:"revisions"`
}

type consumerJSON struct {
	ID        int64       `json:"id"`
	Name      string      `json:"name"`
	Grants    []grantJSON `json:"grants"`
	CreatedAt time.Time   `json:"created_at"`
	RevokedAt *time.Time  `json:"revoked_at"`
	Token     string      `json:"token,omitempty"`
}

func toGrants(in []grantJSON) []engine.Grant {
	out := make([]engine.Grant, len(in))
	for i, g := range in {
		out[i] = engine.Grant{Definition: g.Definition}
		switch {
		case g.Revisions.All:
		case g.Revisions.List == nil && engine.IsKeyPattern(g.Definition):
			// A pattern's revisions are all: saying so is optional.
		case g.Revisions.List == nil:
			out[i].Revisions = []int{}
		default:
			out[i].Revisions = g.Revisions.List
		}
	}
	return out
}

func toConsumerJSON(c engine.Consumer) consumerJSON {
	out := consumerJSON{ID: c.ID, Name: c.Name, CreatedAt: c.CreatedAt, RevokedAt: c.RevokedAt, Grants: []grantJSON{}}
	for _, g := range c.Grants {
		out.Grants = append(out.Grants, grantJSON{Definition: g.Definition, Revisions: revisionsJSON{All: g.Revisions == nil, List: g.Revisions}})
	}
	return out
}

func (a *API) createConsumer() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[struct {
			Name   string      `json:"name"`
			Grants []grantJSON `json:"grants"`
		}](w, r, a.maxBody)
		if err != nil {
			return err
		}
		c, token, err := a.eng.CreateConsumer(r.Context(), req.Name, toGrants(req.Grants))
		if err != nil {
			return err
		}
		out := toConsumerJSON(c)
		out.Token = token
		located(w, "/api/v1/consumers/"+strconv.FormatInt(c.ID, 10))
		httpjson.Encode(w, http.StatusCreated, out)
		return nil
	})
}

func consumerID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		return 0, fault.New(fault.NotFound, "not_found", "consumer %q not found", chi.URLParam(r, "id"))
	}
	return id, nil
}

func (a *API) listConsumers() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[int64](r)
		if err != nil {
			return err
		}
		cs, err := a.eng.ListConsumers(r.Context(), after, limit+1)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(cs, limit, func(c engine.Consumer) any { return c.ID }, toConsumerJSON))
		return nil
	})
}

func (a *API) getConsumer() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := consumerID(r)
		if err != nil {
			return err
		}
		c, err := a.eng.GetConsumer(r.Context(), id)
		if err != nil {
			return err
		}
		// Its grants' tag, for a PUT of grants made from them (If-Match),
		// and to revalidate a copy (If-None-Match: 304 while unchanged).
		tag := engine.GrantsTag(c.Grants)
		w.Header().Set("ETag", tag)
		if slices.ContainsFunc(r.Header.Values("If-None-Match"), func(v string) bool {
			return slices.Contains(strings.Split(strings.ReplaceAll(v, " ", ""), ","), tag)
		}) {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
		httpjson.Encode(w, http.StatusOK, toConsumerJSON(c))
		return nil
	})
}

// grantsIfMatch reads a grants replacement's If-Match: the ETag of the
// grants it was made from, strong; "" without the header.
func grantsIfMatch(r *http.Request) (string, error) {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return "", nil
	}
	tag := strings.TrimSpace(strings.Join(values, ","))
	if tag == "*" {
		return "", nil // any current grants (RFC 9110): the consumer exists, as the PUT checks
	}
	if len(values) > 1 || strings.Contains(tag, ",") || strings.HasPrefix(tag, "W/") || len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return "", fault.New(fault.BadRequest, "invalid_request",
			"If-Match must be the one strong tag GET /api/v1/consumers/{id} answered in its ETag (quoted), or be left out")
	}
	return tag, nil
}

func (a *API) setGrants() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := consumerID(r)
		if err != nil {
			return err
		}
		req, err := httpjson.Decode[struct {
			Grants *[]grantJSON `json:"grants"`
		}](w, r, a.maxBody)
		if err != nil {
			return err
		}
		if req.Grants == nil {
			// Absent is not empty: a client that forgot the member must
			// not withdraw every grant.
			return fault.New(fault.BadRequest, "invalid_request", "grants is required: the full list of the consumer's grants ([] withdraws them all)").
				WithErrors([]fault.FieldError{{Path: "/grants", Message: "is required"}})
		}
		tag, err := grantsIfMatch(r)
		if err != nil {
			return err
		}
		c, err := a.eng.SetGrantsIf(r.Context(), id, toGrants(*req.Grants), tag)
		if err != nil {
			return err
		}
		w.Header().Set("ETag", engine.GrantsTag(c.Grants))
		httpjson.Encode(w, http.StatusOK, toConsumerJSON(c))
		return nil
	})
}

func (a *API) rotateConsumer() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := consumerID(r)
		if err != nil {
			return err
		}
		req, err := httpjson.DecodeOrZero[struct {
			// Overlap keeps the old tokens working that long (see
			// engine.RotateConsumerToken); absent, they stop at once.
			Overlap isoduration.Duration `json:"overlap"`
		}](w, r, a.maxBody)
		if err != nil {
			return err
		}
		token, expires, err := a.eng.RotateConsumerToken(r.Context(), id, time.Duration(req.Overlap))
		if err != nil {
			return err
		}
		out := map[string]any{"id": id, "token": token}
		if expires != nil {
			out["previous_tokens_expire_at"] = expires.UTC()
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

func (a *API) revokeConsumer() http.Handler {
	return a.handleNoBody(func(w http.ResponseWriter, r *http.Request) error {
		id, err := consumerID(r)
		if err != nil {
			return err
		}
		if err := a.eng.RevokeConsumer(r.Context(), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}
