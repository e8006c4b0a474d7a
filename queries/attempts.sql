-- name: AttemptEnd :exec
update attempts
set outcome = @outcome::text, ended_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    error_code = sqlc.narg('error_code'), error_message = sqlc.narg('error_message'),
    report_digest = sqlc.narg('report_digest'), report_answer = sqlc.narg('report_answer')
where occurrence_id = @occurrence_id and number = @number and ended_at is null;

-- name: AttemptReportAnswer :one
-- The answer a failure report got, and the attempt it ended, for an
-- identical replay of it.
select number, report_answer::jsonb as answer from attempts
where occurrence_id = @occurrence_id and consumer_id = @consumer_id and report_digest = @report_digest
order by number desc
limit 1;

-- name: AttemptEnding :one
-- How an attempt ended, and when: a lock_expired refusal says whether the
-- lock ran out or the worker's stream ended (disconnected).
select outcome, ended_at from attempts
where occurrence_id = @occurrence_id and number = @number;

-- name: AttemptExtend :exec
update attempts set lock_expires_at = @lock_expires_at::timestamptz
where occurrence_id = @occurrence_id and number = @number;

-- name: AttemptCancelOpen :exec
update attempts a
set outcome = 'cancelled', ended_at = coalesce(sqlc.narg('now')::timestamptz, now())
from occurrences o
where o.instance_id = @instance_id and a.occurrence_id = o.id and a.ended_at is null;

-- name: AttemptListByOccurrence :many
select a.*, c.name as consumer_name
from attempts a left join consumers c on c.id = a.consumer_id
where a.occurrence_id = @occurrence_id
order by a.number;

-- name: SettleTokenInsert :exec
insert into settle_tokens (hash, occurrence_id, consumer_id, expires_at, attempt)
values (@hash, @occurrence_id, @consumer_id, @expires_at, @attempt);

-- name: SettleTokenGet :one
-- A settle token is good while unexpired and its attempt is the
-- occurrence's: deferred (it settles it) or ended (it is told how, as
-- the consumer would be). One issued before tokens named their attempt
-- (migration 0028) is good while its occurrence is deferred (its null
-- attempt must not make the answer null for an ended one: no token).
select t.occurrence_id, t.consumer_id, t.hash,
       (t.expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
        and (o.status = 'deferred' and (t.attempt is null or t.attempt = o.attempts)
             or o.status in ('completed', 'failed', 'cancelled') and t.attempt is not null and t.attempt = o.attempts))::boolean as live
from settle_tokens t join occurrences o on o.id = t.occurrence_id
where t.hash = @hash;

-- name: SettleTokenDeleteByConsumer :execrows
-- A consumer's settle tokens, revoked with its tokens (a rotation without
-- overlap, the answer to a leak; a revocation): they were issued on the
-- strength of a token that no longer holds.
delete from settle_tokens where consumer_id = @consumer_id;

-- name: SettleTokenDeleteByOccurrence :exec
delete from settle_tokens where occurrence_id = @occurrence_id;

-- name: SettleTokenRevoke :execrows
-- A consumer's settle tokens of one occurrence (a front end's link leaked,
-- or the approval moved to another desk).
delete from settle_tokens where occurrence_id = @occurrence_id and consumer_id = @consumer_id;

-- name: AttemptSettledBy :exec
-- Records who settled a deferred attempt (migration 0017).
update attempts set settled_by = @settled_by::text, settled_with_token = @settled_with_token::boolean
where occurrence_id = @occurrence_id and number = @number;
