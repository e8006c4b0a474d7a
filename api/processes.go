package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

type processVersionJSON struct {
	Process   string          `json:"process"`
	Version   int             `json:"version"`
	Digest    string          `json:"digest"`
	CreatedAt time.Time       `json:"created_at"`
	Document  json.RawMessage `json:"document,omitempty"`
	Created   *bool           `json:"created,omitempty"`
	// LowersProtection names the inputs a version just published
	// protects less than the one before it.
	LowersProtection []string `json:"lowers_protection,omitempty"`
	// LatestVersion, in the answer to a document published before, is
	// the version a start naming none runs: publishing an older document
	// again does not make it the latest (evolution QA: nothing said so).
	LatestVersion int `json:"latest_version,omitempty"`
}

func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := httpjson.ReadBody(w, r, a.maxBody)
	if err != nil {
		return nil, err
	}
	// Documents are parsed strictly by their own readers, which see no
	// invalid UTF-8 once decoded: refuse it here, as every body is.
	return body, httpjson.CheckText(body)
}

func (a *API) publishProcess() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		body, err := a.readBody(w, r)
		if err != nil {
			return err
		}
		// Relais-Applied: false is the server's, for every dry run.
		dryRun, err := httpjson.DryRun(r)
		if err != nil {
			return err
		}
		if dryRun {
			// Every publication check, nothing stored: `relais apply
			// --dry-run` shows refusals before anything changes.
			c, err := a.eng.CheckProcess(r.Context(), chi.URLParam(r, "key"), body)
			if err != nil {
				return err
			}
			out := map[string]any{"process": chi.URLParam(r, "key"), "version": c.Version, "exists": c.Exists, "dry_run": true}
			if c.Exists {
				// As the publication's answer: the version starts run.
				latest, err := a.eng.GetProcessVersion(r.Context(), chi.URLParam(r, "key"), 0)
				if err != nil {
					return err
				}
				out["latest_version"] = latest.Version
			}
			if len(c.LoweredProtection) > 0 {
				out["lowers_protection"] = c.LoweredProtection
			}
			httpjson.Encode(w, http.StatusOK, out)
			return nil
		}
		pv, created, err := a.eng.PublishProcess(r.Context(), chi.URLParam(r, "key"), body)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			located(w, "/api/v1/processes/"+url.PathEscape(pv.Key)+"/versions/"+strconv.Itoa(pv.Version))
		}
		out := processVersionJSON{Process: pv.Key, Version: pv.Version, Digest: pv.Digest, CreatedAt: pv.CreatedAt, Created: &created,
			LowersProtection: pv.LoweredProtection}
		if !created {
			latest, err := a.eng.GetProcessVersion(r.Context(), pv.Key, 0)
			if err != nil {
				return err
			}
			out.LatestVersion = latest.Version
		}
		httpjson.Encode(w, status, out)
		return nil
	})
}

func (a *API) listProcesses() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[string](r)
		if err != nil {
			return err
		}
		ps, err := a.eng.ListProcesses(r.Context(), after, limit+1)
		if err != nil {
			return err
		}
		type item struct {
			Key           string    `json:"key"`
			LatestVersion int       `json:"latest_version"`
			CreatedAt     time.Time `json:"created_at"`
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(ps, limit, func(s engine.ProcessSummary) any { return s.Key }, func(s engine.ProcessSummary) item {
			return item{Key: s.Key, LatestVersion: s.LatestVersion, CreatedAt: s.CreatedAt}
		}))
		return nil
	})
}

func (a *API) getProcess() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		key := chi.URLParam(r, "key")
		vs, err := a.eng.ListProcessVersions(r.Context(), key)
		if err != nil {
			return err
		}
		out := struct {
			Key      string               `json:"key"`
			Versions []processVersionJSON `json:"versions"`
		}{Key: key, Versions: []processVersionJSON{}}
		for _, v := range vs {
			out.Versions = append(out.Versions, processVersionJSON{Process: key, Version: v.Version, Digest: v.Digest, CreatedAt: v.CreatedAt})
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

// listProcessVersions lists a process's versions, oldest first, without
// their documents, as GET /processes/{key} does, a page at a time.
func (a *API) listProcessVersions() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[int](r)
		if err != nil {
			return err
		}
		key := chi.URLParam(r, "key")
		vs, err := a.eng.ListProcessVersions(r.Context(), key)
		if err != nil {
			return err
		}
		vs = pageAfter(vs, after, limit, func(v engine.ProcessVersion) int { return v.Version })
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(vs, limit, func(v engine.ProcessVersion) any { return v.Version },
			func(v engine.ProcessVersion) processVersionJSON {
				return processVersionJSON{Process: key, Version: v.Version, Digest: v.Digest, CreatedAt: v.CreatedAt}
			}))
		return nil
	})
}

func (a *API) getProcessVersion() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		v, err := strconv.Atoi(chi.URLParam(r, "v"))
		if err != nil || v < 1 {
			return fault.New(fault.NotFound, "not_found", "version %q not found", chi.URLParam(r, "v"))
		}
		pv, err := a.eng.GetProcessVersion(r.Context(), chi.URLParam(r, "key"), v)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, processVersionJSON{Process: pv.Key, Version: pv.Version, Digest: pv.Digest, CreatedAt: pv.CreatedAt, Document: pv.Document})
		return nil
	})
}
