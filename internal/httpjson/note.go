package httpjson

import "context"

// problemNote is where the problem code a request was answered with is
// written down, for the request log and the metrics that the middleware
// around the handlers keeps: a status alone does not tell a lost database
// (503 database_unavailable) from a missing data key (503
// encryption_unavailable).
type problemNote struct{ code string }

type problemNoteKey struct{}

// WithProblemNote returns ctx with room for the problem code of the
// request's answer, and a function that reads it ("" when the answer was
// no problem, or no writer noted it). WriteError notes every problem it
// writes; a surface that answers a problem its own way (the console's
// error pages) calls NoteProblem.
func WithProblemNote(ctx context.Context) (context.Context, func() string) {
	n := &problemNote{}
	return context.WithValue(ctx, problemNoteKey{}, n), func() string { return n.code }
}

// NoteProblem records code as the problem the request is answered with,
// when the request carries a note (WithProblemNote); otherwise it does
// nothing.
func NoteProblem(ctx context.Context, code string) {
	if n, ok := ctx.Value(problemNoteKey{}).(*problemNote); ok {
		n.code = code
	}
}
