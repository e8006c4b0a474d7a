package api

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/isoduration"
)

type destinationJSON struct {
	Name        string               `json:"name"`
	URL         string               `json:"url"`
	HeaderNames []string             `json:"header_names"`
	Signed      bool                 `json:"signed"`
	MaxTimeout  isoduration.Duration `json:"max_timeout"`
	CreatedAt   time.Time            `json:"created_at"`
	UpdatedAt   time.Time            `json:"updated_at"`
	// Change is set on PUT: created, updated or unchanged (what a
	// ?dry_run=true put would do).
	Change string `json:"change,omitempty"`
	// RemovedHeaders and SigningSecretRemoved are set on a PUT that
	// drops headers or the signing secret the destination had: a PUT
	// replaces the whole destination, and one sent to change only its
	// timeout cut its calls' credentials without a word (push QA).
	RemovedHeaders       []string `json:"removed_headers,omitempty"`
	SigningSecretRemoved bool     `json:"signing_secret_removed,omitempty"`
	// CappedTimeouts is set on a PUT whose max_timeout is below what
	// published push nodes ask: their calls are cut at it.
	CappedTimeouts []cappedTimeoutJSON `json:"capped_timeouts,omitempty"`
}

type cappedTimeoutJSON struct {
	ProcessKey string               `json:"process_key"`
	Version    int                  `json:"version"`
	Node       string               `json:"node"`
	Timeout    isoduration.Duration `json:"timeout"`
}

func destinationToJSON(x engine.Destination) destinationJSON {
	names := x.HeaderNames
	if names == nil {
		names = []string{}
	}
	return destinationJSON{Name: x.Name, URL: x.URL, HeaderNames: names, Signed: x.Signed, MaxTimeout: isoduration.Duration(x.MaxTimeout),
		CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
}

type putDestinationRequest struct {
	URL        string               `json:"url"`
	Headers    map[string]string    `json:"headers"`
	MaxTimeout isoduration.Duration `json:"max_timeout"`
	// SigningSecret signs each call (write-only, like header values).
	SigningSecret string `json:"signing_secret"`
}

func (a *API) putDestination() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[putDestinationRequest](w, r, a.maxBody)
		if err != nil {
			return err
		}
		// Relais-Applied: false is the server's, for every dry run.
		dryRun, err := httpjson.DryRun(r)
		if err != nil {
			return err
		}
		before, err := a.eng.GetDestination(r.Context(), chi.URLParam(r, "name"))
		if err != nil && !fault.HasCode(err, "not_found") {
			return err
		}
		dest, change, err := a.eng.PutDestination(r.Context(), engine.DestinationSpec{Name: chi.URLParam(r, "name"), URL: req.URL, Headers: req.Headers,
			MaxTimeout: req.MaxTimeout.Std(), SigningSecret: req.SigningSecret}, dryRun)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if change == engine.Created && !dryRun {
			status = http.StatusCreated
			located(w, "/api/v1/destinations/"+url.PathEscape(dest.Name))
		}
		out := destinationToJSON(dest)
		out.Change = string(change)
		if change != engine.Created {
			for _, h := range before.HeaderNames {
				if !slices.ContainsFunc(dest.HeaderNames, func(n string) bool { return strings.EqualFold(n, h) }) {
					out.RemovedHeaders = append(out.RemovedHeaders, h)
				}
			}
			out.SigningSecretRemoved = before.Signed && !dest.Signed
		}
		if change != engine.Created {
			// Said on every put, not only one that lowers the cap: one
			// raised, or applied again, still short of a node's timeout
			// still cuts its calls (verifier QA).
			capped, err := a.eng.PushTimeoutsAbove(r.Context(), dest.Name, dest.MaxTimeout)
			if err != nil {
				return err
			}
			for _, c := range capped {
				out.CappedTimeouts = append(out.CappedTimeouts, cappedTimeoutJSON{ProcessKey: c.ProcessKey, Version: c.Version, Node: c.Node, Timeout: isoduration.Duration(c.Timeout)})
			}
		}
		httpjson.Encode(w, status, out)
		return nil
	})
}

func (a *API) getDestination() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		dest, err := a.eng.GetDestination(r.Context(), chi.URLParam(r, "name"))
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, destinationToJSON(dest))
		return nil
	})
}

func (a *API) listDestinations() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[string](r)
		if err != nil {
			return err
		}
		ds, err := a.eng.ListDestinations(r.Context(), after, limit+1)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(ds, limit, func(x engine.Destination) any { return x.Name }, destinationToJSON))
		return nil
	})
}

func (a *API) deleteDestination() http.Handler {
	return a.handleNoBody(func(w http.ResponseWriter, r *http.Request) error {
		if err := a.eng.DeleteDestination(r.Context(), chi.URLParam(r, "name")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}
