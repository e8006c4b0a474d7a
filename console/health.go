package console

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relais/relais/engine"
)

// definitionHealth is one definition's line on the health page.
type definitionHealth struct {
	Key, Href          string
	Open, OpenHref     string
	Held, HeldHref     string
	Failed, FailedHref string
	// Retrying counts the occurrences waiting out a retry delay;
	// RetryingTitle says when the soonest is due, RetryingNote in how long.
	Retrying, RetryingHref, RetryingTitle, RetryingNote string
	Lag, LagTitle, LagNote                              string
	LagLong                                             bool
	// NoWorker says that occurrences wait and no live worker serves the
	// definition: the lag only grows.
	NoWorker, WorkersHref            string
	Completed1h, Failed1h, ChartHref string
	Attention                        bool
}

// healthView is the health page: every definition at a glance.
type healthView struct {
	Chrome                                           chrome
	Intro, AsOf                                      string
	Retention                                        string
	Missing                                          string
	ChartLabel, ChartScope, ChartAllHref, ChartAll   string
	ChartUnknown                                     string
	Chart                                            chartView
	TableCaption                                     string
	HeadKey, HeadOpen, HeadHeld, HeadFailed, HeadLag string
	HeadRetrying                                     string
	HeadCompleted, HeadFailed1h                      string
	Rows                                             []definitionHealth
	Empty                                            string
	ChartTable                                       chartTable
	// Errors say why the page shows no figures: parameters it cannot
	// read.
	Errors []string
}

// chartBar is one bar of the chart.
type chartBar struct {
	X, Y, W, H string
	Class      string
	Title      string
}

// chartTick is one label of an axis.
type chartTick struct {
	X, Y, Label, Anchor string
}

// chartView is the last hour drawn as SVG bars: completions and failures
// per 5-minute bucket.
type chartView struct {
	Width, Height, ViewBox string
	Title, Desc            string
	AxisX1, AxisX2, AxisY  string
	Bars                   []chartBar
	Ticks                  []chartTick
	LegendOK, LegendBad    string
}

// chartTable is the chart's data as a table, for who cannot see it.
type chartTable struct {
	Summary, Caption                    string
	HeadSlot, HeadCompleted, HeadFailed string
	Rows                                [][3]string
}

// Chart geometry, in SVG user units.
const (
	chartW      = 720
	chartH      = 230
	chartLeft   = 52
	chartRight  = 8
	chartTop    = 12
	chartBottom = 34
)

// health is the operators' overview: per definition, what is open, held
// and failed, the queue lag (how long the oldest claimable occurrence has
// waited), and the last hour's completions and failures, drawn as a chart
// (all definitions, or the one chosen).
func (c *Console) health(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	scope := strings.TrimSpace(r.URL.Query().Get("definition"))
	v := healthView{
		Chrome: c.liveChrome(r, T(ctx, "Health"), "health"),
		Intro: T(ctx, "Each definition’s queue and incidents now, and what its workers finished in the last hour: occurrences that ended completed or failed. An occurrence retried since counts where it ends next; a failed attempt with attempts left counts under Waiting for a retry until its next attempt is due.") + " " +
			// Two columns of one incident (operator QA: read as 24 problems).
			T(ctx, "A held instance’s failed occurrence counts in both Held instances and Failed."),
		ChartLabel:   T(ctx, "Completions and failures, last hour"),
		TableCaption: T(ctx, "Definitions, those needing attention first"),
		HeadKey:      T(ctx, "Definition"), HeadOpen: T(ctx, "Open"), HeadHeld: T(ctx, "Held instances"),
		HeadFailed: T(ctx, "Failed"), HeadLag: T(ctx, "Oldest claimable waits"), HeadRetrying: T(ctx, "Waiting for a retry"),
		HeadCompleted: T(ctx, "Completed, last hour"), HeadFailed1h: T(ctx, "Failed, last hour"),
		Empty:  T(ctx, "No definition has occurrences yet."),
		Errors: queryProblems(ctx, r.URL.RawQuery, "definition"),
	}
	retention, noted := c.eng.Retention()
	v.Retention = retentionText(ctx, retention, noted)
	if len(v.Errors) > 0 {
		c.render(w, r, http.StatusBadRequest, healthPage(v))
		return
	}
	snap, countsAt, err := c.counts(ctx)
	if err != nil {
		v.Missing = c.countsMissing(ctx, err)
	}
	h, healthAt, err := c.eng.FreshHealth(ctx)
	if err != nil {
		c.logger.Warn("console: health unavailable", "err", err)
		v.Missing = T(ctx, "Counts are unavailable right now.")
		c.render(w, r, http.StatusOK, healthPage(v))
		return
	}
	// The older of the two reads dates the page; missing counts date nothing.
	asOf := formatTime(ctx, healthAt)
	if !countsAt.IsZero() && countsAt.Before(healthAt) {
		asOf = formatTime(ctx, countsAt)
	}
	v.AsOf = T(ctx, "As of %s (%s); recounted every few seconds, shown anew at each reload.", asOf.Text, asOf.Rel)

	keys := map[string]bool{}
	for k := range snap {
		keys[k] = true
	}
	for k := range h.Definitions {
		keys[k] = true
	}
	now := prefsOf(ctx).now
	// Who serves what, for the definitions whose work waits: one read of
	// the worker catalog (a few hundred rows at most).
	live, liveErr := c.eng.LiveWorkersByDefinition(ctx)
	if liveErr != nil {
		c.logger.Warn("console: live workers unavailable", "err", liveErr)
	}
	untaken, err := c.eng.RevisionsWithoutTaker(ctx)
	if err != nil {
		c.logger.Warn("console: revisions without taker unavailable", "err", err)
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		byStatus := snap[key]
		dh := h.Definitions[key]
		open := byStatus[engine.StatusAvailable] + byStatus[engine.StatusReserved] + byStatus[engine.StatusDeferred]
		row := definitionHealth{Key: key, Href: occurrenceFilter{Definition: key}.href(),
			Open: number(ctx, open), OpenHref: openHref(key, byStatus),
			Failed: number(ctx, byStatus[engine.StatusFailed]), FailedHref: occurrenceFilter{Definition: key, Status: engine.StatusFailed}.href(),
			Held: number(ctx, 0), HeldHref: instanceFilter{Status: engine.InstanceHeld, HeldAt: key}.href(),
			Retrying:  number(ctx, 0),
			Lag:       "—",
			ChartHref: healthPath + "?definition=" + key + "#chart",
		}
		if dh != nil {
			row.Held = number(ctx, dh.Held)
			row.Attention = dh.Held > 0
			if dh.RetryDue != nil {
				// Failures under way that the last hour does not count
				// yet (an outage retried with backoff): their instances,
				// from which to bring the retries forward once the
				// service is back.
				row.Retrying = number(ctx, dh.Retrying)
				row.RetryingHref = instanceFilter{RetryingAt: key}.href()
				due := formatTime(ctx, *dh.RetryDue)
				row.RetryingTitle, row.RetryingNote = T(ctx, "the soonest due %s", due.Text), nextAttempt(ctx, *dh.RetryDue)
				row.Attention = true
			}
			var done, failed int64
			for _, b := range dh.Buckets {
				done += b.Completed
				failed += b.Failed
			}
			row.Completed1h, row.Failed1h = number(ctx, done), number(ctx, failed)
			row.Attention = row.Attention || failed > 0
			if dh.ClaimableSince != nil {
				lag := max(now.Sub(*dh.ClaimableSince), 0)
				row.Lag = approxDuration(ctx, lag)
				since := formatTime(ctx, *dh.ClaimableSince).Text
				row.LagTitle = T(ctx, "claimable since %s", since)
				row.LagLong = lag > 5*time.Minute
				if row.LagLong {
					// Said in words too: red alone is lost on some eyes.
					row.LagNote = T(ctx, "long wait")
				}
				row.Attention = row.Attention || row.LagLong
				if liveErr == nil && len(live[key]) == 0 {
					// Said in words, as the long wait is; only of a definition
					// a process pulls (push work waits for Relais's calls).
					if use, err := c.eng.DefinitionUse(ctx, key); err == nil && use.Pulled {
						row.NoWorker, row.WorkersHref = T(ctx, "no worker"), workersHref(key)
						row.Attention = true
					}
				} else if text := untakenText(ctx, untaken[key], true); text != "" {
					// Workers serve the definition, but not the revision
					// a process version pinned: its work waits all the same.
					row.NoWorker, row.WorkersHref = text, workersHref(key)
					row.Attention = true
				}
			}
		} else {
			row.Completed1h, row.Failed1h = number(ctx, 0), number(ctx, 0)
		}
		v.Rows = append(v.Rows, row)
	}
	slices.SortStableFunc(v.Rows, func(a, b definitionHealth) int {
		switch {
		case a.Attention == b.Attention:
			return 0
		case a.Attention:
			return -1
		}
		return 1
	})

	var buckets [engine.HealthBuckets]engine.HealthBucket
	if scope != "" {
		if dh := h.Definitions[scope]; dh != nil {
			buckets = dh.Buckets
		}
		key := scope
		v.ChartScope = T(ctx, "Definition %s", key)
		v.ChartAllHref, v.ChartAll = healthPath+"#chart", T(ctx, "Show all definitions")
		if !keys[key] {
			// A mistyped key would otherwise draw an empty hour, as for a
			// definition whose workers are idle: refused as the lists
			// refuse it; a definition without occurrences yet is said so.
			unknown, err := c.unknownOccurrenceKeys(ctx, engine.OccurrenceFilter{Definition: key})
			if err != nil {
				c.serverError(w, r, err)
				return
			}
			v.Errors = unknown.Texts
			if len(v.Errors) == 0 {
				v.ChartUnknown = T(ctx, "Definition %s has no occurrence yet.", key)
			}
		}
	} else {
		for _, dh := range h.Definitions {
			for i, b := range dh.Buckets {
				buckets[i].Completed += b.Completed
				buckets[i].Failed += b.Failed
			}
		}
		v.ChartScope = T(ctx, "All definitions")
	}
	v.Chart, v.ChartTable = chartOf(ctx, buckets, h.BucketsEnd, v.ChartScope)
	c.render(w, r, listStatus(v.Errors), healthPage(v))
}

// chartOf draws the last hour's buckets (oldest first, the last ending at
// end) as grouped bars, with a table of the same numbers.
func chartOf(ctx context.Context, buckets [engine.HealthBuckets]engine.HealthBucket, end time.Time, scope string) (chartView, chartTable) {
	var top, done, failed int64 = 1, 0, 0
	for _, b := range buckets {
		top = max(top, b.Completed, b.Failed)
		done += b.Completed
		failed += b.Failed
	}
	plotW, plotH := chartW-chartLeft-chartRight, chartH-chartTop-chartBottom
	slot := plotW / engine.HealthBuckets
	barW := (slot - 10) / 2
	base := chartTop + plotH
	completed, failures := completedCount(ctx, done), failedCount(ctx, failed)
	cv := chartView{Width: strconv.Itoa(chartW), Height: strconv.Itoa(chartH), ViewBox: "0 0 " + strconv.Itoa(chartW) + " " + strconv.Itoa(chartH),
		Title:  T(ctx, "Completions and failures per 5 minutes, last hour: %s", scope),
		Desc:   T(ctx, "In the last hour: %s, %s. The table after the chart gives each 5-minute slot.", completed, failures),
		AxisX1: strconv.Itoa(chartLeft), AxisX2: strconv.Itoa(chartW - chartRight), AxisY: strconv.Itoa(base),
		LegendOK:  T(ctx, "Completed"),
		LegendBad: T(ctx, "Failed"),
	}
	ct := chartTable{Summary: T(ctx, "The chart’s numbers"), Caption: T(ctx, "Completions and failures per 5-minute slot, oldest first"),
		HeadSlot: T(ctx, "Slot"), HeadCompleted: T(ctx, "Completed"), HeadFailed: T(ctx, "Failed")}
	scale := func(n int64) int { return int(float64(plotH) * float64(n) / float64(top)) }
	for i, b := range buckets {
		from := end.Add(-time.Duration(engine.HealthBuckets-i) * 5 * time.Minute)
		to := from.Add(5 * time.Minute)
		first, last := clockTime(ctx, from), clockTime(ctx, to)
		slotLabel := T(ctx, "%s–%s", first, last)
		x := chartLeft + i*slot + 4
		for j, bar := range []struct {
			n     int64
			class string
			what  string
		}{{b.Completed, "bar-ok", completedCount(ctx, b.Completed)}, {b.Failed, "bar-bad", failedCount(ctx, b.Failed)}} {
			h := scale(bar.n)
			if bar.n > 0 && h < 2 {
				h = 2 // a non-zero count stays visible
			}
			cv.Bars = append(cv.Bars, chartBar{X: strconv.Itoa(x + j*(barW+2)), Y: strconv.Itoa(base - h), W: strconv.Itoa(barW),
				H: strconv.Itoa(h), Class: bar.class, Title: T(ctx, "%s: %s", slotLabel, bar.what)})
		}
		if i%3 == 0 || i == engine.HealthBuckets-1 {
			label := from.In(prefsOf(ctx).location()).Format("15:04")
			if i == engine.HealthBuckets-1 {
				label = to.In(prefsOf(ctx).location()).Format("15:04")
				cv.Ticks = append(cv.Ticks, chartTick{X: strconv.Itoa(chartLeft + plotW), Y: strconv.Itoa(base + 18), Label: label, Anchor: "end"})
			} else {
				cv.Ticks = append(cv.Ticks, chartTick{X: strconv.Itoa(chartLeft + i*slot), Y: strconv.Itoa(base + 18), Label: label, Anchor: "start"})
			}
		}
		ct.Rows = append(ct.Rows, [3]string{slotLabel, number(ctx, b.Completed), number(ctx, b.Failed)})
	}
	for _, n := range []int64{0, top / 2, top} {
		if n == top/2 && (top < 2) {
			continue
		}
		y := base - scale(n)
		cv.Ticks = append(cv.Ticks, chartTick{X: strconv.Itoa(chartLeft - 6), Y: strconv.Itoa(y + 4), Label: number(ctx, n), Anchor: "end"})
	}
	return cv, ct
}

// completedCount is "3 completed", its noun agreeing with n: one message
// selects the plural form (a sentence holding two counts cannot).
func completedCount(ctx context.Context, n int64) string {
	return T(ctx, "%d completed", n)
}

// failedCount is "3 failed", its words agreeing with n.
func failedCount(ctx context.Context, n int64) string {
	return T(ctx, "%d failed", n)
}

// workersHref lists the live workers of a definition.
func workersHref(key string) string {
	return workersPath + "?" + url.Values{"definition": {key}}.Encode()
}

// openHref links a definition's open count to what it counts: the list of
// its occurrences in that status when all are in one (available, say),
// else its whole list, whose counts by status show each (the list filters
// one status at a time).
func openHref(key string, byStatus map[string]int64) string {
	only := ""
	for _, st := range []string{engine.StatusAvailable, engine.StatusReserved, engine.StatusDeferred} {
		if byStatus[st] > 0 {
			if only != "" {
				return occurrenceFilter{Definition: key}.href()
			}
			only = st
		}
	}
	return occurrenceFilter{Definition: key, Status: only}.href()
}

// retentionText says how long ended instances are kept, as this replica
// applies it (empty before its first note): the health page is where an
// operator looks for the deployment's settings.
func retentionText(ctx context.Context, r engine.Retention, ok bool) string {
	switch {
	case !ok:
		return ""
	case r.Applied <= 0 && r.Configured > 0:
		return T(ctx, "Retention: ended instances are kept forever, another replica’s RELAIS_RETENTION.")
	case r.Applied <= 0:
		return T(ctx, "Retention: ended instances are kept forever (RELAIS_RETENTION).")
	case r.Applied != r.Configured:
		return T(ctx, "Retention: ended instances are deleted with their occurrences %s after they end, another replica’s longer RELAIS_RETENTION.", formatDuration(ctx, r.Applied))
	}
	return T(ctx, "Retention: ended instances are deleted with their occurrences %s after they end (RELAIS_RETENTION).", formatDuration(ctx, r.Applied))
}
