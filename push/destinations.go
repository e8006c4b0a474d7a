package push

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/auth"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/httpjson"
	"github.com/relais/relais/isoduration"
)

// Destinations serves the destinations admin routes.
type Destinations struct {
	logger  *slog.Logger
	eng     *engine.Engine
	maxBody int64
}

// NewDestinations returns the routes' handlers.
func NewDestinations(logger *slog.Logger, eng *engine.Engine, maxBody int64) *Destinations {
	return &Destinations{logger: logger, eng: eng, maxBody: maxBody}
}

// Routes mounts them on r (at /api/v1/destinations); admin only.
func (d *Destinations) Routes(r chi.Router, lookup auth.Lookup) {
	r.Use(auth.Require(lookup, d.logger))
	r.Method("GET", "/", httpjson.ErrorHandler(d.logger, d.list))
	r.Method("GET", "/{name}", httpjson.ErrorHandler(d.logger, d.get))
	r.Method("PUT", "/{name}", httpjson.ErrorHandler(d.logger, d.put))
	r.Method("DELETE", "/{name}", httpjson.ErrorHandler(d.logger, d.delete))
}

type destinationJSON struct {
	Name        string               `json:"name"`
	URL         string               `json:"url"`
	HeaderNames []string             `json:"header_names"`
	MaxTimeout  isoduration.Duration `json:"max_timeout"`
	CreatedAt   time.Time            `json:"created_at"`
	UpdatedAt   time.Time            `json:"updated_at"`
	// Change is set on PUT: created, updated or unchanged (what a
	// ?dry_run=true put would do).
	Change string `json:"change,omitempty"`
}

func toJSON(x engine.Destination) destinationJSON {
	names := x.HeaderNames
	if names == nil {
		names = []string{}
	}
	return destinationJSON{Name: x.Name, URL: x.URL, HeaderNames: names, MaxTimeout: isoduration.Duration(x.MaxTimeout), CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
}

type putRequest struct {
	URL        string               `json:"url"`
	Headers    map[string]string    `json:"headers"`
	MaxTimeout isoduration.Duration `json:"max_timeout"`
}

func (d *Destinations) put(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[putRequest](w, r, d.maxBody)
	if err != nil {
		return err
	}
	dryRun := r.URL.Query().Get("dry_run") == "true"
	dest, change, err := d.eng.PutDestination(r.Context(), chi.URLParam(r, "name"), req.URL, req.Headers, req.MaxTimeout.Std(), dryRun)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if change == engine.Created && !dryRun {
		status = http.StatusCreated
	}
	out := toJSON(dest)
	out.Change = string(change)
	httpjson.Encode(w, status, out)
	return nil
}

func (d *Destinations) get(w http.ResponseWriter, r *http.Request) error {
	dest, err := d.eng.GetDestination(r.Context(), chi.URLParam(r, "name"))
	if err != nil {
		return err
	}
	httpjson.Encode(w, http.StatusOK, toJSON(dest))
	return nil
}

func (d *Destinations) list(w http.ResponseWriter, r *http.Request) error {
	after, limit, err := httpjson.PageParams[string](r)
	if err != nil {
		return err
	}
	ds, err := d.eng.ListDestinations(r.Context(), after, limit+1)
	if err != nil {
		return err
	}
	httpjson.Encode(w, http.StatusOK, httpjson.NewPage(ds, limit, func(x engine.Destination) any { return x.Name }, toJSON))
	return nil
}

func (d *Destinations) delete(w http.ResponseWriter, r *http.Request) error {
	if err := d.eng.DeleteDestination(r.Context(), chi.URLParam(r, "name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
