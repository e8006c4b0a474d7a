-- name: AttemptEnd :exec
update attempts
set outcome = @outcome::text, ended_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    error_code = sqlc.narg('error_code'), error_message = sqlc.narg('error_message'),
    report_digest = sqlc.narg('report_digest'), report_answer = sqlc.narg('report_answer')
where occurrence_id = @occurrence_id and number = @number and ended_at is null;

-- name: AttemptReportAnswer :one
-- The answer a failure report got, and the attempt it ended, for an
-- identical replay of it: of the given attempt only when number is set (a
-- settle token's, which answers for its own attempt and no later one).
select number, report_answer::jsonb as answer from attempts
where occurrence_id = @occurrence_id and consumer_id = @consumer_id and report_digest = @report_digest
  and (sqlc.narg('number')::int is null or number = sqlc.narg('number')::int)
order by number desc
limit 1;

-- name: AttemptEnding :one
-- How an attempt ended, and when: a lock_expired refusal says whether the
-- lock ran out or the worker's stream ended (disconnected).
select outcome, ended_at from attempts
where occurrence_id = @occurrence_id and number = @number;

-- name: AttemptExtend :execrows
-- Extends an open attempt's lock: none when the attempt ended, which an
-- extension waiting for the occurrence's lock may learn only here (a
-- stream's hand-back that committed meanwhile ends the lock at its own
-- clock, which can be later than the extension's).
update attempts set lock_expires_at = @lock_expires_at::timestamptz
where occurrence_id = @occurrence_id and number = @number and ended_at is null;

-- name: AttemptCancelOpen :exec
-- A push attempt open is a call in flight: the stop aborts it, but what
-- the destination did with the request cannot be known (the console shows
-- the message on the attempt, as the stop's confirmation warned).
update attempts a
set outcome = 'cancelled', ended_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    error_message = case
        when o.mode = 'push'
        then 'the instance was stopped during the call, which was aborted: the destination may already have acted on the request (check there)'
        when o.deferred_at is not null
        then 'the instance was stopped while the task was deferred: a settlement by id is refused, but the work it waited for may already be done'
        else 'the instance was stopped while the worker held the task: its report is refused, but it may already have done the work'
    end
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
-- A settle token is good while unexpired and its attempt is, or was, the
-- occurrence's: deferred, it settles it; settled since (ended, or failed
-- for a retry), the route answers the token as it would the consumer
-- (the same report again, its first answer; anything else,
-- already_settled), and never lets it settle a later attempt. One issued
-- before tokens named their attempt (migration 0028) is good while its
-- occurrence is deferred (its null attempt must not make the answer null
-- for an ended one: no token).
select t.occurrence_id, t.consumer_id, t.hash, t.attempt,
       (t.expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
        and (t.attempt is null and o.status = 'deferred'
             or t.attempt is not null and t.attempt <= o.attempts))::boolean as live
from settle_tokens t join occurrences o on o.id = t.occurrence_id
where t.hash = @hash;

-- name: SettleTokenDeleteByConsumer :execrows
-- A consumer's settle tokens, revoked with its tokens (a rotation without
-- overlap, the answer to a leak; a revocation): they were issued on the
-- strength of a token that no longer holds.
delete from settle_tokens where consumer_id = @consumer_id;

-- name: SettleTokenDeleteUnnumbered :exec
-- The tokens issued before tokens named their attempt (migration 0028):
-- once the occurrence is failed for a retry nothing tells them from the
-- next attempt's, which they must not settle.
delete from settle_tokens where occurrence_id = @occurrence_id and attempt is null;

-- name: SettleTokenRevoke :execrows
-- A consumer's settle tokens of one occurrence (a front end's link leaked,
-- or the approval moved to another desk).
delete from settle_tokens where occurrence_id = @occurrence_id and consumer_id = @consumer_id;

-- name: AttemptSettledBy :exec
-- Records who settled a deferred attempt (migration 0017).
update attempts set settled_by = @settled_by::text, settled_with_token = @settled_with_token::boolean
where occurrence_id = @occurrence_id and number = @number;

-- name: AttemptNoteRefusal :execrows
-- A report refused to the worker holding the occurrence's open attempt
-- (its consumer's, for a deferred attempt or a settle token's), noted on
-- that attempt; nothing when the reporter holds no such attempt, its lock
-- lapsed included (a late worker's refusal must not say it answered in
-- time: verifier QA).
update attempts a
set refusals = a.refusals + 1, refused_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    refusal_code = @code::text, refusal_pointers = @pointers::text[]
from occurrences o
where o.id = @occurrence_id and a.occurrence_id = o.id and a.number = o.attempts and a.ended_at is null
  and (o.status = 'deferred' or o.status = 'reserved' and o.lock_expires_at > coalesce(sqlc.narg('now')::timestamptz, now()))
  and a.consumer_id = @consumer_id
  and (@any_worker::boolean or o.status = 'deferred' or a.worker_id = @worker_id::text)
  and (sqlc.narg('number')::int is null or a.number = sqlc.narg('number')::int);
