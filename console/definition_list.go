package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// definitionsPageSize is the definitions list's page size.
const definitionsPageSize = 50

// definitionRow is one definition of the list.
type definitionRow struct {
	Key          string
	Href         string
	Name         string
	Latest       string
	LatestHref   string
	Releases     string
	ReleaseNames string
}

// definitionListView is the design view's index.
type definitionListView struct {
	Chrome                                      chrome
	Intro, Caption                              string
	HeadKey, HeadName, HeadLatest, HeadReleases string
	NoRevision                                  string
	Rows                                        []definitionRow
	Empty                                       string
	Pager                                       pagerView
	// Errors say why the page lists nothing: parameters it cannot read.
	Errors []string
}

// definitionList lists definitions by key, keyset-paginated.
func (c *Console) definitionList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	after := r.URL.Query().Get("after")
	errs := append(queryProblems(ctx, r.URL.RawQuery, "after"), keyCursorProblems(ctx, after)...)
	v := definitionListView{
		Chrome:  c.chrome(r, T(ctx, "Definitions"), "definitions"),
		Intro:   T(ctx, "Task contracts: their Working copy, immutable revisions and named releases."),
		Caption: T(ctx, "Definitions by key"),
		HeadKey: T(ctx, "Key"), HeadName: T(ctx, "Name"), HeadLatest: T(ctx, "Latest revision"), HeadReleases: T(ctx, "Releases"),
		NoRevision: T(ctx, "none yet"),
		Empty:      T(ctx, "No definition yet."),
		Pager:      newPager(ctx),
		Errors:     errs,
	}
	if len(errs) > 0 {
		c.render(w, r, http.StatusBadRequest, definitionListPage(v))
		return
	}
	defs, err := c.eng.ListDefinitions(ctx, after, definitionsPageSize+1)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	more := len(defs) > definitionsPageSize
	if more {
		defs = defs[:definitionsPageSize]
	}
	for _, d := range defs {
		row := definitionRow{Key: d.Key, Href: definitionHref(d.Key), Name: visibleBidi(d.Working.Name),
			Releases: T(ctx, "%d releases", d.ReleaseCount)}
		if d.LatestRevision > 0 {
			row.Latest = strconv.Itoa(d.LatestRevision)
			row.LatestHref = revisionHref(d.Key, d.LatestRevision)
		}
		if d.ReleaseCount > 0 {
			rels, err := c.eng.ListReleases(ctx, d.Key)
			if err != nil {
				c.serverError(w, r, err)
				return
			}
			names := make([]string, len(rels))
			for i, rel := range rels {
				names[i] = rel.Name
			}
			row.ReleaseNames = strings.Join(names, ", ")
		}
		v.Rows = append(v.Rows, row)
	}
	if more {
		v.Pager.NextHref = basePath + "/definitions?after=" + url.QueryEscape(defs[len(defs)-1].Key)
	}
	if after != "" {
		v.Pager.FirstHref = basePath + "/definitions"
	}
	c.render(w, r, http.StatusOK, definitionListPage(v))
}
