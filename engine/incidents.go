package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/relais/relais/queries"
)

// ChannelIncident announces an instance a transaction held (DESIGN §12), as
// a JSON incidentNotice. A notification is delivered only if the
// transaction that sent it commits, and not at all if the savepoint it was
// sent under rolls back: the replica whose transaction held the instance
// logs the incident once, after its commit, whichever path held it (a
// worker's failure in a group commit, a timer, a push call's result).
const ChannelIncident = "relais_incident"

// incidentNotice is a ChannelIncident payload. Like every payload it
// carries no value: ids, keys and an error code.
type incidentNotice struct {
	// Origin tells the replica that held the instance from the others,
	// which hear the notification too and say nothing.
	Origin     string    `json:"origin"`
	Instance   uuid.UUID `json:"instance"`
	Process    string    `json:"process"`
	Version    int       `json:"version"`
	Node       string    `json:"node"`
	Definition string    `json:"definition,omitempty"`
	Code       string    `json:"code"`
}

// newOrigin returns a name for this engine in ChannelIncident payloads.
// The replica's name (host and pid) may repeat across containers; this
// may not.
func newOrigin() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// noteHeld announces, with the transaction's commit, that the run held its
// instance at node with code.
func (r *run) noteHeld(node, code string) error {
	n := incidentNotice{Origin: r.e.origin, Instance: r.inst.ID, Process: r.inst.ProcessKey, Version: int(r.inst.Version), Node: node, Code: code}
	if nd := r.pv.Process.Nodes[node]; nd != nil {
		n.Definition = nd.Definition
	}
	payload, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return r.q.Notify(r.ctx, queries.NotifyParams{Channel: ChannelIncident, Payload: string(payload)})
}

// Incident handles a ChannelIncident payload: an instance this engine's
// transaction held is logged, at warn level, for whoever alerts on logs.
// relais_instances_held and the console's Health page count the held
// instances whether or not a line was logged (a notification sent while
// this replica's LISTEN connection reconnects is not heard).
func (e *Engine) Incident(payload string) {
	var n incidentNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		e.logger.Warn("unreadable incident notification", "error", err)
		return
	}
	if n.Origin != e.origin {
		return
	}
	e.logger.Warn("instance held: an operator may retry, abandon or stop it",
		"instance", n.Instance, "process", n.Process, "version", n.Version, "node", n.Node, "definition", n.Definition, "code", n.Code)
}
