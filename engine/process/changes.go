package process

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relais/relais/internal/isoduration"
)

// Changes says, for people, what next changes of old's graph: its start,
// nodes added and removed, and of each node kept the aspects that differ
// ("node score: revision 1 → 2, policy"), in node name order. A designer
// publishing a version reads it before the version is immutable (designer
// QA: a dry run said only "version 3"). The start's inputs contract is
// left to contracts.Diff, which says what each change breaks.
func Changes(old, next *Process) []string {
	var out []string
	if old.Name != next.Name {
		out = append(out, fmt.Sprintf("name %q → %q", old.Name, next.Name))
	}
	if old.Description != next.Description {
		out = append(out, "description")
	}
	if old.Start != next.Start {
		out = append(out, fmt.Sprintf("start %s → %s", old.Start, next.Start))
	}
	names := slices.Sorted(maps.Keys(next.Nodes))
	for name := range old.Nodes {
		if next.Nodes[name] == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		o, n := old.Nodes[name], next.Nodes[name]
		switch {
		case o == nil:
			out = append(out, "node "+name+" added ("+describeNode(n)+")")
		case n == nil:
			out = append(out, "node "+name+" removed")
		default:
			if aspects := nodeChanges(o, n); len(aspects) > 0 {
				out = append(out, "node "+name+": "+strings.Join(aspects, ", "))
			}
		}
	}
	return out
}

// describeNode names what a node added does: its kind and what it runs.
func describeNode(n *Node) string {
	switch n.Kind {
	case KindEnd:
		return "end, " + endStatus(n)
	case KindPush:
		return fmt.Sprintf("push %s@%d to %s", n.Definition, n.Revision, n.Destination)
	}
	return fmt.Sprintf("%s %s@%d", n.Kind, n.Definition, n.Revision)
}

// endStatus is the status an end node sets: its own, completed when a
// hand-built node has none.
func endStatus(n *Node) string {
	if n.Status == "" {
		return StatusCompleted
	}
	return n.Status
}

// nodeChanges lists the aspects of a node kept across two versions that
// differ, a scalar (a policy's members included) with its two values, a
// compound (inputs, routes, on_error) by its name.
func nodeChanges(o, n *Node) []string {
	if o.Kind != n.Kind {
		return []string{fmt.Sprintf("kind %s → %s (%s)", o.Kind, n.Kind, describeNode(n))}
	}
	var out []string
	scalar := func(what, from, to string) {
		if from != to {
			out = append(out, fmt.Sprintf("%s %s → %s", what, from, to))
		}
	}
	if n.Kind == KindEnd {
		scalar("status", endStatus(o), endStatus(n))
		return out
	}
	if o.Definition != n.Definition {
		out = append(out, fmt.Sprintf("definition %s@%d → %s@%d", o.Definition, o.Revision, n.Definition, n.Revision))
	} else {
		scalar("revision", strconv.Itoa(o.Revision), strconv.Itoa(n.Revision))
	}
	if !sameInputs(o.Inputs, n.Inputs) {
		out = append(out, "inputs")
	}
	if o.Policy != n.Policy {
		a, b := o.Policy, n.Policy
		scalar("max_attempts", strconv.Itoa(a.MaxAttempts), strconv.Itoa(b.MaxAttempts))
		// A retry delay is always one (its default filled in): zero is
		// an immediate retry, PT0S, not no setting (designer QA).
		scalar("retry_delay", isoduration.Format(a.RetryDelay), isoduration.Format(b.RetryDelay))
		scalar("retry_backoff", strconv.FormatFloat(a.Backoff(), 'f', -1, 64), strconv.FormatFloat(b.Backoff(), 'f', -1, 64))
		scalar("max_retry_delay", durationOr(a.MaxRetryDelay, "(ceiling)"), durationOr(b.MaxRetryDelay, "(ceiling)"))
		scalar("deadline", durationOr(a.Deadline, "(none)"), durationOr(b.Deadline, "(none)"))
		scalar("priority", strconv.Itoa(a.Priority), strconv.Itoa(b.Priority))
	}
	if !maps.Equal(o.Routes, n.Routes) {
		out = append(out, "routes")
	}
	scalar("next", orNone(o.Next), orNone(n.Next))
	if !bytes.Equal(appendOnError(nil, o.OnError), appendOnError(nil, n.OnError)) {
		out = append(out, "on_error")
	}
	if n.Kind == KindPush {
		scalar("destination", o.Destination, n.Destination)
		scalar("timeout", durationOr(o.Timeout, "(default)"), durationOr(n.Timeout, "(default)"))
	}
	return out
}

func sameInputs(a, b map[string]Binding) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.From != y.From || (x.Value == nil) != (y.Value == nil) ||
			x.Value != nil && !bytes.Equal(canonicalValue(x.Value), canonicalValue(y.Value)) {
			return false
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// durationOr formats d, or says what zero means.
func durationOr(d time.Duration, zero string) string {
	if d == 0 {
		return zero
	}
	return isoduration.Format(d)
}
