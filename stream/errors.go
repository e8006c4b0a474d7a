package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/pgfault"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
)

// codes maps the kinds of Relais errors to gRPC/Connect codes, as the REST
// error writer maps them to HTTP statuses: the Relais code travels in the
// Problem detail.
var codes = map[fault.Kind]connect.Code{
	fault.BadRequest:         connect.CodeInvalidArgument,
	fault.Unauthorized:       connect.CodeUnauthenticated,
	fault.Forbidden:          connect.CodePermissionDenied,
	fault.NotFound:           connect.CodeNotFound,
	fault.MethodNotAllowed:   connect.CodeUnimplemented,
	fault.Conflict:           connect.CodeFailedPrecondition,
	fault.TooLarge:           connect.CodeResourceExhausted,
	fault.Unprocessable:      connect.CodeInvalidArgument,
	fault.TooManyRequests:    connect.CodeResourceExhausted,
	fault.Unavailable:        connect.CodeUnavailable,
	fault.Timeout:            connect.CodeDeadlineExceeded,
	fault.PreconditionFailed: connect.CodeFailedPrecondition,
}

// CodeOf returns the gRPC/Connect code of a fault kind.
func CodeOf(k fault.Kind) connect.Code {
	if c, ok := codes[k]; ok {
		return c
	}
	return connect.CodeInternal
}

// toConnect turns an error of the engine or of this package into a
// connect error carrying a Problem. Internal errors are logged with their
// cause and answered with a generic detail, as REST does.
func toConnect(ctx context.Context, logger *slog.Logger, procedure string, err error) error {
	if err == nil {
		return nil
	}
	if cut := pgfault.CutShort(ctx); cut != nil {
		// The replica cut the call short: PostgreSQL stopped answering.
		err = cut
	}
	return connectError(ctx, logger, procedure, err)
}

// connectError is toConnect for an error already told from a call cut
// short (refuseSetup words that one its own way).
func connectError(ctx context.Context, logger *slog.Logger, procedure string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	fe, ok := fault.As(err)
	if !ok || fe.Kind == fault.Internal {
		if ctx.Err() != nil {
			// The client left or the call timed out: not a server error.
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		logger.ErrorContext(ctx, "worker protocol call failed", "procedure", procedure, "err", err)
		fe = fault.New(fault.Internal, "internal", "an internal error occurred; it was logged")
	}
	// The request log and relais_database_unavailable_total read the code
	// as they do a REST problem's, and the outage's line counts the call.
	httpjson.NoteProblem(ctx, fe.Code)
	httpjson.LogUnavailable(ctx, logger, fe, "procedure", procedure)
	return problemError(protoDurations(fe))
}

// cutShort answers a call the replica cut short (PostgreSQL stopped
// answering its probe: internal/server's gate cancelled the call's
// context, maybe before it began) as toConnect does, 503's code,
// unavailable: connect itself answers a call whose context is done before
// its handler runs with the bare context error, which a client reads as
// its own cancellation (CANCELLED, which gRPC retry policies do not
// retry) and the settle metric as an internal error.
func (s *Service) cutShort() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			var ce *connect.Error
			if err != nil && !errors.As(err, &ce) && pgfault.CutShort(ctx) != nil {
				err = toConnect(ctx, s.logger, req.Spec().Procedure, err)
			}
			return res, err
		}
	})
}

// durationFields are the members of the worker protocol that are
// protobuf Durations.
var durationFields = map[string]bool{"lock_duration": true, "retry_delay": true}

// isoDurationRE finds an ISO-8601 duration as the engine writes bounds.
var isoDurationRE = regexp.MustCompile(`\bP(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?\b`)

// protoDurations writes the bounds of fe's duration members as the worker
// protocol spells them ("600s"), not as the engine does for the JSON API
// (PT10M): a gRPC client sending the latter is refused.
func protoDurations(fe *fault.Error) *fault.Error {
	field, _ := fe.Extra["field"].(string)
	rewrite := func(msg string) string {
		return isoDurationRE.ReplaceAllStringFunc(msg, protoDuration)
	}
	out := *fe
	if durationFields[field] {
		out.Detail = rewrite(fe.Detail)
	}
	out.Errors = make([]fault.FieldError, len(fe.Errors))
	for i, e := range fe.Errors {
		if durationFields[strings.TrimPrefix(e.Path, "/")] {
			e.Message = rewrite(e.Message)
		}
		out.Errors[i] = e
	}
	return &out
}

// boundOf is the member and ceiling a bound_exceeded refusal names, the
// ceiling as the protocol writes that member: a duration member's in
// seconds ("600s", a Duration's JSON), not as REST's ISO 8601 (PT10M).
func boundOf(fe *fault.Error) (field, ceiling string) {
	field, _ = fe.Extra["field"].(string)
	c, ok := fe.Extra["ceiling"]
	if field == "" || !ok {
		return "", ""
	}
	ceiling = fmt.Sprint(c)
	if durationFields[field] {
		ceiling = protoDuration(ceiling)
	}
	return field, ceiling
}

// protoDuration is an ISO 8601 duration (PT10M) as the worker protocol
// writes one, a Duration's JSON ("600s"); anything else as it is.
func protoDuration(iso string) string {
	d, err := isoduration.Parse(iso)
	if err != nil {
		return iso
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// problemError is fe as a connect error with its Problem detail.
func problemError(fe *fault.Error) *connect.Error {
	ce := connect.NewError(CodeOf(fe.Kind), errors.New(statusMessage(fe)))
	p := &workerv1.Problem{Code: fe.Code, Detail: fe.Detail}
	for _, e := range fe.Errors {
		p.Errors = append(p.Errors, &workerv1.FieldError{Path: e.Path, Message: e.Message})
	}
	if fe.RetryAfter > 0 {
		p.RetryAfter = durationpb.New(fe.RetryAfter)
	}
	p.Field, p.Ceiling = boundOf(fe)
	if d, err := connect.NewErrorDetail(p); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

// statusMessage is the gRPC status message of fe: its detail, and its
// first field error when it has some. A client that logs the status alone
// (most gRPC stacks do) read "the outputs violate revision 1 of
// loans.check_credit: 3 problem(s)" without a pointer (Zeebe-user QA);
// every one stays in the Problem detail.
func statusMessage(fe *fault.Error) string {
	if len(fe.Errors) == 0 {
		return fe.Detail
	}
	first := fe.Errors[0]
	if len(fe.Errors) == 1 {
		return fe.Detail + "; at " + first.Path + ": " + first.Message
	}
	return fe.Detail + "; first at " + first.Path + ": " + first.Message + fmt.Sprintf(" (and %d more in the Problem detail)", len(fe.Errors)-1)
}

// ProblemOf returns the Problem detail of a connect error, if it has one.
func ProblemOf(err error) (*workerv1.Problem, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil, false
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if p, ok := v.(*workerv1.Problem); ok {
				return p, true
			}
		}
	}
	return nil, false
}

// invalidDuration is the refusal of a Duration that is none: nanos past
// ±999,999,999 or of the other sign than seconds (CheckValid), which a
// bound's message ("must be at least 1s") would misexplain. Nil when d is
// a valid Duration.
func invalidDuration(path string, d *durationpb.Duration) *fault.Error {
	if d.CheckValid() == nil {
		return nil
	}
	return fault.New(fault.BadRequest, "invalid_request", "%s is not a valid Duration", path[1:]).
		WithErrors([]fault.FieldError{{Path: path, Message: "is not a valid Duration: nanos must be within ±999,999,999 and have the sign of seconds"}})
}
