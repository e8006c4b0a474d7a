package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
)

const (
	// defaultPageSize is the operations view's page size.
	defaultPageSize = 50
	// maxPageSize bounds ?limit= so one request cannot ask for the table.
	maxPageSize = 200
	// maxOptions bounds the definitions and consumers offered in the
	// filter form; a longer list would not be usable as a menu anyway.
	maxOptions = 500
)

// occurrenceFilter is the operations view's query, exactly as it appears
// in the URL so that a view can be shared.
type occurrenceFilter struct {
	Definition string
	Status     string
	Instance   string
	Revision   string
	Consumer   string
	Before     string
	Limit      string
}

func filterFromQuery(q url.Values) occurrenceFilter {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return occurrenceFilter{Definition: get("definition"), Status: get("status"), Instance: get("instance"),
		Revision: get("revision"), Consumer: get("consumer"), Before: get("before"), Limit: get("limit")}
}

// query encodes the filter, without empty parameters.
func (f occurrenceFilter) query() url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"definition", f.Definition}, {"status", f.Status}, {"instance", f.Instance},
		{"revision", f.Revision}, {"consumer", f.Consumer}, {"limit", f.Limit}, {"before", f.Before}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q
}

func (f occurrenceFilter) href() string {
	if q := f.query().Encode(); q != "" {
		return homePath + "?" + q
	}
	return homePath
}

// engineFilter validates the filter; each problem is a translated message.
func (f occurrenceFilter) engineFilter(ctx context.Context) (engine.OccurrenceFilter, []string) {
	ef := engine.OccurrenceFilter{Definition: f.Definition, Limit: defaultPageSize}
	var errs []string
	if f.Status != "" {
		if !slices.Contains(occurrenceStatuses, f.Status) {
			errs = append(errs, T(ctx, "Unknown status %q.", f.Status))
		}
		ef.Status = f.Status
	}
	if f.Instance != "" {
		id, err := uuid.Parse(f.Instance)
		if err != nil {
			errs = append(errs, T(ctx, "The process instance must be an instance id (a UUID)."))
		}
		ef.Instance = &id
	}
	if f.Revision != "" {
		n, err := strconv.Atoi(f.Revision)
		if err != nil || n < 1 {
			errs = append(errs, T(ctx, "The revision must be a whole number, 1 or more."))
		}
		ef.Revision = n
	}
	if f.Consumer != "" {
		n, err := strconv.ParseInt(f.Consumer, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, T(ctx, "Unknown consumer."))
		}
		ef.ConsumerID = n
	}
	if f.Before != "" {
		id, err := uuid.Parse(f.Before)
		if err != nil {
			errs = append(errs, T(ctx, "The page cursor is invalid: go back to the first page."))
		}
		ef.Before = &id
	}
	if f.Limit != "" {
		n, err := strconv.Atoi(f.Limit)
		if err != nil || n < 1 || n > maxPageSize {
			errs = append(errs, T(ctx, "The page size must be between 1 and %d.", maxPageSize))
		}
		ef.Limit = n
	}
	return ef, errs
}

// option is one entry of a <select>.
type option struct {
	Value    string
	Label    string
	Selected bool
}

// statusCount is one status in the counts bar.
type statusCount struct {
	Status  string
	Label   string
	Count   string
	Href    string
	Current bool
}

// occurrenceRow is one line of the operations view.
type occurrenceRow struct {
	ID             string
	Href           string
	Definition     string
	DefinitionHref string
	Revision       string
	Node           string
	Status         string
	StatusLabel    string
	Attempts       string
	Created        timeView
	InstanceID     string
	InstanceHref   string
}

// occurrenceListView is the operations view.
type occurrenceListView struct {
	Chrome chrome

	FiltersLabel, DefinitionLabel, StatusLabel, InstanceLabel, RevisionLabel, ConsumerLabel string
	Apply, Reset, ResetHref                                                                 string
	InstancePlaceholder                                                                     string
	DefinitionOptions, StatusOptions, ConsumerOptions                                       []option
	Filter                                                                                  occurrenceFilter
	Errors                                                                                  []string

	CountsLabel   string
	CountsScope   string
	CountsTotal   string
	CountsNote    string
	CountsMissing string
	Counts        []statusCount

	TableLabel                                                               string
	HeadID, HeadDefinition, HeadRevision, HeadNode, HeadStatus, HeadAttempts string
	HeadCreated, HeadInstance                                                string
	Rows                                                                     []occurrenceRow
	Empty                                                                    string
	NextLabel, NextHref, FirstLabel, FirstHref                               string
}

// occurrenceList is the operations view: occurrences newest first, filtered
// by the query, with counts by status and keyset pagination.
func (c *Console) occurrenceList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := filterFromQuery(r.URL.Query())
	ef, errs := f.engineFilter(ctx)

	v := occurrenceListView{
		Chrome:       c.chrome(r, T(ctx, "External tasks"), "occurrences"),
		FiltersLabel: T(ctx, "Filters"), DefinitionLabel: T(ctx, "Definition"), StatusLabel: T(ctx, "Status"),
		InstanceLabel: T(ctx, "Process instance"), RevisionLabel: T(ctx, "Revision"), ConsumerLabel: T(ctx, "Consumer"),
		InstancePlaceholder: T(ctx, "instance id"),
		Apply:               T(ctx, "Apply filters"), Reset: T(ctx, "Clear filters"), ResetHref: homePath,
		Filter:      f,
		Errors:      errs,
		CountsLabel: T(ctx, "Counts by status"),
		CountsNote:  T(ctx, "Counts are refreshed every few seconds."),
		TableLabel:  T(ctx, "Occurrences, newest first"),
		HeadID:      T(ctx, "Occurrence"), HeadDefinition: T(ctx, "Definition"), HeadRevision: T(ctx, "Revision"),
		HeadNode: T(ctx, "Node"), HeadStatus: T(ctx, "Status"), HeadAttempts: T(ctx, "Attempts"),
		HeadCreated: T(ctx, "Created"), HeadInstance: T(ctx, "Process instance"),
		Empty:     T(ctx, "No occurrence matches these filters."),
		NextLabel: T(ctx, "Next page"), FirstLabel: T(ctx, "First page"),
	}

	menus, _, err := c.menus.Get(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v.DefinitionOptions = []option{{Value: "", Label: T(ctx, "All definitions"), Selected: f.Definition == ""}}
	for _, key := range menus.definitions {
		v.DefinitionOptions = append(v.DefinitionOptions, option{Value: key, Label: key, Selected: key == f.Definition})
	}
	if f.Definition != "" && !slices.Contains(menus.definitions, f.Definition) {
		// Keep a shared link's filter visible, even for a key the menu does
		// not list (yet).
		v.DefinitionOptions = append(v.DefinitionOptions, option{Value: f.Definition, Label: f.Definition, Selected: true})
	}
	v.StatusOptions = []option{{Value: "", Label: T(ctx, "All statuses"), Selected: f.Status == ""}}
	for _, s := range occurrenceStatuses {
		v.StatusOptions = append(v.StatusOptions, option{Value: s, Label: statusLabel(ctx, s), Selected: s == f.Status})
	}
	v.ConsumerOptions = []option{{Value: "", Label: T(ctx, "All consumers"), Selected: f.Consumer == ""}}
	listed := false
	for _, cs := range menus.consumers {
		id := strconv.FormatInt(cs.id, 10)
		v.ConsumerOptions = append(v.ConsumerOptions, option{Value: id, Label: cs.name, Selected: id == f.Consumer})
		listed = listed || id == f.Consumer
	}
	if f.Consumer != "" && !listed {
		consumer := f.Consumer
		v.ConsumerOptions = append(v.ConsumerOptions, option{Value: consumer, Label: T(ctx, "consumer #%s", consumer), Selected: true})
	}

	if f.Definition != "" {
		key := f.Definition
		v.CountsScope = T(ctx, "Definition %s", key)
	} else {
		v.CountsScope = T(ctx, "All definitions")
	}
	if snap, err := counts(ctx, c.eng); err != nil {
		c.logger.Warn("console: counts unavailable", "err", err)
		v.CountsMissing = T(ctx, "Counts are unavailable right now.")
	} else {
		byStatus := snap.forDefinition(f.Definition)
		var total int64
		for _, s := range occurrenceStatuses {
			n := byStatus[s]
			total += n
			link := occurrenceFilter{Definition: f.Definition, Status: s}
			v.Counts = append(v.Counts, statusCount{Status: s, Label: statusLabel(ctx, s), Count: number(ctx, n),
				Href: link.href(), Current: s == f.Status})
		}
		v.CountsTotal = T(ctx, "%d occurrences", total)
	}

	if len(errs) == 0 {
		// One more than the page tells whether a next page exists.
		limit := ef.Limit
		ef.Limit = limit + 1
		occs, err := c.eng.ListOccurrences(ctx, ef)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		more := len(occs) > limit
		if more {
			occs = occs[:limit]
		}
		for _, o := range occs {
			v.Rows = append(v.Rows, occurrenceRowOf(ctx, o))
		}
		if more {
			next := f
			next.Before = occs[len(occs)-1].ID.String()
			v.NextHref = next.href()
		}
		if f.Before != "" {
			first := f
			first.Before = ""
			v.FirstHref = first.href()
		}
	}
	c.render(w, r, http.StatusOK, occurrenceListPage(v))
}

func occurrenceRowOf(ctx context.Context, o engine.Occurrence) occurrenceRow {
	return occurrenceRow{
		ID: o.ID.String(), Href: occurrenceHref(o.ID), Definition: o.Definition,
		DefinitionHref: revisionHref(o.Definition, o.Revision), Revision: strconv.Itoa(o.Revision), Node: o.Node,
		Status: o.Status, StatusLabel: statusLabel(ctx, o.Status), Attempts: T(ctx, "%d attempts", o.Attempts),
		Created: formatTime(ctx, o.CreatedAt), InstanceID: o.InstanceID.String(), InstanceHref: instanceHref(o.InstanceID),
	}
}

func occurrenceHref(id uuid.UUID) string { return basePath + "/occurrences/" + id.String() }

func instanceHref(id uuid.UUID) string { return basePath + "/instances/" + id.String() }

func definitionHref(key string) string { return basePath + "/definitions/" + url.PathEscape(key) }

// revisionHref links to one revision's section of its definition's page.
func revisionHref(key string, n int) string {
	return definitionHref(key) + "#revision-" + strconv.Itoa(n)
}
