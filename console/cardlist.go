package console

import (
	"context"
	"net/url"
)

// cardList is what an admins' list page says around its rows (see
// cardTable).
type cardList struct {
	Intro   string
	Caption string
	// TestID names the table for the tests (data-testid).
	TestID string
	Empty  string
	Pager  pagerView
	// Errors say why the page lists nothing: parameters it cannot read.
	Errors []string
}

// newCardList is a list with its texts and pager labels, nothing fetched
// yet.
func newCardList(ctx context.Context, testID, intro, caption, empty string, errs []string) cardList {
	return cardList{Intro: intro, Caption: caption, TestID: testID, Empty: empty, Pager: newPager(ctx), Errors: errs}
}

// onePage fetches a page of at most size rows, asking list for one more to
// learn whether another page follows.
func onePage[T any](size int, list func(limit int) ([]T, error)) (rows []T, more bool, err error) {
	rows, err = list(size + 1)
	if err != nil || len(rows) <= size {
		return rows, false, err
	}
	return rows[:size], true, nil
}

// linkPages sets the links of rows, a page of a list paged one way by a
// single cursor (param) that key gives for a row: the next page starts
// from the last row when more follow; any page but the first links back to
// it.
func linkPages[T any](l *cardList, path, param string, rows []T, more, first bool, key func(T) string) {
	if more && len(rows) > 0 {
		l.Pager.NextHref = path + "?" + url.Values{param: {key(rows[len(rows)-1])}}.Encode()
	}
	if !first {
		l.Pager.FirstHref = path
	}
}
