package console

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// page is where a keyset-paginated list stands, as its URL says: before an
// id (a next page), after one (a previous page), or at the start; from is
// the position of its first row, carried in the links only to show the
// range ("51–100"): the cursor alone decides what is listed.
type page struct {
	Before, After, From string
}

func pageFromQuery(q url.Values) page {
	return page{Before: q.Get("before"), After: q.Get("after"), From: q.Get("from")}
}

// set writes the page's parameters into q.
func (p page) set(q url.Values) {
	for _, kv := range [][2]string{{"before", p.Before}, {"after", p.After}, {"from", p.From}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		} else {
			q.Del(kv[0])
		}
	}
}

// cursors parses the page's cursors; a problem is a translated message.
func (p page) cursors(ctx context.Context) (before, after *uuid.UUID, errs []string) {
	for _, c := range []struct {
		s   string
		dst **uuid.UUID
	}{{p.Before, &before}, {p.After, &after}} {
		if c.s == "" {
			continue
		}
		id, err := uuid.Parse(c.s)
		if err != nil {
			errs = append(errs, invalidCursor(ctx))
			continue
		}
		*c.dst = &id
	}
	// The first row's position comes with a cursor, as a whole number: a
	// mangled one would show a range that is not the page's.
	if p.From != "" && len(errs) == 0 {
		if n, err := strconv.Atoi(p.From); err != nil || n < 1 || p.Before == "" && p.After == "" {
			errs = append(errs, invalidCursor(ctx))
		}
	}
	return before, after, errs
}

// from is the 1-based position of the page's first row, 0 when unknown
// (a shared link to a later page without it).
func (p page) from() int {
	if p.Before == "" && p.After == "" {
		return 1
	}
	n, err := strconv.Atoi(p.From)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// pagerView is the links and range under a list.
type pagerView struct {
	Label                 string
	Range                 string
	PrevLabel, PrevHref   string
	NextLabel, NextHref   string
	FirstLabel, FirstHref string
}

// newPager is a pager with its labels and no link yet.
func newPager(ctx context.Context) pagerView {
	return pagerView{Label: T(ctx, "Pages"), PrevLabel: T(ctx, "Previous page"), NextLabel: T(ctx, "Next page"), FirstLabel: T(ctx, "First page")}
}

// keysetPage works out the links of a page of n rows (ids newest first)
// fetched with one row more than limit to know whether more follow:
// moreAfter says rows older than the page exist, moreBefore that newer
// ones do. href makes a link of the list's other parameters and a page.
func keysetPage(ctx context.Context, cur page, ids []string, limit int, moreOlder, moreNewer bool, href func(page) string) pagerView {
	v := newPager(ctx)
	if len(ids) == 0 {
		if cur.Before != "" || cur.After != "" {
			v.FirstHref = href(page{})
		}
		return v
	}
	from := cur.from()
	if from > 0 {
		first, last := number(ctx, int64(from)), number(ctx, int64(from+len(ids)-1))
		if len(ids) == 1 {
			v.Range = T(ctx, "Row %s", first)
		} else {
			v.Range = T(ctx, "Rows %s–%s", first, last)
		}
	}
	if moreOlder {
		next := page{Before: ids[len(ids)-1]}
		if from > 0 {
			next.From = strconv.Itoa(from + len(ids))
		}
		v.NextHref = href(next)
	}
	if moreNewer {
		prev := page{After: ids[0]}
		if from > limit+1 {
			prev.From = strconv.Itoa(from - limit)
		} else if from > 0 {
			prev.From = "1"
		}
		v.PrevHref = href(prev)
		if from != limit+1 {
			// Two pages or more from the start (or unknown): a way home.
			v.FirstHref = href(page{})
		}
	}
	return v
}

// dayBounds turns the date inputs of a window ("2026-12-01", inclusive
// days in the operator's zone) into [after, before) instants; a problem is
// a translated message naming the field.
func dayBounds(ctx context.Context, fromDay, toDay, label string) (after, before *time.Time, errs []string) {
	loc := prefsOf(ctx).location()
	parse := func(s string) (*time.Time, bool) {
		if s == "" {
			return nil, true
		}
		t, err := time.ParseInLocation(time.DateOnly, s, loc)
		if err != nil {
			return nil, false
		}
		return &t, true
	}
	a, ok1 := parse(fromDay)
	b, ok2 := parse(toDay)
	if !ok1 || !ok2 {
		errs = append(errs, T(ctx, "%s: a date is written 2026-12-01.", label))
		return nil, nil, errs
	}
	if b != nil {
		end := b.AddDate(0, 0, 1) // the whole last day
		b = &end
	}
	if a != nil && b != nil && !a.Before(*b) {
		errs = append(errs, T(ctx, "%s: the first day comes after the last.", label))
	}
	return a, b, errs
}

// filterProblems are the filters of a list that could not be applied:
// what to say, and the query parameters they are about, whose fields the
// form marks invalid and ties to the message (a screen reader learns
// which field is wrong from the field itself).
type filterProblems struct {
	Texts  []string
	Params map[string]bool
}

// add records a problem about params (none: about no field).
func (p *filterProblems) add(text string, params ...string) {
	p.Texts = append(p.Texts, text)
	for _, name := range params {
		if p.Params == nil {
			p.Params = map[string]bool{}
		}
		p.Params[name] = true
	}
}

// addAll records texts, each about params.
func (p *filterProblems) addAll(texts []string, params ...string) {
	for _, t := range texts {
		p.add(t, params...)
	}
}
