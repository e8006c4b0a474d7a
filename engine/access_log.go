package engine

import (
	"context"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/pgfault"
)

// Access events: who changed who may do what, and where Relais sends
// data. They are logged (stable event names, the acting token named) once
// the change committed; the operator audit log (DESIGN §12) records
// operator actions on instances only.
const (
	EventTokenCreated         = "token.created"
	EventTokenRevoked         = "token.revoked"
	EventConsumerCreated      = "consumer.created"
	EventConsumerGrantsSet    = "consumer.grants_set"
	EventConsumerTokenRotated = "consumer.token_rotated"
	EventConsumerRevoked      = "consumer.revoked"
	EventDestinationPut       = "destination.put"
	EventDestinationDeleted   = "destination.deleted"
	// A settle token is a credential: who issued one, for what, until when.
	EventSettleTokenIssued = "settle_token.issued"
	// EventSettleTokensRevoked: a consumer revoked its settle tokens of an
	// occurrence.
	EventSettleTokensRevoked = "settle_token.revoked"
	// A revision that lowers a field's classification: from it on, values
	// masked and sealed until then are shown and stored in clear. Logged at
	// WARN, for a security team to alert on.
	EventProtectionLowered = "definition.protection_lowered"
	// A process version whose inputs are less protected than the last
	// version's: logged as EventProtectionLowered is, under a name of its
	// own so that an alert tells the two apart (designer QA).
	EventProcessProtectionLowered = "process.protection_lowered"
	// A protected value that broke the contract of the node it was bound
	// to: which node an instance stops at tells whether it satisfied that
	// node's constraints, so revisions constraining protected fields can
	// probe their values. Logged at WARN (never the value), for a security
	// team to alert on.
	EventProtectedValueRefused = "occurrence.protected_value_refused"
)

// logAccess logs an access event of ctx's principal (the API's or the
// console's caller; "system" without one, as for the command line).
func (e *Engine) logAccess(ctx context.Context, event string, attrs ...any) {
	e.logger.InfoContext(ctx, "access changed", append(actorAttrs(ctx, event), attrs...)...)
}

// logProtectionLowered logs event, at WARN, a revision or process version that
// lowered the classification of fields (attrs name it): once committed, or
// as possible when the database's answer was lost (err), since the change
// may have landed and an apply run again would then find it unchanged and
// say nothing.
func (e *Engine) logProtectionLowered(ctx context.Context, err error, event string, fields []string, attrs ...any) {
	switch {
	case len(fields) == 0:
	case err == nil:
		e.logger.WarnContext(ctx, "protection lowered", append(append(actorAttrs(ctx, event), attrs...), "fields", fields)...)
	case pgfault.Lost(err):
		e.logger.WarnContext(ctx, "protection may have been lowered: the database's answer was lost", append(append(actorAttrs(ctx, event), attrs...), "fields", fields, "outcome", "unknown")...)
	}
}

// actorAttrs are an access event's name and ctx's principal.
func actorAttrs(ctx context.Context, event string) []any {
	actor, tokenID, role := "system", int64(0), ""
	if p, ok := auth.FromContext(ctx); ok {
		actor, tokenID, role = p.Name, p.TokenID, string(p.Role)
	}
	return []any{"event", event, "actor", actor, "actor_token_id", tokenID, "actor_role", role}
}
