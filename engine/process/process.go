// Package process models Relais process versions: a typed graph of pull,
// push and end nodes that pin exact definition revisions.
//
// The package is pure. The engine stores versions and instances and calls
// it twice: at publish, to parse and statically check a version (Parse,
// Check), and at run time, inside its transactions, to build a node's
// inputs and to pick the next node (EvaluateInputs, NextOnSuccess,
// NextOnFailure, EndStatus). Keeping both halves here means that what was
// proven at publish is exactly what runs.
package process

import (
	"encoding/json"
	"regexp"
	"time"

	"github.com/relais/relais/contracts"
)

// Kind says what reaching a node does.
type Kind string

// Node kinds.
const (
	// KindPull materializes an occurrence that an external worker claims.
	KindPull Kind = "pull"
	// KindPush materializes an occurrence that Relais delivers to a
	// destination in one synchronous call.
	KindPush Kind = "push"
	// KindEnd finishes the instance with the node's status.
	KindEnd Kind = "end"
)

// End statuses.
const (
	// StatusCompleted is the default status of an end node.
	StatusCompleted = "completed"
	// StatusFailed ends the instance as failed, typically on an on_error
	// branch.
	StatusFailed = "failed"
)

// Policy defaults and bounds (DESIGN §3). They live here because the
// policy is frozen into each occurrence from the parsed node.
const (
	// DefaultMaxAttempts is the attempt budget of a pull node that gives
	// none.
	DefaultMaxAttempts = 3
	// MaxMaxAttempts bounds max_attempts so that a crashing task cannot
	// hold a worker fleet for ever.
	MaxMaxAttempts = 100
	// DefaultRetryDelay is the pause before a retryable failure is offered
	// again, for a pull node that gives none.
	DefaultRetryDelay = 10 * time.Second
	// DefaultPriority is the middle of the 0–9 priority range.
	DefaultPriority = 5
	// MaxPriority is the highest priority; fetches claim it first.
	MaxPriority = 9
	// HardMaxPushTimeout is the ceiling of every push budget, whatever the
	// operator configures (DESIGN §4).
	HardMaxPushTimeout = 10 * time.Second
	// MinPushTimeout is the floor of every push budget: under it a call
	// fails timeout before most destinations could answer (a typo of
	// PT1S, such as PT0.001S, made every call fail).
	MinPushTimeout = 100 * time.Millisecond
	// FallbackPushTimeout is the push budget used when neither the node nor
	// Limits.DefaultPushTimeout gives one (DESIGN §4 default).
	FallbackPushTimeout = 5 * time.Second
	// DefaultMaxRetryDelay is the ceiling of a retry delay unless the
	// operator sets another (RELAIS_PULL_MAX_RETRY_DELAY).
	DefaultMaxRetryDelay = 24 * time.Hour
	// MaxRetryBackoff bounds retry_backoff: a factor of 10 already takes
	// a 10-second delay past a day by the sixth failure.
	MaxRetryBackoff = 10
)

// Policy is the execution policy frozen into every occurrence a node
// materializes.
type Policy struct {
	// MaxAttempts caps reservations; push nodes always have 1.
	MaxAttempts int
	// RetryDelay is the default pause after a retryable failure; push
	// nodes always have 0.
	RetryDelay time.Duration
	// RetryBackoff multiplies the delay after each failure: the nth
	// failure of an attempt budget waits RetryDelay × RetryBackoff^(n−1).
	// 0 (the default) or 1 keeps it fixed (see Backoff).
	RetryBackoff float64
	// MaxRetryDelay caps a delay that grows; 0 means Relais's ceiling
	// (Limits.MaxRetryDelay), as it stands when the occurrence fails.
	MaxRetryDelay time.Duration
	// Deadline bounds the occurrence's whole life; 0 means none.
	Deadline time.Duration
	// Priority orders fetches, 0–9, highest first.
	Priority int
}

// Backoff is RetryBackoff, 1 when unset (a fixed delay).
func (p Policy) Backoff() float64 {
	if p.RetryBackoff == 0 {
		return 1
	}
	return p.RetryBackoff
}

// Binding is the source of one input of a node: a path (From) or a literal
// JSON value (Value). Exactly one is set.
type Binding struct {
	// From is a dotted source path: input.<a>..., nodes.<N>.output.<a>...,
	// instance.id or instance.business_key.
	From string
	// Value is a literal, in canonical JSON; nil when From is used. It is
	// part of the version document, so Check refuses it for a sensitive or
	// secret target.
	Value json.RawMessage
}

// Node is one step of a process.
type Node struct {
	// Name is the node's key in the document.
	Name string
	// Kind is pull, push or end.
	Kind Kind
	// Definition and Revision pin the task contract of pull and push nodes.
	Definition string
	Revision   int
	// Inputs maps a top-level input field of the pinned revision to its
	// source.
	Inputs map[string]Binding
	// Policy has its defaults applied: max_attempts 3, retry_delay PT10S,
	// no deadline, priority 5; push nodes get MaxAttempts 1 and RetryDelay
	// 0 because they are never retried.
	Policy Policy
	// Routes maps each value of the revision's routing output to a node;
	// nil when the node uses Next. A non-nil empty map means the document
	// said "routes": {}.
	Routes map[string]string
	// Next is the node that follows a success when the revision does not
	// route.
	Next string
	// OnError says where a failed occurrence leads, by its error code;
	// its zero value means every failure fails the instance.
	OnError OnError
	// Destination names the registered push destination (push only).
	Destination string
	// Timeout is the push budget (push only); 0 means
	// Limits.DefaultPushTimeout, see PushTimeout.
	Timeout time.Duration
	// Status is the instance status an end node sets: "completed" (the
	// default) or "failed".
	Status string
}

// Hold is the on_error target that holds the instance at the failed node
// (an incident an operator resolves, DESIGN §12) instead of failing it. It
// is a reserved word, not a node name: no node may be called hold, so a
// target always means one thing.
const Hold = "hold"

// AnyCode is the on_error map key of the target for codes the map does not
// name.
const AnyCode = "*"

// ErrorCodePattern is what an error code looks like: those workers report
// and those Relais makes (destination_http_503, deadline_exceeded, ...). An
// on_error map is keyed by such codes (or AnyCode).
var ErrorCodePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// OnError routes a failed occurrence by its error code. A target is a
// node name or Hold.
type OnError struct {
	// Codes maps error codes to their targets. It is nil when the
	// document wrote on_error as one target, non-nil when it wrote a map
	// (even one holding only "*").
	Codes map[string]string
	// Default is the target of every code Codes does not name: the whole
	// on_error when written as a string, the "*" entry of a map. Empty
	// means such a failure fails the instance.
	Default string
}

// IsZero reports whether on_error names no target at all, i.e. every
// failure fails the instance.
func (o OnError) IsZero() bool {
	return o.Default == "" && len(o.Codes) == 0
}

// Target returns the target for a failure with code, and false when the
// failure fails the instance.
func (o OnError) Target(code string) (string, bool) {
	if t, ok := o.Codes[code]; ok && t != "" {
		return t, true
	}
	return o.Default, o.Default != ""
}

// Process is one parsed process version.
type Process struct {
	// Name and Description are for people; they do not affect execution
	// but are part of the digest.
	Name        string
	Description string
	// Inputs is the contract instances are started with.
	Inputs contracts.Contract
	// Start is the first node.
	Start string
	// Nodes holds every node by name.
	Nodes map[string]*Node
}

// Resolver answers the questions Check cannot answer from the document
// alone. The engine backs it with the definitions and destinations it
// stores.
type Resolver interface {
	// Revision returns the working copy snapshotted as definition@revision.
	Revision(definition string, revision int) (contracts.Working, bool)
	// Destination returns the registered destination's max_timeout.
	Destination(name string) (maxTimeout time.Duration, ok bool)
}

// Limits are the operator's ceilings and defaults that a process version
// must respect at publish. A zero ceiling means no ceiling beyond the hard
// ones, so that a caller that does not care is not forced to invent one.
type Limits struct {
	// MaxRetryDelay bounds a pull node's retry_delay.
	MaxRetryDelay time.Duration
	// DefaultPushTimeout is the budget of a push node without timeout;
	// zero means FallbackPushTimeout.
	DefaultPushTimeout time.Duration
	// MaxPushTimeout bounds every push budget; it is at most
	// HardMaxPushTimeout, which applies anyway.
	MaxPushTimeout time.Duration
}

// RetriesFutile reports whether a pull node's retries can never run: a
// retry delay no shorter than its deadline, which ends the occurrence
// first, so that its budget of attempts is one in effect.
func (n *Node) RetriesFutile() bool {
	pol := n.Policy
	return n.Kind == KindPull && pol.MaxAttempts > 1 && pol.Deadline > 0 && pol.RetryDelay >= pol.Deadline
}

// CallOutlastsDeadline reports whether a push node's own timeout is longer
// than its deadline, which then cuts the call short (deadline_exceeded).
func (n *Node) CallOutlastsDeadline() bool {
	return n.Kind == KindPush && n.Policy.Deadline > 0 && n.Timeout > n.Policy.Deadline
}

// PushTimeout returns the node's effective push budget: its own timeout,
// else lim.DefaultPushTimeout, else FallbackPushTimeout. The default is
// resolved here rather than at parse time because it belongs to the
// operator's configuration, not to the document (and so not to its digest).
func (n *Node) PushTimeout(lim Limits) time.Duration {
	switch {
	case n.Timeout > 0:
		return n.Timeout
	case lim.DefaultPushTimeout > 0:
		return lim.DefaultPushTimeout
	default:
		return FallbackPushTimeout
	}
}
