package api

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

type definitionJSON struct {
	Key            string             `json:"key"`
	Name           string             `json:"name"`
	Working        json.RawMessage    `json:"working,omitempty"`
	WorkingDigest  string             `json:"working_digest,omitempty"`
	LatestRevision int                `json:"latest_revision"`
	CreatedAt      time.Time          `json:"created_at"`
	UpdatedAt      time.Time          `json:"updated_at"`
	ReleaseCount   *int               `json:"release_count,omitempty"`
	Changes        []contracts.Change `json:"unsnapshotted_changes,omitempty"`
	// Unsnapshotted: a snapshot would make a revision, even when only
	// names or descriptions changed (unsnapshotted_changes lists none).
	// Left out of lists.
	Unsnapshotted *bool `json:"unsnapshotted,omitempty"`
}

// definitionDetailJSON is a definition as GET /definitions/{key} shows
// it: its revisions and releases always listed, [] when there are none
// (the list leaves them out).
type definitionDetailJSON struct {
	definitionJSON
	Revisions []revisionSummary `json:"revisions"`
	Releases  []releaseJSON     `json:"releases"`
}

type revisionSummary struct {
	Revision  int       `json:"revision"`
	Digest    string    `json:"digest"`
	CreatedAt time.Time `json:"created_at"`
}

type revisionJSON struct {
	Definition string          `json:"definition"`
	Revision   int             `json:"revision"`
	Digest     string          `json:"digest"`
	CreatedAt  time.Time       `json:"created_at"`
	Document   json.RawMessage `json:"document"`
}

type releaseJSON struct {
	Definition string    `json:"definition"`
	Name       string    `json:"name"`
	Revision   int       `json:"revision"`
	Notes      string    `json:"notes"`
	CreatedAt  time.Time `json:"created_at"`
}

func toReleaseJSON(r engine.Release) releaseJSON {
	return releaseJSON{Definition: r.Key, Name: r.Name, Revision: r.Revision, Notes: r.Notes, CreatedAt: r.CreatedAt}
}

func (a *API) putWorking() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		body, err := a.readBody(w, r)
		if err != nil {
			return err
		}
		dryRun, err := httpjson.DryRun(r)
		if err != nil {
			return err
		}
		save := a.eng.SaveWorking
		if dryRun {
			// Every check, nothing stored: `relais apply --dry-run` refuses
			// what the real apply would.
			save = a.eng.CheckWorking // Relais-Applied: false is the server's
		}
		d, created, err := save(r.Context(), chi.URLParam(r, "key"), body)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			// A dry run answers 201 as the save would (relais apply
			// --dry-run reports what it would create), but names no
			// resource: there is none.
			status = http.StatusCreated
			if !dryRun {
				located(w, "/api/v1/definitions/"+url.PathEscape(d.Key))
			}
		}
		out := definitionJSON{Key: d.Key, Name: d.Working.Name, Working: d.Working.Canonical(), WorkingDigest: d.WorkingDigest,
			LatestRevision: d.LatestRevision, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
		// What a snapshot would change against the latest revision, as GET
		// says it, and `relais apply` too: a client of the API learns it
		// from the save itself (designer QA).
		unsnapshotted := true
		if d.LatestRevision > 0 {
			rev, err := a.eng.GetRevision(r.Context(), d.Key, d.LatestRevision)
			if err != nil {
				return err
			}
			if unsnapshotted = rev.Digest != d.WorkingDigest; unsnapshotted {
				out.Changes = contracts.Diff(rev.Working, d.Working)
			}
		}
		out.Unsnapshotted = &unsnapshotted
		httpjson.Encode(w, status, out)
		return nil
	})
}

func (a *API) listDefinitions() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[string](r)
		if err != nil {
			return err
		}
		defs, err := a.eng.ListDefinitions(r.Context(), after, limit+1)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(defs, limit, func(d engine.Definition) any { return d.Key }, func(d engine.Definition) definitionJSON {
			n := d.ReleaseCount
			return definitionJSON{Key: d.Key, Name: d.Working.Name, LatestRevision: d.LatestRevision, ReleaseCount: &n, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
		}))
		return nil
	})
}

func (a *API) getDefinition() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		key := chi.URLParam(r, "key")
		d, err := a.eng.FindDefinition(r.Context(), key)
		if err != nil {
			return err
		}
		revs, err := a.eng.ListRevisions(r.Context(), key)
		if err != nil {
			return err
		}
		rels, err := a.eng.ListReleases(r.Context(), key)
		if err != nil {
			return err
		}
		out := definitionDetailJSON{definitionJSON: definitionJSON{Key: d.Key, Name: d.Working.Name, Working: d.Working.Canonical(), WorkingDigest: d.WorkingDigest,
			LatestRevision: d.LatestRevision, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt},
			Revisions: []revisionSummary{}, Releases: []releaseJSON{}}
		for _, rv := range revs {
			out.Revisions = append(out.Revisions, revisionSummary{Revision: rv.Revision, Digest: rv.Digest, CreatedAt: rv.CreatedAt})
		}
		unsnapshotted := len(revs) == 0 || revs[len(revs)-1].Digest != d.WorkingDigest
		out.Unsnapshotted = &unsnapshotted
		if n := len(revs); n > 0 && revs[n-1].Digest != d.WorkingDigest {
			// Designers see at a glance what a snapshot would change.
			out.Changes = contracts.Diff(revs[n-1].Working, d.Working)
		}
		for _, rl := range rels {
			out.Releases = append(out.Releases, toReleaseJSON(rl))
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

// listRevisions lists a definition's revisions, oldest first, as its
// detail does, a page at a time (evaluator QA: the path that makes one
// answered 405 to reading them).
func (a *API) listRevisions() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[int](r)
		if err != nil {
			return err
		}
		key := chi.URLParam(r, "key")
		if _, err := a.eng.FindDefinition(r.Context(), key); err != nil {
			return err
		}
		revs, err := a.eng.ListRevisions(r.Context(), key)
		if err != nil {
			return err
		}
		revs = pageAfter(revs, after, limit, func(rv engine.Revision) int { return rv.Revision })
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(revs, limit, func(rv engine.Revision) any { return rv.Revision },
			func(rv engine.Revision) revisionSummary {
				return revisionSummary{Revision: rv.Revision, Digest: rv.Digest, CreatedAt: rv.CreatedAt}
			}))
		return nil
	})
}

// pageAfter is up to limit+1 of rows, ascending by n, past after (a
// page's last n; 0 for the first page), for httpjson.NewPage: the lists
// of a definition's revisions and a process's versions, read whole (a
// handful each) and paged as every list is.
func pageAfter[T any](rows []T, after, limit int, n func(T) int) []T {
	i, _ := slices.BinarySearchFunc(rows, after, func(row T, after int) int { return cmp.Compare(n(row), after+1) })
	rows = rows[i:]
	return rows[:min(len(rows), limit+1)]
}

func (a *API) snapshot() http.Handler {
	return a.handleNoBody(func(w http.ResponseWriter, r *http.Request) error {
		digests, err := ifMatch(r)
		if err != nil {
			return err
		}
		rev, created, err := a.eng.SnapshotIf(r.Context(), chi.URLParam(r, "key"), digests)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			located(w, "/api/v1/definitions/"+url.PathEscape(rev.Key)+"/revisions/"+strconv.Itoa(rev.Revision))
		}
		httpjson.Encode(w, status, map[string]any{"definition": rev.Key, "revision": rev.Revision, "digest": rev.Digest, "created_at": rev.CreatedAt, "created": created})
		return nil
	})
}

// ifMatch reads the Working digests a snapshot is conditional on, from
// If-Match: nil without the header or with "*" (any Working). Tags are
// compared strongly (a weak W/ tag matches nothing, RFC 9110), quoted or
// not, since a digest is also what GET /definitions/{key} answers as
// working_digest.
func ifMatch(r *http.Request) ([]string, error) {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return nil, nil
	}
	digests := []string{}
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			tag = strings.TrimSpace(tag)
			switch {
			case tag == "*":
				return nil, nil
			case tag == "":
			case strings.HasPrefix(tag, "W/"):
				digests = append(digests, "") // matches no digest
			default:
				d := strings.Trim(tag, `"`)
				if !digestPattern.MatchString(d) {
					shown := tag // quoted as sent: %q of "x" read \"x\" (API client QA)
					if !strings.HasPrefix(tag, `"`) || !strings.HasSuffix(tag, `"`) || len(tag) < 2 {
						shown = strconv.Quote(tag)
					}
					return nil, fault.New(fault.BadRequest, "invalid_request", "If-Match %s is not a Working's digest (sha256: and 64 hexadecimal digits, as working_digest is)", shown)
				}
				digests = append(digests, d)
			}
		}
	}
	if len(digests) == 0 {
		return nil, fault.New(fault.BadRequest, "invalid_request", "If-Match is empty: give the Working's digest (working_digest), quoted, or leave the header out")
	}
	if !slices.ContainsFunc(digests, func(d string) bool { return d != "" }) {
		// Told apart from a Working changed meanwhile, which the engine's
		// refusal would say: the digest may well be the current one.
		// Not working_changed: a client acting on the code would read the
		// Working again and send the same weak tag for ever.
		return nil, fault.New(fault.BadRequest, "invalid_request",
			"If-Match names weak tags only (W/…), which never match: If-Match compares strongly (RFC 9110); send the Working's digest without W/")
	}
	return digests, nil
}

// digestPattern is a Working's digest, as working_digest gives it.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func revisionParam(r *http.Request, name string) (int, error) {
	n, err := strconv.Atoi(chi.URLParam(r, name))
	if err != nil || n < 1 {
		return 0, fault.New(fault.NotFound, "not_found", "revision %q not found", chi.URLParam(r, name))
	}
	return n, nil
}

func (a *API) getRevision() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		n, err := revisionParam(r, "n")
		if err != nil {
			return err
		}
		rev, err := a.eng.GetRevision(r.Context(), chi.URLParam(r, "key"), n)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, revisionJSON{Definition: rev.Key, Revision: rev.Revision, Digest: rev.Digest, CreatedAt: rev.CreatedAt, Document: rev.Document})
		return nil
	})
}

func (a *API) getSchema(side string) http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		n, err := revisionParam(r, "n")
		if err != nil {
			return err
		}
		if p, _ := auth.FromContext(r.Context()); p.Role == auth.RoleConsumer {
			// A consumer sees its grants only: anything else is unknown.
			ok, err := a.eng.ConsumerSees(r.Context(), p.ConsumerID, chi.URLParam(r, "key"), n)
			if err != nil {
				return err
			}
			if !ok {
				return fault.New(fault.NotFound, "not_found", "revision %d of definition %q not found among the revisions this consumer is granted", n, chi.URLParam(r, "key"))
			}
		}
		rev, err := a.eng.GetRevision(r.Context(), chi.URLParam(r, "key"), n)
		if err != nil {
			return err
		}
		c := rev.Working.Inputs
		if side == "outputs" {
			c = rev.Working.Outputs
		}
		w.Header().Set("Content-Type", "application/schema+json")
		// A revision never changes, so neither does its schema.
		w.Header().Set("Cache-Control", "private, max-age=31536000, immutable")
		_, _ = w.Write(c.JSONSchema())
		return nil
	})
}

func (a *API) diff() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		from, err := revisionParam(r, "a")
		if err != nil {
			return err
		}
		to, err := revisionParam(r, "b")
		if err != nil {
			return err
		}
		changes, err := a.eng.DiffRevisions(r.Context(), chi.URLParam(r, "key"), from, to)
		if err != nil {
			return err
		}
		out := map[string]any{"definition": chi.URLParam(r, "key"), "from": from, "to": to, "changes": changes}
		var bp, bw bool
		for _, c := range changes {
			bp = bp || c.BreaksProcesses
			bw = bw || c.BreaksWorkers
		}
		out["breaks_processes"], out["breaks_workers"] = bp, bw
		if changes == nil {
			out["changes"] = []contracts.Change{}
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

type releaseRequest struct {
	Name     string `json:"name"`
	Revision int    `json:"revision"`
	Notes    string `json:"notes"`
}

func (a *API) createRelease() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[releaseRequest](w, r, a.maxBody)
		if err != nil {
			return err
		}
		rel, created, err := a.eng.CreateRelease(r.Context(), chi.URLParam(r, "key"), req.Name, req.Revision, req.Notes)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			located(w, "/api/v1/definitions/"+url.PathEscape(chi.URLParam(r, "key"))+"/releases/"+url.PathEscape(rel.Name))
		}
		httpjson.Encode(w, status, toReleaseJSON(rel))
		return nil
	})
}

// releaseCursor is the keyset position of a page of releases.
type releaseCursor struct {
	CreatedAt time.Time `json:"created_at"`
	Name      string    `json:"name"`
}

func (a *API) listReleases() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[*releaseCursor](r)
		if err != nil {
			return err
		}
		var pos *engine.ReleasePosition
		if after != nil {
			pos = &engine.ReleasePosition{CreatedAt: after.CreatedAt, Name: after.Name}
		}
		rels, err := a.eng.ListReleasesAfter(r.Context(), chi.URLParam(r, "key"), pos, limit+1)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(rels, limit, func(rl engine.Release) any {
			return releaseCursor{CreatedAt: rl.CreatedAt, Name: rl.Name}
		}, toReleaseJSON))
		return nil
	})
}

func (a *API) getRelease() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		rel, err := a.eng.GetRelease(r.Context(), chi.URLParam(r, "key"), chi.URLParam(r, "name"))
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, toReleaseJSON(rel))
		return nil
	})
}
