package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/queries"
)

// Worker protocols, as the catalog records them.
const (
	ProtocolStream   = "stream"
	ProtocolLongPoll = "long_poll"
	// ProtocolCamunda is a worker polling through the Camunda 7 facade.
	ProtocolCamunda = "camunda"
)

// A stream's wire protocols, as connect-go names them (Peer.Protocol).
const (
	TransportGRPC    = "grpc"
	TransportGRPCWeb = "grpcweb"
	TransportConnect = "connect"
)

// Log events of the worker catalog: stable names for connects and
// disconnects (DESIGN §10).
const (
	EventWorkerConnected    = "worker.connected"
	EventWorkerDisconnected = "worker.disconnected"
)

// LiveHeartbeats is how many heartbeats a worker may go unseen and still
// be live.
const LiveHeartbeats = 3

// pollerRefresh bounds how often one polling worker's catalog row is
// written: a busy poller fetches many times a second.
const pollerRefresh = 5 * time.Second

// Worker is a live worker in the catalog: a connected stream, or a polling
// worker seen by its last fetch.
type Worker struct {
	ID           uuid.UUID
	ConsumerID   int64
	ConsumerName string
	WorkerID     string
	Protocol     string
	// Transport is a stream's wire protocol (TransportGRPC, …); empty for
	// a polling worker, or a stream an older replica recorded.
	Transport     string
	Replica       string
	Subscriptions []Subscription // as the worker asked
	Definitions   []string       // the keys they resolved to
	InFlight      int            // occurrences it holds now (live locks)
	// Lapsed counts the locks its worker id let lapse within LapseWindow
	// (unsettled past their expiry, or held by a stream that ended): a
	// worker crash-looping under one id looks live, and lapses.
	Lapsed int
	// LastLapsedAt is when the latest of them lapsed (zero without one).
	LastLapsedAt time.Time
	ConnectedAt  time.Time
	LastSeenAt   time.Time
}

// LapseWindow is how far back the worker catalog counts a worker's lapsed
// locks.
const LapseWindow = time.Hour

// WorkerLapses is what one worker id let lapse within LapseWindow.
type WorkerLapses struct {
	ConsumerID   int64
	ConsumerName string
	WorkerID     string
	Lapsed       int
	LastLapsedAt time.Time
	// Live says whether a worker of that id is connected (or polling) now.
	Live bool
}

// LapseCursor is the keyset position of ListLapses: the last worker id of
// the page before.
type LapseCursor struct {
	ConsumerID int64  `json:"c"`
	WorkerID   string `json:"w"`
}

// ListLapses lists the worker ids that let locks lapse within LapseWindow
// (of the definition, or of all when it is ""), connected now or not, by
// consumer then worker id after the cursor, at most limit of them.
func (e *Engine) ListLapses(ctx context.Context, definition string, after *LapseCursor, limit int) ([]WorkerLapses, error) {
	p := queries.WorkerLapsesListParams{Since: e.Now().Add(-LapseWindow), DefinitionKey: strPtr(definition), Now: e.at(), Max: int32(limit)}
	if after != nil {
		p.AfterConsumer, p.AfterWorker = &after.ConsumerID, &after.WorkerID
	}
	rows, err := e.q.WorkerLapsesList(ctx, p)
	if err != nil {
		return nil, wrap("list lapses", err)
	}
	out := make([]WorkerLapses, len(rows))
	for i, r := range rows {
		out[i] = WorkerLapses{ConsumerID: r.ConsumerID, ConsumerName: r.ConsumerName, WorkerID: r.WorkerID, Lapsed: int(r.Lapsed),
			LastLapsedAt: r.LastLapsedAt, Live: r.Live}
	}
	return out, nil
}

// LapsesByDefinition counts the locks lapsed within LapseWindow by
// definition key (as RecentLapses counts them).
func (e *Engine) LapsesByDefinition(ctx context.Context) (map[string]int64, error) {
	rows, err := e.q.WorkerLapsesByDefinition(ctx, queries.WorkerLapsesByDefinitionParams{Since: e.Now().Add(-LapseWindow), Now: e.at()})
	if err != nil {
		return nil, wrap("lapses by definition", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.DefinitionKey] = r.Lapsed
	}
	return out, nil
}

// RecentLapses lists the worker ids that let locks lapse within
// LapseWindow (of the definition, or of all when it is ""), connected now
// or not, the most lapses first, at most limit of them, and how many ids
// there are in all: a worker that dies and restarts is no longer in the
// catalog between its lives, and one that takes a new id at each start
// spreads its lapses over ids the catalog lists no more.
func (e *Engine) RecentLapses(ctx context.Context, definition string, limit int) ([]WorkerLapses, int, error) {
	rows, err := e.q.WorkerLapsesRecent(ctx, queries.WorkerLapsesRecentParams{Since: e.Now().Add(-LapseWindow), DefinitionKey: strPtr(definition),
		Now: e.at(), Max: int32(limit)})
	if err != nil {
		return nil, 0, wrap("recent lapses", err)
	}
	out := make([]WorkerLapses, len(rows))
	total := 0
	for i, r := range rows {
		out[i] = WorkerLapses{ConsumerID: r.ConsumerID, ConsumerName: r.ConsumerName, WorkerID: r.WorkerID, Lapsed: int(r.Lapsed),
			LastLapsedAt: r.LastLapsedAt, Live: r.Live}
		total = int(r.Total)
	}
	return out, total, nil
}

// subscriptionJSON is how a subscription is stored in the catalog.
type subscriptionJSON struct {
	Definition string   `json:"definition"`
	Revisions  []int    `json:"revisions,omitempty"`
	Fields     []string `json:"fields,omitempty"`
	Project    bool     `json:"project,omitempty"`
}

func encodeSubscriptions(subs []Subscription) json.RawMessage {
	out := make([]subscriptionJSON, len(subs))
	for i, s := range subs {
		out[i] = subscriptionJSON(s)
	}
	b, _ := json.Marshal(out)
	return b
}

func decodeSubscriptions(b json.RawMessage) []Subscription {
	var in []subscriptionJSON
	_ = json.Unmarshal(b, &in)
	out := make([]Subscription, len(in))
	for i, s := range in {
		out[i] = Subscription(s)
	}
	return out
}

// StreamPresence is a worker stream as the catalog records it.
type StreamPresence struct {
	ID         uuid.UUID
	ConsumerID int64
	WorkerID   string
	// Transport is the stream's wire protocol: TransportGRPC,
	// TransportGRPCWeb or TransportConnect.
	Transport     string
	Subscriptions []Subscription
	Pairs         Pairs
	ConnectedAt   time.Time
	// LiveFor is how long the row stays live without being seen again:
	// LiveHeartbeats heartbeats.
	LiveFor time.Duration
}

// SeeStream writes a stream's catalog row: when it connects, then every
// heartbeat (its resolved keys may change as patterns match new keys).
//
// inserted is true when the row was written anew: at the stream's first
// sighting, or after a pruning pass took it (the database unreachable
// from this replica for longer than the row lives), which logged the
// worker disconnected; its caller then logs it connected again.
func (e *Engine) SeeStream(ctx context.Context, s StreamPresence) (inserted bool, err error) {
	var transport *string
	if s.Transport != "" {
		transport = &s.Transport
	}
	inserted, err = e.q.WorkerStreamUpsert(ctx, queries.WorkerStreamUpsertParams{ID: s.ID, ConsumerID: s.ConsumerID, WorkerID: s.WorkerID, Transport: transport,
		Replica: e.replica, Subscriptions: encodeSubscriptions(s.Subscriptions), DefinitionKeys: s.Pairs.DefinitionKeys(), Revisions: s.Pairs.byKey(),
		ConnectedAt: s.ConnectedAt, Now: e.at(), LiveFor: s.LiveFor})
	return inserted, wrap("see stream", err)
}

// ForgetStream removes an ended stream's catalog row.
func (e *Engine) ForgetStream(ctx context.Context, id uuid.UUID) error {
	return wrap("forget stream", e.q.WorkerDelete(ctx, id))
}

// StreamConsumer returns the consumer of a stream the catalog lists
// (connected to any replica), or ErrNotFound's fault.
func (e *Engine) StreamConsumer(ctx context.Context, id uuid.UUID) (int64, error) {
	c, err := e.q.WorkerStreamOf(ctx, id)
	if isNoRows(err) {
		return 0, notFound("stream %s", id)
	}
	return c, wrap("stream consumer", err)
}

// PollerSighting is one fetch of a polling worker.
type PollerSighting struct {
	// Protocol is ProtocolLongPoll (the default) or ProtocolCamunda.
	Protocol      string
	ConsumerID    int64
	WorkerID      string
	Subscriptions []Subscription
	Pairs         Pairs
	// LiveFor is how long the worker stays live without fetching again:
	// its long-poll wait plus LiveHeartbeats heartbeats.
	LiveFor time.Duration
}

// pollerSeen remembers when this replica last wrote each poller's row.
type pollerSeen struct {
	mu   sync.Mutex
	last map[pollerKey]time.Time
}

type pollerKey struct {
	consumer int64
	worker   string
}

// SeePoller records a polling worker's fetch in the catalog, at most once
// every few seconds per worker and replica, so the catalog costs a busy
// poller nothing; it logs worker.connected when the worker (re)appears.
// It never fails a fetch: the catalog is for operators.
func (e *Engine) SeePoller(ctx context.Context, s PollerSighting) {
	k := pollerKey{s.ConsumerID, s.WorkerID}
	now := time.Now()
	e.pollers.mu.Lock()
	if e.pollers.last == nil {
		e.pollers.last = map[pollerKey]time.Time{}
	}
	if last, ok := e.pollers.last[k]; ok && now.Sub(last) < pollerRefresh {
		e.pollers.mu.Unlock()
		return
	}
	e.pollers.last[k] = now
	if len(e.pollers.last) > 10000 {
		// Forget workers not seen for a while rather than grow forever.
		for key, t := range e.pollers.last {
			if now.Sub(t) > pollerRefresh {
				delete(e.pollers.last, key)
			}
		}
	}
	e.pollers.mu.Unlock()
	protocol := cmp.Or(s.Protocol, ProtocolLongPoll)
	connected, err := e.q.WorkerPollerSeen(ctx, queries.WorkerPollerSeenParams{ID: uuid.Must(uuid.NewV7()), Protocol: protocol, ConsumerID: s.ConsumerID,
		WorkerID: s.WorkerID, Replica: e.replica, Subscriptions: encodeSubscriptions(s.Subscriptions),
		DefinitionKeys: s.Pairs.DefinitionKeys(), Revisions: s.Pairs.byKey(), Now: e.at(), LiveFor: s.LiveFor + pollerRefresh})
	if err != nil {
		if ctx.Err() == nil {
			e.logger.Warn("recording a polling worker in the catalog failed", "err", err)
		}
		e.pollers.mu.Lock()
		delete(e.pollers.last, k)
		e.pollers.mu.Unlock()
		return
	}
	if connected {
		e.LogWorker(EventWorkerConnected, protocol, s.ConsumerID, s.WorkerID, e.replica)
	}
}

// PollerLeft shortens the catalog's window of a poller whose long poll
// ended before its wait because the client went away: SeePoller counted
// the whole wait, and a killed worker listed live a minute and a half
// hides a definition nobody serves. The worker stays live LiveHeartbeats
// heartbeats (heartbeat), as after any fetch, unless another replica saw
// it since (a retry there); its next fetch here is written whatever
// pollerRefresh says.
func (e *Engine) PollerLeft(ctx context.Context, consumerID int64, workerID string, heartbeat time.Duration) {
	e.pollers.mu.Lock()
	delete(e.pollers.last, pollerKey{consumerID, workerID})
	e.pollers.mu.Unlock()
	// The request's context is usually what ended.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := e.q.WorkerPollerLeft(ctx, queries.WorkerPollerLeftParams{ConsumerID: consumerID, WorkerID: workerID, Now: e.at(),
		LiveFor: LiveHeartbeats * heartbeat, Replica: e.replica})
	if err != nil {
		e.logger.Warn("shortening a polling worker's catalog entry failed", "err", err)
	}
}

// LogWorker logs a worker's connection or disconnection under its stable
// event name.
func (e *Engine) LogWorker(event, protocol string, consumerID int64, workerID, replica string, attrs ...any) {
	msg := "worker connected"
	if event == EventWorkerDisconnected {
		msg = "worker disconnected"
	}
	e.logger.Info(msg, append([]any{"event", event, "protocol", protocol, "consumer", consumerID, "worker_id", workerID, "replica", replica}, attrs...)...)
}

// WorkerFilter selects live workers.
type WorkerFilter struct {
	Definition string     // only workers subscribed to this key ("" for all)
	After      *uuid.UUID // keyset cursor
	Limit      int
}

// ListWorkers returns the live workers: streams connected to any replica
// and pollers seen within their wait plus LiveHeartbeats heartbeats.
func (e *Engine) ListWorkers(ctx context.Context, f WorkerFilter) ([]Worker, error) {
	rows, err := e.q.WorkerListLive(ctx, queries.WorkerListLiveParams{DefinitionKey: strPtr(f.Definition), After: f.After, Max: int32(f.Limit),
		Now: e.at(), LapsedSince: e.Now().Add(-LapseWindow)})
	if err != nil {
		return nil, wrap("list workers", err)
	}
	out := make([]Worker, len(rows))
	for i, r := range rows {
		out[i] = Worker{ID: r.ID, ConsumerID: r.ConsumerID, ConsumerName: r.ConsumerName, WorkerID: r.WorkerID, Protocol: r.Protocol, Transport: deref(r.Transport),
			Replica: r.Replica, Subscriptions: decodeSubscriptions(r.Subscriptions), Definitions: r.DefinitionKeys, InFlight: int(r.InFlight),
			Lapsed: int(r.Lapsed), ConnectedAt: r.ConnectedAt, LastSeenAt: r.LastSeenAt}
		if r.Lapsed > 0 {
			out[i].LastLapsedAt = r.LastLapsedAt
		}
	}
	return out, nil
}

// CountWorkers returns how many live workers serve a definition key.
func (e *Engine) CountWorkers(ctx context.Context, definition string) (int, error) {
	n, err := e.q.WorkerCountLive(ctx, queries.WorkerCountLiveParams{DefinitionKey: definition, Now: e.at()})
	return int(n), wrap("count workers", err)
}

// LiveWorkersByDefinition counts the live workers (streams on every
// replica and pollers) by definition key and protocol.
func (e *Engine) LiveWorkersByDefinition(ctx context.Context) (map[string]map[string]int64, error) {
	rows, err := e.q.WorkerCountLiveByDefinition(ctx, e.at())
	if err != nil {
		return nil, wrap("count live workers", err)
	}
	out := map[string]map[string]int64{}
	for _, r := range rows {
		if out[r.DefinitionKey] == nil {
			out[r.DefinitionKey] = map[string]int64{}
		}
		out[r.DefinitionKey][r.Protocol] = r.Count
	}
	return out, nil
}

// RevisionsWithoutTaker returns, by definition key, the revisions whose
// pull occurrences wait now while no live worker takes them: a process
// version pinned a revision its definition's workers do not subscribe to
// (yet), and its work waits however many workers serve the others.
func (e *Engine) RevisionsWithoutTaker(ctx context.Context) (map[string][]int, error) {
	rows, err := e.q.PullRevisionsWithoutTaker(ctx, e.at())
	if err != nil {
		return nil, wrap("revisions without taker", err)
	}
	out := map[string][]int{}
	for _, r := range rows {
		out[r.DefinitionKey] = append(out[r.DefinitionKey], int(r.Revision))
	}
	return out, nil
}

// PullWorkWaits reports whether pull occurrences of definition wait for a
// worker: available ones, or reserved ones (with no worker connected,
// their worker is gone and their lock will lapse).
func (e *Engine) PullWorkWaits(ctx context.Context, definition string) (bool, error) {
	waits, err := e.q.PullWorkWaits(ctx, definition)
	return waits, wrap("pull work waits", err)
}

// DefinitionUse is how published process versions use a definition.
type DefinitionUse struct {
	// Pulled: a pull node is on it, and its work waits for workers.
	// Pushed: a push node is; Relais calls destinations for it.
	Pulled, Pushed bool
}

// DefinitionUse reports how published process versions use the
// definition: a definition only push nodes use never needs a worker, one
// no process uses needs none yet.
func (e *Engine) DefinitionUse(ctx context.Context, definition string) (DefinitionUse, error) {
	row, err := e.q.DefinitionUse(ctx, definition)
	if err != nil {
		return DefinitionUse{}, wrap("definition use", err)
	}
	return DefinitionUse{Pulled: row.Pulled, Pushed: row.Pushed}, nil
}

// PushOnlyDefinitions lists, in key order, the definitions only push
// nodes use (see DefinitionUse): a filter of waiting retries has nothing
// to offer for them.
func (e *Engine) PushOnlyDefinitions(ctx context.Context) ([]string, error) {
	keys, err := e.q.PushOnlyDefinitions(ctx)
	if err != nil {
		return nil, wrap("push-only definitions", err)
	}
	return keys, nil
}

// DefinitionPins returns, by revision of definition, the versions of each
// process that pin it: process key → versions, in order.
func (e *Engine) DefinitionPins(ctx context.Context, definition string) (map[int]map[string][]int, error) {
	rows, err := e.q.DefinitionPins(ctx, definition)
	if err != nil {
		return nil, wrap("definition pins", err)
	}
	out := map[int]map[string][]int{}
	for _, r := range rows {
		byProcess := out[int(r.Revision)]
		if byProcess == nil {
			byProcess = map[string][]int{}
			out[int(r.Revision)] = byProcess
		}
		byProcess[r.ProcessKey] = append(byProcess[r.ProcessKey], int(r.Version))
	}
	return out, nil
}

// pruneBatch bounds one pass over catalog rows that are no longer live.
const pruneBatch = 100

// PruneWorkers removes catalog rows that stopped being live (pollers that
// stopped fetching, streams whose replica died) and logs each as
// worker.disconnected. Any replica may run it: each row is taken once.
func (e *Engine) PruneWorkers(ctx context.Context) (int, error) {
	rows, err := e.q.WorkerPrune(ctx, queries.WorkerPruneParams{Now: e.at(), Max: pruneBatch})
	if err != nil {
		return 0, wrap("prune workers", err)
	}
	for _, r := range rows {
		reason := "stopped polling"
		if r.Protocol == ProtocolStream {
			// Its replica stopped refreshing the row: it died, or it could
			// not reach the database for a while (a live stream's row comes
			// back with its next refresh).
			reason = "not refreshed by its replica in time (the replica died, or could not reach the database)"
		}
		e.LogWorker(EventWorkerDisconnected, r.Protocol, r.ConsumerID, r.WorkerID, r.Replica, "reason", reason)
	}
	return len(rows), nil
}
