package console

import (
	"context"
	"slices"
	"strconv"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/suggest"
)

// The functions below translate the engine's vocabulary (statuses,
// outcomes, field types, classifications). Each value is a literal at its
// own call site so that gotext extracts it; a value the console does not
// know yet is shown as stored rather than hidden.

// occurrenceStatuses are the states an occurrence can be in, in the order
// the operations view lists them.
var occurrenceStatuses = engine.OccurrenceStatuses

// statusLabel translates an occurrence or instance status. French uses the
// feminine: "une occurrence", "une instance".
// unknownStatus says a status filter names none of statuses, with the one
// it likely means: a typo of a value, a value as the page shows it in the
// reader's language (bloquée for held), or, for a task, an instance's
// status (operator QA: "Unknown status" alone for both).
func unknownStatus(ctx context.Context, given string, statuses []string) string {
	byLabel := map[string]string{}
	candidates := slices.Clone(statuses)
	for _, s := range statuses {
		byLabel[statusLabel(ctx, s)] = s
		candidates = append(candidates, statusLabel(ctx, s))
	}
	meant, ok := byLabel[given]
	if !ok {
		if meant, ok = suggest.Closest(given, candidates); ok && byLabel[meant] != "" {
			meant = byLabel[meant]
		}
	}
	switch {
	case ok:
		return T(ctx, "Unknown status “%s” (did you mean “%s”?).", given, meant)
	case !slices.Contains(statuses, given) && slices.Contains(instanceStatuses, given):
		return T(ctx, "“%s” is the status of an instance, not of a task: the Instances page lists the instances with it.", given)
	}
	return T(ctx, "Unknown status “%s”.", given)
}

func statusLabel(ctx context.Context, s string) string {
	switch s {
	case "available":
		return T(ctx, "available")
	case "reserved":
		return T(ctx, "reserved")
	case "deferred":
		return T(ctx, "deferred")
	case "completed":
		return T(ctx, "completed")
	case "failed":
		return T(ctx, "failed")
	case "cancelled":
		return T(ctx, "cancelled")
	case "running":
		return T(ctx, "running")
	case "held":
		// An instance stopped at a failed node for an operator (an
		// incident): "bloquée" in French.
		return T(ctx, "held")
	}
	return s
}

// outcomeLabel translates the outcome of an attempt ("une tentative").
func outcomeLabel(ctx context.Context, o string) string {
	switch o {
	case "completed":
		return T(ctx, "completed")
	case "failed":
		return T(ctx, "failed")
	case "expired":
		return T(ctx, "expired")
	case "rejected":
		return T(ctx, "rejected")
	case "cancelled":
		return T(ctx, "cancelled")
	case "released":
		return T(ctx, "released")
	case "disconnected":
		return T(ctx, "disconnected")
	}
	return o
}

// typeLabel translates a contract field type.
func typeLabel(ctx context.Context, t contracts.Type) string {
	switch t {
	case contracts.TypeText:
		return T(ctx, "text")
	case contracts.TypeInteger:
		return T(ctx, "integer")
	case contracts.TypeNumber:
		return T(ctx, "number")
	case contracts.TypeBoolean:
		return T(ctx, "boolean")
	case contracts.TypeDate:
		return T(ctx, "date")
	case contracts.TypeDatetime:
		return T(ctx, "date and time")
	case contracts.TypeChoice:
		return T(ctx, "choice")
	case contracts.TypeObject:
		return T(ctx, "object")
	case contracts.TypeList:
		return T(ctx, "list")
	}
	return string(t)
}

// classLabel translates a classification; the empty one is normal.
func classLabel(ctx context.Context, c contracts.Classification) string {
	switch c {
	case contracts.ClassNormal, "":
		return T(ctx, "normal")
	case contracts.ClassSensitive:
		return T(ctx, "sensitive")
	case contracts.ClassSecret:
		return T(ctx, "secret")
	}
	return string(c)
}

// maskedMarker is what stands in for a protected value. It names the
// classification and nothing else: never the value, its length or a prefix.
// The page puts dots before it, hidden from screen readers (they read
// "bullet bullet bullet").
// Each marker is a whole message because its grammar differs from the
// classification's name alone (fr: "masqué (secret)" but "classification
// secrète").
func maskedMarker(ctx context.Context, c contracts.Classification) string {
	if c == contracts.ClassSensitive {
		return T(ctx, "hidden (sensitive)")
	}
	return T(ctx, "hidden (secret)")
}

// modeLabel translates how an occurrence reaches its service.
func modeLabel(ctx context.Context, m string) string {
	switch m {
	case "pull":
		return T(ctx, "pull (a worker fetches it)")
	case "push":
		return T(ctx, "push (Relais calls the service)")
	}
	return m
}

// roleLabel translates a token role.
func roleLabel(ctx context.Context, r auth.Role) string {
	switch r {
	case auth.RoleAdmin:
		return T(ctx, "administrator")
	case auth.RoleOperator:
		return T(ctx, "operator")
	case auth.RoleDesigner:
		return T(ctx, "designer")
	case auth.RoleConsumer:
		return T(ctx, "consumer")
	}
	return string(r)
}

// yesNo translates a boolean.
func yesNo(ctx context.Context, b bool) string {
	if b {
		return T(ctx, "yes")
	}
	return T(ctx, "no")
}

// changeKindLabel translates the kind of a difference between revisions.
func changeKindLabel(ctx context.Context, k contracts.ChangeKind) string {
	switch k {
	case contracts.ChangeAdded:
		return T(ctx, "field added")
	case contracts.ChangeRemoved:
		return T(ctx, "field removed")
	case contracts.ChangeTypeChanged:
		return T(ctx, "type changed")
	case contracts.ChangeRequiredChanged:
		return T(ctx, "required changed")
	case contracts.ChangeChoicesChanged:
		return T(ctx, "values changed")
	case contracts.ChangeClassificationChanged:
		return T(ctx, "classification changed")
	case contracts.ChangeConstraintChanged:
		return T(ctx, "constraint changed")
	case contracts.ChangeRoutingChanged:
		return T(ctx, "routing changed")
	}
	return string(k)
}

// optionLabel translates the name of a field option as the diff reports it.
func optionLabel(ctx context.Context, name string) string {
	switch name {
	case "min_length":
		return T(ctx, "minimum length")
	case "max_length":
		return T(ctx, "maximum length")
	case "pattern":
		return T(ctx, "pattern")
	case "format":
		return T(ctx, "format")
	case "minimum":
		return T(ctx, "minimum")
	case "maximum":
		return T(ctx, "maximum")
	case "min_items":
		return T(ctx, "minimum items")
	case "max_items":
		return T(ctx, "maximum items")
	}
	return name
}

// definitionAtRevision names a pinned revision of a definition.
func definitionAtRevision(ctx context.Context, key string, revision int) string {
	n := strconv.Itoa(revision) // a label, not a quantity: no digit grouping
	return T(ctx, "%s, revision %s", key, n)
}

// processAtVersion names a pinned process version.
func processAtVersion(ctx context.Context, key string, version int) string {
	n := strconv.Itoa(version)
	return T(ctx, "%s, version %s", key, n)
}
