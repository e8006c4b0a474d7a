package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// maxDeferReason bounds a defer's reason: a diagnostic, not a payload.
const maxDeferReason = 500

// Deferral is the answer to a defer.
type Deferral struct {
	Status     string
	DeferredAt time.Time
	DeadlineAt *time.Time
	// Reason is the reason stored: the first deferral's, when a second
	// asked again with another (nil for none).
	Reason *string
	// Attempt is the attempt that deferred it: a worker stream frees that
	// one.
	Attempt int
}

// Defer hands a held reservation over to be settled later (a human, a slow
// partner): the occurrence becomes deferred, with no lock and no expiry;
// its deadline still applies and a stop still cancels it. Any worker of
// the same consumer may then complete or fail it by id, or ask a settle
// token for a front end. Deferring it again (the same consumer) answers
// the same.
func (e *Engine) Defer(ctx context.Context, ref WorkerRef, reason string) (Deferral, error) {
	if len(reason) > maxDeferReason {
		return Deferral{}, fault.New(fault.BadRequest, "invalid_request", "the defer is invalid").WithErrors(
			[]fault.FieldError{{Path: "/reason", Message: "must be at most 500 bytes"}})
	}
	var out Deferral
	err := e.withHeld(ctx, ref, func(q *queries.Queries, r *run, o queries.Occurrence) error {
		if o.Status == StatusDeferred && o.ConsumerID != nil && *o.ConsumerID == ref.ConsumerID {
			out = Deferral{Status: StatusDeferred, DeferredAt: *o.DeferredAt, DeadlineAt: o.DeadlineAt, Reason: o.DeferReason, Attempt: int(o.Attempts)}
			return nil
		}
		if err := lockRefusal(o, ref, r.lockedAt); err != nil {
			return err
		}
		protected, err := e.protectedOf(ctx, q, o)
		if err != nil {
			return err
		}
		// No reason is none (null), never "": the answer, the
		// observations and a second deferral's answer agree.
		var stored *string
		if reason = scrubMessage(reason, protected); reason != "" {
			stored = &reason
		}
		if err := q.OccurrenceDefer(ctx, queries.OccurrenceDeferParams{ID: o.ID, Attempt: o.Attempts, Now: r.now, Reason: stored}); err != nil {
			return err
		}
		out = Deferral{Status: StatusDeferred, DeferredAt: r.now, DeadlineAt: o.DeadlineAt, Reason: stored, Attempt: int(o.Attempts)}
		return nil
	})
	return out, wrap("defer", err)
}

// Release hands a held reservation back at once without spending an
// attempt (graceful shutdown): the occurrence is available again now, the
// attempt ends released, and waiting fetches are woken.
func (e *Engine) Release(ctx context.Context, ref WorkerRef) (Settlement, error) {
	ref.handingBack = true
	digest := e.digest(releaseCanonical(ref.WorkerID))
	var out Settlement
	err := e.withHeld(ctx, ref, func(q *queries.Queries, r *run, o queries.Occurrence) error {
		held := lockRefusal(o, ref, r.lockedAt)
		if o.Status == StatusDeferred {
			held = fault.New(fault.Conflict, "not_reserved", "occurrence %s is deferred: there is no reservation to release", o.ID)
		}
		if held == nil {
			return r.release(o, OutcomeReleased, &out, &digest)
		}
		// An identical release whose answer was lost answers what it
		// got, as a settlement's does (polyglot QA: "not reserved; fetch
		// it first" to a worker that had released it).
		prior, err := q.AttemptReportAnswer(ctx, queries.AttemptReportAnswerParams{OccurrenceID: o.ID, ConsumerID: &ref.ConsumerID, ReportDigest: &digest, Number: ref.named()})
		switch {
		case isNoRows(err):
			return held
		case err != nil:
			return err
		}
		if err := json.Unmarshal(prior.Answer, &out); err != nil {
			return err
		}
		out.Attempt, out.Replayed = int(prior.Number), true
		return nil
	})
	return out, wrap("release", err)
}

// releaseCanonical is what a worker's release is recognised by when it
// comes again: the worker's id (a release carries nothing else).
func releaseCanonical(workerID string) []byte {
	b, _ := json.Marshal(struct{ Worker, Release string }{workerID, "release"})
	return b
}

// release makes o available again at once, its attempt ended with outcome
// and given back to the budget. digest, when set, is the worker's
// release's (see Release): its answer is kept for a replay.
func (r *run) release(o queries.Occurrence, outcome string, out *Settlement, digest *string) error {
	row, err := r.q.OccurrenceRelease(r.ctx, queries.OccurrenceReleaseParams{ID: o.ID, Now: r.now})
	if err != nil {
		return err
	}
	*out = Settlement{Status: StatusAvailable, AttemptsLeft: attemptsLeft(row), AvailableAt: &row.AvailableAt, DeadlineAt: o.DeadlineAt}
	var answer []byte
	if digest != nil {
		answer, _ = json.Marshal(*out)
	}
	if err := r.q.AttemptEnd(r.ctx, queries.AttemptEndParams{OccurrenceID: o.ID, Number: o.Attempts, Outcome: outcome, Now: &r.now,
		ReportDigest: digest, ReportAnswer: answer}); err != nil {
		return err
	}
	out.Attempt = int(o.Attempts)
	return r.q.Notify(r.ctx, queries.NotifyParams{Channel: ChannelOccurrence, Payload: AvailabilityPayload(o.Mode, o.DefinitionKey, int(o.Revision), r.now)})
}

// settleTokenPrefix tells settle tokens from staff and consumer tokens, so
// a request is authenticated against the right table; a settle token
// presented anywhere but complete and fail is refused (401), saying where
// it is taken.
const settleTokenPrefix = auth.SettleTokenPrefix

// MaxSettleTokenLife bounds a settle token's life when the occurrence has
// no nearer deadline.
const MaxSettleTokenLife = 30 * 24 * time.Hour

// SettleTokenWorker is the worker id a settle token's call goes by when it
// names none (every protocol alike): it is recorded as who settled.
const SettleTokenWorker = "settle-token"

// IsSettleToken reports whether token has the form of a settle token.
func IsSettleToken(token string) bool { return strings.HasPrefix(token, settleTokenPrefix) }

// SettleToken is an occurrence-scoped token, shown once.
type SettleToken struct {
	Token     string
	ExpiresAt time.Time
}

// IssueSettleToken returns a token that settles one deferred occurrence of
// ref's consumer and nothing else: accepted only by that occurrence's
// complete and fail, until its deadline or MaxSettleTokenLife; once the
// attempt is settled it settles nothing more (see SettleTokenGet). Only
// its hash is stored; the log names it by its hash's first 12 hex digits,
// so that a token found in the wrong place can be matched to its issue.
func (e *Engine) IssueSettleToken(ctx context.Context, ref WorkerRef) (SettleToken, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return SettleToken{}, err
	}
	token := settleTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	var out SettleToken
	err := e.withHeld(ctx, ref, func(q *queries.Queries, r *run, o queries.Occurrence) error {
		if err := lockRefusal(o, ref, r.lockedAt); err != nil {
			return err
		}
		if o.Status != StatusDeferred {
			return fault.New(fault.Conflict, "not_deferred", "occurrence %s is not deferred: defer it first (a settle token is for settling it later)", o.ID)
		}
		expires := r.now.Add(MaxSettleTokenLife)
		if o.DeadlineAt != nil && o.DeadlineAt.Before(expires) {
			expires = *o.DeadlineAt
		}
		sum := sha256.Sum256([]byte(token))
		attempt := o.Attempts
		if err := q.SettleTokenInsert(ctx, queries.SettleTokenInsertParams{Hash: sum[:], OccurrenceID: o.ID, ConsumerID: ref.ConsumerID, ExpiresAt: expires,
			Attempt: &attempt}); err != nil {
			return err
		}
		out = SettleToken{Token: token, ExpiresAt: expires}
		return nil
	})
	if err != nil {
		return SettleToken{}, wrap("settle token", err)
	}
	sum := sha256.Sum256([]byte(out.Token))
	e.logAccess(ctx, EventSettleTokenIssued, "occurrence", ref.Occurrence, "consumer", ref.ConsumerID, "worker_id", ref.WorkerID,
		"token_sha256_prefix", hex.EncodeToString(sum[:6]),
		"expires_at", out.ExpiresAt.UTC().Format(time.RFC3339))
	return out, nil
}

// RevokeSettleTokens revokes the settle tokens consumerID was issued for
// an occurrence its grants cover, at once (a front end's link leaked, or
// the approval moved to another desk), and says how many there were. The
// occurrence itself is left as it is: its consumer's workers still settle
// it, and a new token may be issued. An occurrence the consumer cannot see
// is not_found.
func (e *Engine) RevokeSettleTokens(ctx context.Context, consumerID int64, occurrence uuid.UUID) (int64, error) {
	if _, err := e.ConsumerOccurrence(ctx, consumerID, occurrence); err != nil {
		return 0, err
	}
	n, err := e.q.SettleTokenRevoke(ctx, queries.SettleTokenRevokeParams{OccurrenceID: occurrence, ConsumerID: consumerID})
	if err != nil {
		return 0, wrap("revoke settle tokens", err)
	}
	if n > 0 {
		e.logAccess(ctx, EventSettleTokensRevoked, "occurrence", occurrence, "consumer", consumerID, "settle_tokens_revoked", n)
	}
	return n, nil
}

// SettleScope is what a settle token may do: settle one attempt of one
// occurrence on behalf of one consumer.
type SettleScope struct {
	Occurrence uuid.UUID
	ConsumerID int64
	// Attempt is the attempt the token was issued for (0 for a token
	// issued before tokens named it): the settlement checks it under the
	// occurrence's lock, where the occurrence cannot move on meanwhile.
	Attempt int32
}

// errSettleToken is the one refusal of a settle token, whatever the cause
// (unknown, expired, revoked): it reveals nothing. A token of a settled
// attempt is not refused here, even once the occurrence was retried: the
// route answers it as it answers the consumer (a replay, already_settled,
// occurrence_cancelled), so that a front end resending a lost answer's
// request learns what became of it.
var errSettleToken = fault.New(fault.Unauthorized, "unauthorized", "the settle token is unknown, expired, or revoked with its consumer's tokens")

// AuthenticateSettleToken resolves a settle token to its scope.
func (e *Engine) AuthenticateSettleToken(ctx context.Context, token string) (SettleScope, error) {
	if !IsSettleToken(token) {
		return SettleScope{}, errSettleToken
	}
	sum := sha256.Sum256([]byte(token))
	row, err := e.q.SettleTokenGet(ctx, queries.SettleTokenGetParams{Hash: sum[:], Now: e.at()})
	if isNoRows(err) {
		return SettleScope{}, errSettleToken
	}
	if err != nil {
		return SettleScope{}, wrap("settle token", err)
	}
	if !row.Live || subtle.ConstantTimeCompare(row.Hash, sum[:]) != 1 {
		return SettleScope{}, errSettleToken
	}
	scope := SettleScope{Occurrence: row.OccurrenceID, ConsumerID: row.ConsumerID}
	if row.Attempt != nil {
		scope.Attempt = *row.Attempt
	}
	return scope, nil
}
