package stream

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
)

// watchFarewell bounds how long a Watch stream outlives its replica's
// drain when it has nothing to say (its last status was NOT_SERVING
// already): long enough for a status being sent to reach the client.
const watchFarewell = time.Second

// health reports the worker service as serving until its replica drains,
// and not while its replica cannot reach PostgreSQL or its writes stall
// (as /readyz says).
//
// It streams changes too (grpchealth.Watcher), for the clients that
// balance over replicas by watching them (gRPC's client-side health
// checking): a watch is told when PostgreSQL stops or starts answering and
// when its replica drains, and ends once it said NOT_SERVING for the
// drain, so that its client moves to another replica and the drain waits
// for no watch.
type health struct {
	closing <-chan struct{}
	// down is set while the replica's probe gets no answer from
	// PostgreSQL (see Service.SetDatabaseUp); downSince is when it was
	// set, in Unix nanoseconds.
	down      atomic.Bool
	downSince atomic.Int64
	// stalled is set while the replica's writes wait on commits that do
	// not end though reads answer (see Service.SetWritesStalled).
	stalled atomic.Bool

	mu       sync.Mutex
	watchers map[*func()]struct{}
	// wentDown is closed when the probe stops getting answers, and
	// replaced by an open one when it gets them again (under mu): the
	// streams wait on it to time their end (see Service.SetDatabaseUp).
	wentDown chan struct{}
}

var _ grpchealth.Watcher = (*health)(nil)

func newHealth(closing <-chan struct{}) *health {
	return &health{closing: closing, watchers: map[*func()]struct{}{}, wentDown: make(chan struct{})}
}

// SetDatabaseUp tells the health service whether PostgreSQL answers the
// replica's probe.
func (s *Service) SetDatabaseUp(up bool) {
	if !up {
		// Before down is set: a stream that reads down reads its start.
		s.health.downSince.CompareAndSwap(0, time.Now().UnixNano())
	}
	if s.health.down.Swap(!up) != !up {
		s.health.mu.Lock()
		if up {
			s.health.wentDown = make(chan struct{})
		} else {
			close(s.health.wentDown)
		}
		s.health.mu.Unlock()
		s.health.changed()
		if up {
			// The streams held their claims while it was gone, and no
			// notification need come now that it is back: without this
			// they claimed at their next keep-alive tick, up to 10 s
			// later (stream QA).
			s.reg.wakeAll()
		}
	}
	if up {
		s.health.downSince.Store(0)
	}
}

// SetWritesStalled tells the health service whether the replica's writes
// have waited on a commit past what /readyz allows while PostgreSQL still
// answers reads (a frozen WAL disk, a lock held by hand). Health says
// NOT_SERVING meanwhile, as /readyz says 503 "database writes stalled":
// a client balancing by gRPC health kept sending its work to a replica
// that load balancers had already left (SRE QA). The streams are not
// ended for it: they claim nothing new while their writes wait, and end
// by their own rules if the database stops answering.
func (s *Service) SetWritesStalled(stalled bool) {
	if s.health.stalled.Swap(stalled) != stalled {
		s.health.changed()
	}
}

// downSignal is closed once the replica's probe gets no answer from
// PostgreSQL (at once if it gets none now).
func (h *health) downSignal() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wentDown
}

// databaseDownFor is how long the replica's probe has had no answer from
// PostgreSQL; zero while it answers.
func (h *health) databaseDownFor() time.Duration {
	if !h.down.Load() {
		return 0
	}
	since := h.downSince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// whileAnswered returns ctx, cancelled with pgfault.ErrUnresponsive once
// the replica's probe gets no answer from PostgreSQL (at once if it gets
// none now), and the function that stops watching, which cancels it (once,
// however often called). A stream's setup runs statements that a database
// which hangs never answers: a Subscribe waited for it without end, where
// the REST routes are refused 503 (stream client QA). The loop, once
// running, has rules of its own (see databaseLostAfter).
func (h *health) whileAnswered(ctx context.Context) (context.Context, func()) {
	c, cancel := context.WithCancelCause(ctx)
	down := h.downSignal()
	done := make(chan struct{})
	go func() {
		select {
		case <-down:
			cancel(pgfault.ErrUnresponsive)
		case <-done:
		case <-c.Done():
		}
	}()
	return c, sync.OnceFunc(func() {
		close(done)
		cancel(nil)
	})
}

// changed tells every watch to check the status again.
func (h *health) changed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.watchers {
		(*f)()
	}
}

func knownService(name string) error {
	switch name {
	case "", workerv1connect.WorkerServiceName:
		return nil
	}
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", name))
}

// Check answers the status of the replica (service "") or of its worker
// service, which are the same.
func (h *health) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if err := knownService(req.Service); err != nil {
		return nil, err
	}
	select {
	case <-h.closing:
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	default:
	}
	if h.down.Load() || h.stalled.Load() {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// Watch calls onChange whenever the status may have changed, until stop.
func (h *health) Watch(_ context.Context, req *grpchealth.CheckRequest, onChange func()) (stop func(), err error) {
	if err := knownService(req.Service); err != nil {
		return nil, err
	}
	key := &onChange
	h.mu.Lock()
	h.watchers[key] = struct{}{}
	h.mu.Unlock()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-h.closing:
			onChange()
		case <-stopped:
		}
	}()
	return sync.OnceFunc(func() {
		close(stopped)
		h.mu.Lock()
		delete(h.watchers, key)
		h.mu.Unlock()
	}), nil
}

// endWatches ends each Watch stream once the replica drains: as soon as
// the stream sent a status after the drain began (NOT_SERVING), or
// watchFarewell after it began. The health handler ends a watch only when
// its context does, and an HTTP server's graceful shutdown waits for its
// handlers.
func (h *health) endWatches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+grpchealth.HealthV1ServiceName+"/Watch" {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-h.closing:
			case <-ctx.Done():
				return
			}
			t := time.NewTimer(watchFarewell)
			defer t.Stop()
			select {
			case <-t.C:
				cancel()
			case <-ctx.Done():
			}
		}()
		next.ServeHTTP(&farewellWriter{ResponseWriter: w, closing: h.closing, cancel: cancel}, r.WithContext(ctx))
	})
}

// farewellWriter ends its request (cancel) once it flushed a message
// written after the replica began draining: NOT_SERVING (a flush of the
// headers alone, or of a status written before, does not count).
type farewellWriter struct {
	http.ResponseWriter
	closing <-chan struct{}
	cancel  context.CancelFunc
	wrote   bool
}

func (w *farewellWriter) Write(p []byte) (int, error) {
	if len(p) > 0 && !w.wrote {
		select {
		case <-w.closing:
			w.wrote = true
		default:
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *farewellWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	if !w.wrote {
		return
	}
	select {
	case <-w.closing:
		w.cancel()
	default:
	}
}

func (w *farewellWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
