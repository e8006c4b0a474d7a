package stream

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
)

// settleActions names the worker protocol's settling procedures as the
// REST pull routes' duration metric labels its actions.
var settleActions = map[string]string{
	workerv1connect.WorkerServiceCompleteProcedure: "complete",
	workerv1connect.WorkerServiceFailProcedure:     "fail",
	workerv1connect.WorkerServiceExtendProcedure:   "extend",
	workerv1connect.WorkerServiceDeferProcedure:    "defer",
	workerv1connect.WorkerServiceReleaseProcedure:  "release",
}

// SettlementObserver records how long a settling call took, by action
// (complete, fail, extend, defer, release) and result (ok, conflict,
// refused, throttled, unavailable, error, abandoned).
type SettlementObserver func(action, result string, took time.Duration)

// ObserveSettlements makes the settling calls report their durations to
// f, so that one metric times a settlement whichever surface it took (the
// REST pull routes' relais_pull_settle_duration_seconds). Call it before
// the service serves.
func (s *Service) ObserveSettlements(f SettlementObserver) { s.observe = f }

// timing times the settling calls for the SettlementObserver.
func (s *Service) timing() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			action, ok := settleActions[req.Spec().Procedure]
			if !ok || s.observe == nil {
				return next(ctx, req)
			}
			began := time.Now()
			res, err := next(ctx, req)
			if connect.CodeOf(err) == connect.CodeUnauthenticated {
				// As on the REST routes, whose timing sits behind the
				// token check: a call without a valid token settles
				// nothing.
				return res, err
			}
			s.observe(action, settleResult(err), time.Since(began))
			return res, err
		}
	})
}

// settleResult classifies a settling call's error as the REST routes
// classify theirs, from the code toConnect gave it.
func settleResult(err error) string {
	if err == nil {
		return "ok"
	}
	switch connect.CodeOf(err) {
	case connect.CodeCanceled, connect.CodeDeadlineExceeded:
		return "abandoned"
	case connect.CodeUnavailable:
		return "unavailable"
	case connect.CodeFailedPrecondition, connect.CodeAlreadyExists:
		return "conflict"
	case connect.CodeResourceExhausted:
		// Too many requests says when to come back; a message too large
		// does not.
		if p, ok := ProblemOf(err); ok && p.GetRetryAfter() != nil {
			return "throttled"
		}
		return "refused"
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
		return "error"
	}
	return "refused"
}
