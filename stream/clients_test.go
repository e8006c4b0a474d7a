package stream_test

// Three real clients of the worker protocol, behind one small interface so
// that each scenario runs with each: a google.golang.org/grpc client over
// cleartext HTTP/2, a Connect client over HTTP/1.1, and a gRPC-Web client
// (connect-go's) over HTTP/1.1.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
	"github.com/relais/relais/stream"
)

// TestMain fails the run when a stream, a client or a replica leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate, func() error { return goleak.Find() })
}

// client speaks the worker protocol one way.
type client struct {
	name string
	// connect-go, with the Connect protocol or gRPC-Web
	http *http.Client
	opts []connect.ClientOption
	// google.golang.org/grpc
	conn *grpc.ClientConn
	url  string
}

// protocols are the clients every scenario runs with.
var protocols = []string{"grpc", "connect", "grpcweb"}

// newClient returns a client of kind to the replica at url, closed when
// the test ends.
func newClient(t testing.TB, kind, url string) *client {
	t.Helper()
	c := &client{name: kind, url: url}
	switch kind {
	case "grpc":
		conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		c.conn = conn
	case "connect", "grpcweb":
		// HTTP/1.1 only: a transport without HTTP/2.
		tr := &http.Transport{}
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP1(true)
		t.Cleanup(tr.CloseIdleConnections)
		c.http = &http.Client{Transport: tr}
		if kind == "grpcweb" {
			c.opts = append(c.opts, connect.WithGRPCWeb())
		}
	default:
		t.Fatalf("unknown client %s", kind)
	}
	return c
}

// call makes a unary call with the consumer token as metadata.
func call[Req, Res any](ctx context.Context, c *client, token, procedure string, req *Req) (*Res, error) {
	if c.conn != nil {
		res := new(Res)
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		if err := c.conn.Invoke(ctx, procedure, req, res); err != nil {
			return nil, err
		}
		return res, nil
	}
	r := connect.NewRequest(req)
	if token != "" {
		r.Header().Set("Authorization", "Bearer "+token)
	}
	res, err := connect.NewClient[Req, Res](c.http, c.url+procedure, c.opts...).CallUnary(ctx, r)
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// events is an open Subscribe stream.
type events interface {
	recv() (*workerv1.WorkerEvent, error)
}

type grpcEvents struct{ s grpc.ClientStream }

func (e grpcEvents) recv() (*workerv1.WorkerEvent, error) {
	ev := new(workerv1.WorkerEvent)
	return ev, e.s.RecvMsg(ev)
}

type connectEvents struct {
	s *connect.ServerStreamForClient[workerv1.WorkerEvent]
}

func (e connectEvents) recv() (*workerv1.WorkerEvent, error) {
	if e.s.Receive() {
		return e.s.Msg(), nil
	}
	if err := e.s.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("stream ended without an error")
}

// subscribe opens a stream; it ends with ctx.
func (c *client) subscribe(ctx context.Context, token string, req *workerv1.SubscribeRequest) (events, error) {
	if c.conn != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		s, err := c.conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Subscribe", ServerStreams: true}, workerv1connect.WorkerServiceSubscribeProcedure)
		if err != nil {
			return nil, err
		}
		if err := s.SendMsg(req); err != nil {
			return nil, err
		}
		if err := s.CloseSend(); err != nil {
			return nil, err
		}
		return grpcEvents{s}, nil
	}
	r := connect.NewRequest(req)
	if token != "" {
		r.Header().Set("Authorization", "Bearer "+token)
	}
	s, err := workerv1connect.NewWorkerServiceClient(c.http, c.url, c.opts...).Subscribe(ctx, r)
	if err != nil {
		return nil, err
	}
	return connectEvents{s}, nil
}

// refusal is a call's error as a code ("invalid_argument") and its
// Relais Problem, whichever client made it.
func refusal(err error) (string, *workerv1.Problem) {
	if err == nil {
		return "ok", nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != 0 {
		code := connect.Code(st.Code()).String()
		for _, d := range st.Details() {
			if p, ok := d.(*workerv1.Problem); ok {
				return code, p
			}
		}
		return code, nil
	}
	p, _ := stream.ProblemOf(err)
	return connect.CodeOf(err).String(), p
}

// wantRefusal fails unless err has the code and problem code.
func wantRefusal(t testing.TB, what string, err error, code, problem string) *workerv1.Problem {
	t.Helper()
	gotCode, p := refusal(err)
	gotProblem := ""
	if p != nil {
		gotProblem = p.GetCode()
	}
	if gotCode != code || gotProblem != problem {
		t.Fatalf("%s: %s / %q (%v), want %s / %q", what, gotCode, gotProblem, err, code, problem)
	}
	return p
}

// stream is a subscription with its first heartbeat read, whose events a
// goroutine reads into a channel.
type subscription struct {
	t      testing.TB
	c      *client
	token  string
	id     string // the stream id of the first heartbeat
	first  *workerv1.Heartbeat
	events chan *workerv1.WorkerEvent
	ended  chan error
	cancel context.CancelFunc
	done   chan struct{}
	// silent stops acknowledging heartbeats.
	silent atomic.Bool
	// ackVia is the client acknowledgements go through (c by default);
	// ackToken, when set, the token they carry instead of token.
	ackVia   atomic.Pointer[client]
	ackToken atomic.Pointer[string]
}

// open subscribes and reads the first heartbeat; the subscription is
// closed when the test ends.
func open(t testing.TB, c *client, token string, req *workerv1.SubscribeRequest) *subscription {
	t.Helper()
	s, err := tryOpen(t, c, token, req)
	if err != nil {
		t.Fatalf("%s: subscribe: %v", c.name, err)
	}
	return s
}

func tryOpen(t testing.TB, c *client, token string, req *workerv1.SubscribeRequest) (*subscription, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ev, err := c.subscribe(ctx, token, req)
	if err != nil {
		cancel()
		return nil, err
	}
	first, err := ev.recv()
	if err != nil {
		cancel()
		return nil, err
	}
	hb := first.GetHeartbeat()
	if hb == nil || hb.GetSequence() != 0 || hb.GetStreamId() == "" {
		cancel()
		t.Fatalf("%s: first event %v, want heartbeat 0 naming the stream", c.name, first)
	}
	s := &subscription{t: t, c: c, token: token, id: hb.GetStreamId(), first: hb, events: make(chan *workerv1.WorkerEvent, 100),
		ended: make(chan error, 1), cancel: cancel, done: make(chan struct{})}
	s.ackVia.Store(c)
	s.ack(0)
	go func() {
		defer close(s.done)
		for {
			e, err := ev.recv()
			if err != nil {
				s.ended <- err
				return
			}
			if hb := e.GetHeartbeat(); hb != nil {
				if !s.silent.Load() {
					s.ack(hb.GetSequence())
				}
				continue
			}
			s.events <- e
		}
	}()
	t.Cleanup(s.close)
	return s, nil
}

func (s *subscription) ack(seq int64) {
	token := s.token
	if t := s.ackToken.Load(); t != nil {
		token = *t
	}
	_, _ = call[workerv1.HeartbeatRequest, workerv1.HeartbeatResponse](context.Background(), s.ackVia.Load(), token,
		workerv1connect.WorkerServiceHeartbeatProcedure, &workerv1.HeartbeatRequest{StreamId: s.id, Sequence: seq})
}

// close ends the stream from the client's side (a worker killed).
func (s *subscription) close() {
	s.cancel()
	<-s.done
}

// next returns the next event other than an acknowledged heartbeat.
func (s *subscription) next(within time.Duration) *workerv1.WorkerEvent {
	s.t.Helper()
	select {
	case e := <-s.events:
		return e
	case err := <-s.ended:
		// The reader queues an event before the end that follows it, but
		// select picks at random among ready cases: the event comes first.
		select {
		case e := <-s.events:
			s.ended <- err
			return e
		default:
		}
		s.t.Fatalf("%s: the stream ended: %v", s.c.name, err)
	case <-time.After(within):
		s.t.Fatalf("%s: no event within %v", s.c.name, within)
	}
	return nil
}

// assignment returns the next event, which must be an assignment.
func (s *subscription) assignment(within time.Duration) *workerv1.Assignment {
	s.t.Helper()
	e := s.next(within)
	a := e.GetAssignment()
	if a == nil {
		s.t.Fatalf("%s: got %v, want an assignment", s.c.name, e)
	}
	return a
}

// quiet fails if an event other than a heartbeat arrives within d.
func (s *subscription) quiet(d time.Duration) {
	s.t.Helper()
	select {
	case e := <-s.events:
		s.t.Fatalf("%s: got %v, want nothing", s.c.name, e)
	case err := <-s.ended:
		s.t.Fatalf("%s: the stream ended: %v", s.c.name, err)
	case <-time.After(d):
	}
}

// end waits for the stream to end and returns its error.
func (s *subscription) end(within time.Duration) error {
	s.t.Helper()
	select {
	case err := <-s.ended:
		s.ended <- err
		return err
	case <-time.After(within):
		s.t.Fatalf("%s: the stream did not end within %v", s.c.name, within)
	}
	return nil
}
