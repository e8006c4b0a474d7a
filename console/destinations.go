package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/relais/relais/engine"
)

// destinationsPath is the admins' page of push destinations.
const destinationsPath = basePath + "/destinations"

// destinationsPageSize is the destination list's page size.
const destinationsPageSize = 50

// destinationRow is one push destination of the list: where calls go, the
// URL's query values and the headers' values masked, as the API shows it.
type destinationRow struct {
	Name    string
	URL     string
	Headers string
	// Signed says its calls are signed; "" when they are not.
	Signed  string
	Timeout string
	Updated timeView
	// Calls lists the push occurrences calling it.
	Calls string
}

// destinationListView is the destinations page.
type destinationListView struct {
	Chrome                                                   chrome
	List                                                     cardList
	HeadName, HeadURL, HeadHeaders, HeadTimeout, HeadUpdated string
	HeadCalls, CallsLink, NoHeader                           string
	// Masked is what a screen reader says for a query value the URL
	// masks (***, which it read "star star star").
	Masked string
	Rows   []destinationRow
}

// destinationList lists the push destinations by name: the console's view
// of GET /api/v1/destinations, for admins (who alone manage them in the
// API).
func (c *Console) destinationList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	after := r.URL.Query().Get("after")
	errs := queryProblems(ctx, r.URL.RawQuery, "after")
	if after != "" && !engine.IsDestinationName(after) {
		errs = append(errs, invalidCursor(ctx))
	}
	empty := T(ctx, "No destination yet.")
	if after != "" {
		empty = T(ctx, "No more destinations.")
	}
	v := destinationListView{
		Chrome: c.chrome(r, T(ctx, "Destinations"), "destinations"),
		List: newCardList(ctx, "destinations",
			T(ctx, "The HTTP endpoints push nodes call. Values of the URL's query and of the headers, and signing secrets, are sealed and never shown. Create and change destinations with relais apply (kind: Destination documents) or through the API (/api/v1/destinations), which also deletes them."),
			T(ctx, "Destinations by name"), empty, errs),
		Masked:   T(ctx, "masked value"),
		HeadName: T(ctx, "Name"), HeadURL: T(ctx, "URL"), HeadHeaders: T(ctx, "Headers sent"), HeadTimeout: T(ctx, "Longest timeout"),
		HeadUpdated: T(ctx, "Last changed"),
		NoHeader:    T(ctx, "no header"),
		HeadCalls:   T(ctx, "Calls"), CallsLink: T(ctx, "Its calls"),
	}
	if len(errs) > 0 {
		c.render(w, r, http.StatusBadRequest, destinationListPage(v))
		return
	}
	dests, more, err := onePage(destinationsPageSize, func(limit int) ([]engine.Destination, error) {
		return c.eng.ListDestinations(ctx, after, limit)
	})
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, d := range dests {
		row := destinationRow{Name: d.Name, URL: d.URL, Headers: strings.Join(d.HeaderNames, ", "),
			Timeout: formatDuration(ctx, d.MaxTimeout), Updated: formatTime(ctx, d.UpdatedAt),
			Calls: homePath + "?" + url.Values{"destination": {d.Name}}.Encode()}
		if d.Signed {
			row.Signed = T(ctx, "Calls signed (Relais-Signature)")
		}
		v.Rows = append(v.Rows, row)
	}
	linkPages(&v.List, destinationsPath, "after", dests, more, after == "", func(d engine.Destination) string { return d.Name })
	c.render(w, r, http.StatusOK, destinationListPage(v))
}
