-- name: OccurrenceInsert :one
insert into occurrences (
    id, instance_id, node, definition_key, revision, mode, status,
    priority, max_attempts, retry_delay, deadline, deadline_at, destination, timeout,
    available_at, claimable_at, inputs, sealed_inputs, error_code, error_message, settled_at,
    process_key, business_key, process_version, retry_backoff, max_retry_delay)
values (
    @id, @instance_id, @node, @definition_key, @revision, @mode, @status,
    @priority, @max_attempts, @retry_delay, @deadline, @deadline_at, @destination, @timeout,
    @available_at, @claimable_at, @inputs, @sealed_inputs, @error_code, @error_message, @settled_at,
    @process_key, @business_key, @process_version, @retry_backoff, @max_retry_delay)
on conflict (instance_id, node) do nothing
returning *;

-- name: OccurrenceInsertNew :exec
-- An occurrence of an instance created in the same transaction: no other
-- transaction can have entered its node, so nothing to conflict with and
-- nothing to read back (the engine builds the row it wrote, created_at
-- included, and the insert travels with the next statement).
insert into occurrences (
    id, instance_id, node, definition_key, revision, mode, status,
    priority, max_attempts, retry_delay, deadline, deadline_at, destination, timeout,
    available_at, claimable_at, inputs, sealed_inputs, error_code, error_message, settled_at,
    process_key, business_key, process_version, retry_backoff, max_retry_delay, created_at)
values (
    @id, @instance_id, @node, @definition_key, @revision, @mode, @status,
    @priority, @max_attempts, @retry_delay, @deadline, @deadline_at, @destination, @timeout,
    @available_at, @claimable_at, @inputs, @sealed_inputs, @error_code, @error_message, @settled_at,
    @process_key, @business_key, @process_version, @retry_backoff, @max_retry_delay, @created_at);

-- name: OccurrenceGet :one
select * from occurrences where id = @id;

-- name: OccurrenceLock :one
-- The occurrence, locked, with the database's clock once it is: a lock
-- expiry is judged against it, since a hand-back that committed while this
-- waited set the expiry to its own clock, later than this transaction's.
select sqlc.embed(o), coalesce(sqlc.narg('now')::timestamptz, clock_timestamp())::timestamptz as locked_at
from occurrences o where o.id = @id for update of o;

-- name: OccurrenceLockSkipLocked :one
select * from occurrences where id = @id for update skip locked;

-- name: OccurrenceListByInstance :many
select * from occurrences where instance_id = @instance_id order by created_at, id;

-- name: OccurrenceObserve :one
-- An occurrence as observers see it: with whether its lock lapsed (it is
-- then available again, though stored reserved).
select sqlc.embed(o), relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now())) as lapsed
from occurrences o where o.id = @id;

-- name: OccurrenceObserveByInstance :many
-- An instance's path: its occurrences without their values, which the
-- path does not show.
select sqlc.embed(o), relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now())) as lapsed
from occurrence_heads o where o.instance_id = @instance_id order by o.created_at, o.id;

-- name: OccurrenceClaimPull :many
-- One statement claims. Per subscribed (definition, revision) it takes, with
-- SKIP LOCKED, the first ready occurrences and the first reserved ones whose
-- lock expired with attempts left (re-offered by the claim itself: no
-- sweeper), then keeps the best max_tasks of them. Both are ordered by
-- priority, then the time they became available (available_at, or for a
-- re-offer its lock expiry), then id. Expired locks are found through their
-- expiry index and sorted: few wait there, since every claim takes them.
-- Among definitions of one priority the claim takes turns, so that one
-- definition's backlog does not starve the others a worker subscribes to:
-- each definition's first candidate, then each one's second, and so on.
-- The definitions with candidates are ranked by key, and @turn rotates
-- which of them goes first (the engine draws it at random for each claim,
-- so that claims of one task serve each as often as the others, whatever
-- other workers claim meanwhile; an idle definition takes no turn).
-- Rows locked but not kept are released when the statement commits.
with subs as (
    select unnest(@definition_keys::text[]) as definition_key,
           unnest(@revisions::integer[])   as revision
),
candidates as (
    select c.id, c.priority, c.at, s.definition_key
    from subs s
    cross join lateral (
        select o.id, o.priority, o.available_at as at
        from occurrences o
        where o.status = 'available' and o.mode = 'pull'
          and o.definition_key = s.definition_key and o.revision = s.revision
          and o.available_at <= coalesce(sqlc.narg('now')::timestamptz, now())
          and (o.deadline_at is null or o.deadline_at > coalesce(sqlc.narg('now')::timestamptz, now()))
        order by o.priority desc, o.available_at, o.id
        limit @max_tasks
        for update of o skip locked
    ) c
    union all
    select x.id, x.priority, x.at, s.definition_key
    from subs s
    cross join lateral (
        select o.id, o.priority, o.lock_expires_at as at
        from occurrences o
        where o.definition_key = s.definition_key and o.revision = s.revision
          and relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at,
                                 coalesce(sqlc.narg('now')::timestamptz, now()))
        order by o.priority desc, o.lock_expires_at, o.id
        limit @max_tasks
        for update of o skip locked
    ) x
),
locked as (
    select id from (
        select id, priority, at, turn, rank, max(rank) over (partition by priority) as ranks
        from (
            select id, priority, at,
                   row_number() over (partition by definition_key, priority order by at, id) as turn,
                   dense_rank() over (partition by priority order by definition_key) as rank
            from candidates
        ) c
    ) t
    order by priority desc, turn, (rank - 1 + @turn::bigint) % ranks, at, id
    limit @max_tasks
),
claimed as (
    update occurrences o
    set status          = 'reserved',
        attempts        = o.attempts + 1,
        consumer_id     = @consumer_id,
        worker_id       = @worker_id,
        reserved_at     = coalesce(sqlc.narg('now')::timestamptz, now()),
        lock_expires_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @lock_duration::interval,
        claimable_at    = case when o.attempts + 1 < o.max_attempts + o.attempt_credit then coalesce(sqlc.narg('now')::timestamptz, now()) + @lock_duration::interval end
    from locked
    where o.id = locked.id
    returning o.*
),
expired as (
    update attempts a
    -- Defensive: only a deferred attempt has no lock expiry, and no claim
    -- takes a deferred occurrence (its deadline or a settlement ends the
    -- attempt first); ended_at must never be null once an outcome is set.
    set outcome = 'expired', ended_at = coalesce(a.lock_expires_at, c.reserved_at)
    from claimed c
    where a.occurrence_id = c.id and a.number = c.attempts - 1 and a.ended_at is null
    returning a.occurrence_id, a.number, a.consumer_id, a.worker_id, a.ended_at, c.definition_key
),
lapses as (
    -- The lapse counts against the worker that let it lapse (the worker
    -- catalog's lapsed count); a claim takes few lapsed locks back, so
    -- this writes nothing on most claims.
    insert into worker_lapses (occurrence_id, attempt, consumer_id, worker_id, definition_key, lapsed_at)
    select x.occurrence_id, x.number, x.consumer_id, x.worker_id, x.definition_key, x.ended_at
    from expired x
    where x.consumer_id is not null and x.worker_id is not null
    on conflict do nothing
),
inserted as (
    insert into attempts (occurrence_id, number, consumer_id, worker_id, request_id, request_digest, reserved_at, lock_expires_at)
    select c.id, c.attempts, @consumer_id, @worker_id, sqlc.narg('request_id'), sqlc.narg('request_digest')::bytea, c.reserved_at, c.lock_expires_at
    from claimed c
)
select * from claimed
order by priority desc, available_at, id;

-- name: ClaimRequestLock :exec
-- Serializes the claims of one request_id of a worker until the
-- transaction ends: a fetch repeated while the first still runs (a proxy's
-- retry, a hedged request, another replica) would otherwise find nothing
-- to replay and claim more. The replay's lookup that follows, a statement
-- of its own, sees what the first committed.
select pg_advisory_xact_lock(hashtextextended('relais claim ' || @consumer_id::bigint || '/' || @worker_id::text || '/' || @request_id::text, 0));

-- name: OccurrenceReplayRequest :many
select sqlc.embed(o), a.request_digest from attempts a
join occurrences o on o.id = a.occurrence_id
where a.consumer_id = @consumer_id and a.worker_id = @worker_id and a.request_id = @request_id
  and o.status = 'reserved' and o.attempts = a.number and o.lock_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
order by o.priority desc, o.available_at, o.id;

-- name: OccurrenceNextClaimable :one
with subs as (
    select unnest(@definition_keys::text[]) as definition_key,
           unnest(@revisions::integer[])   as revision
)
select o.claimable_at::timestamptz
from occurrences o
join subs s on o.definition_key = s.definition_key and o.revision = s.revision
where o.mode = 'pull' and o.claimable_at > coalesce(sqlc.narg('now')::timestamptz, now())
order by o.claimable_at
limit 1;

-- name: OccurrenceClaimPush :many
-- Past lock_expires_at, the replica that made the call is presumed dead and
-- the timer fails the occurrence with outcome_unknown: never called again.
-- By priority, then the destinations take turns (each one's first ready
-- call, then each one's second; the destinations with ready calls ranked
-- by name, @turn rotating which goes first, moved on by the engine at each
-- claim), then by available_at and id: one destination's backlog does not
-- hold back the calls to the others. The calls are chosen first, then
-- locked: locking every destination's first max_tasks would write a lock
-- on rows the claim does not keep. One another replica locked meanwhile
-- is skipped, and one it claimed meanwhile is read again and left.
with candidates as (
    select c.id, c.priority, c.available_at, d.name as destination
    from destinations d
    cross join lateral (
        select o.id, o.priority, o.available_at
        from occurrences o
        where o.destination = d.name and o.mode = 'push' and o.status = 'available'
          and o.available_at <= coalesce(sqlc.narg('now')::timestamptz, now())
          and (o.deadline_at is null or o.deadline_at > coalesce(sqlc.narg('now')::timestamptz, now()))
        order by o.priority desc, o.available_at, o.id
        limit @max_tasks
    ) c
),
chosen as (
    select id from (
        select id, priority, available_at, turn, rank, max(rank) over (partition by priority) as ranks
        from (
            select id, priority, available_at,
                   row_number() over (partition by destination, priority order by available_at, id) as turn,
                   dense_rank() over (partition by priority order by destination) as rank
            from candidates
        ) c
    ) t
    order by priority desc, turn, (rank - 1 + @turn::bigint) % ranks, available_at, id
    limit @max_tasks
),
locked as (
    select o.id from occurrences o
    where o.id in (select id from chosen) and o.mode = 'push' and o.status = 'available'
    for update of o skip locked
),
claimed as (
    update occurrences o
    set status          = 'reserved',
        attempts        = o.attempts + 1,
        worker_id       = @worker_id,
        reserved_at     = coalesce(sqlc.narg('now')::timestamptz, now()),
        claimable_at    = null,
        lock_expires_at = coalesce(sqlc.narg('now')::timestamptz, now()) + o.timeout + @grace::interval
    from locked
    where o.id = locked.id
    returning o.*
),
inserted as (
    insert into attempts (occurrence_id, number, worker_id, reserved_at, lock_expires_at)
    select c.id, c.attempts, @worker_id, c.reserved_at, c.lock_expires_at from claimed c
)
select * from claimed;

-- name: OccurrenceComplete :exec
-- The occurrence and its attempt settle in one statement: one round trip.
with done as (
    update occurrences
    set status = 'completed', outputs = @outputs, sealed_outputs = sqlc.narg('sealed_outputs'),
        outputs_digest = @outputs_digest::text, route = sqlc.narg('route'),
        settled_at = @now::timestamptz, claimable_at = null
    where id = @id
    returning id, attempts
)
update attempts a
set outcome = 'completed', ended_at = @now::timestamptz
from done
where a.occurrence_id = done.id and a.number = done.attempts and a.ended_at is null;

-- name: OccurrenceFail :exec
update occurrences
set status = 'failed', error_code = @error_code, error_message = @error_message,
    settled_at = coalesce(sqlc.narg('now')::timestamptz, now()), claimable_at = null
where id = @id;

-- name: OccurrenceRetry :one
-- A deferred occurrence failed for a retry is no longer deferred: the next
-- attempt is a worker's reservation like any other.
update occurrences
set status = 'available', available_at = @available_at::timestamptz, claimable_at = @available_at::timestamptz,
    lock_expires_at = null, error_code = @error_code, error_message = @error_message,
    deferred_at = null, defer_reason = null
where id = @id
returning *;

-- name: OccurrenceExtend :one
update occurrences
set lock_expires_at = @lock_expires_at::timestamptz,
    claimable_at = case when attempts < max_attempts + attempt_credit then @lock_expires_at::timestamptz end
where id = @id
returning *;

-- name: OccurrenceCancelOpen :many
update occurrences
set status = 'cancelled', settled_at = coalesce(sqlc.narg('now')::timestamptz, now()), claimable_at = null
where instance_id = @instance_id and status in ('available', 'reserved', 'deferred')
returning id, mode;

-- name: OccurrenceDueForTimer :many
-- Work that only time moves forward: passed deadlines, the last attempt's
-- expired lock, and push calls whose replica died (outcome unknown). The
-- longest overdue come first, each with how overdue it is (the timer's
-- lag). Each branch walks its own index in due order and stops at @max,
-- so a backlog costs at most twice @max rows whatever its size.
select id, instance_id, min(due_at)::timestamptz as due_at,
       (coalesce(sqlc.narg('now')::timestamptz, now()) - min(due_at))::interval as overdue
from (
    (select id, instance_id, deadline_at as due_at from occurrences
     where status in ('available', 'reserved', 'deferred') and deadline_at <= coalesce(sqlc.narg('now')::timestamptz, now())
     order by deadline_at
     limit @max)
    union all
    (select id, instance_id, lock_expires_at as due_at from occurrences
     where status = 'reserved' and lock_expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
       and (mode = 'push' or attempts >= max_attempts + attempt_credit)
     order by lock_expires_at
     limit @max)
) due
group by id, instance_id
order by min(due_at), id
limit @max;

-- name: OccurrenceList :many
select sqlc.embed(o), relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now())) as lapsed
from occurrence_heads o
where (sqlc.narg('definition_key')::text is null or o.definition_key = sqlc.narg('definition_key'))
  and (sqlc.narg('status')::text is null
       -- A lapsed lock is available again though stored reserved. Each status
       -- is written out so each keeps an index-ordered plan.
       or (sqlc.narg('status') = 'available'
           and (o.status = 'available'
                or relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now()))))
       or (sqlc.narg('status') = 'reserved'
           and o.status = 'reserved'
           and not relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now())))
       or (sqlc.narg('status') not in ('available', 'reserved') and o.status = sqlc.narg('status')))
  and (sqlc.narg('instance_id')::uuid is null or o.instance_id = sqlc.narg('instance_id'))
  and (sqlc.narg('revision')::integer is null or o.revision = sqlc.narg('revision'))
  and (sqlc.narg('process_key')::text is null or o.process_key = sqlc.narg('process_key'))
  and (sqlc.narg('business_key')::text is null or o.business_key = sqlc.narg('business_key'))
  and (sqlc.narg('error_code')::text is null or o.error_code = sqlc.narg('error_code'))
  -- Ids are UUIDv7: a creation window is an id range, in the list's order.
  and (sqlc.narg('created_from')::uuid is null or o.id >= sqlc.narg('created_from'))
  and (sqlc.narg('created_to')::uuid is null or o.id < sqlc.narg('created_to'))
  -- The id range finds the rows in the index's order; created_at, the time
  -- the API shows, decides (an id is minted before its transaction began).
  and (sqlc.narg('created_after')::timestamptz is null or o.created_at >= sqlc.narg('created_after'))
  and (sqlc.narg('created_before')::timestamptz is null or o.created_at < sqlc.narg('created_before'))
  and (sqlc.narg('settled_after')::timestamptz is null or o.settled_at >= sqlc.narg('settled_after'))
  and (sqlc.narg('settled_before')::timestamptz is null or o.settled_at < sqlc.narg('settled_before'))
  and (sqlc.narg('consumer_id')::bigint is null or exists (
        select 1 from attempts a where a.occurrence_id = o.id and a.consumer_id = sqlc.narg('consumer_id')))
  and (sqlc.narg('destination')::text is null or o.destination = sqlc.narg('destination'))
  -- Waiting out a retry delay, or (false) not (true: with status
  -- available, its index range).
  and (sqlc.narg('waiting_retry')::boolean is null or sqlc.narg('waiting_retry')::boolean = (o.status = 'available' and o.attempts > 0
       and o.available_at > coalesce(sqlc.narg('now')::timestamptz, now())))
  and (sqlc.narg('before')::uuid is null or o.id < sqlc.narg('before'))
order by o.id desc
limit @max;

-- name: OccurrenceListAfter :many
-- The page before a keyset page (the console's "previous page"): the same
-- filters as OccurrenceList, ids above the cursor in ascending order, which
-- the same indexes give read backwards; the caller reverses the page.
select sqlc.embed(o), relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now())) as lapsed
from occurrence_heads o
where (sqlc.narg('definition_key')::text is null or o.definition_key = sqlc.narg('definition_key'))
  and (sqlc.narg('status')::text is null
       -- A lapsed lock is available again though stored reserved. Each status
       -- is written out so each keeps an index-ordered plan.
       or (sqlc.narg('status') = 'available'
           and (o.status = 'available'
                or relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now()))))
       or (sqlc.narg('status') = 'reserved'
           and o.status = 'reserved'
           and not relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now())))
       or (sqlc.narg('status') not in ('available', 'reserved') and o.status = sqlc.narg('status')))
  and (sqlc.narg('instance_id')::uuid is null or o.instance_id = sqlc.narg('instance_id'))
  and (sqlc.narg('revision')::integer is null or o.revision = sqlc.narg('revision'))
  and (sqlc.narg('process_key')::text is null or o.process_key = sqlc.narg('process_key'))
  and (sqlc.narg('business_key')::text is null or o.business_key = sqlc.narg('business_key'))
  and (sqlc.narg('error_code')::text is null or o.error_code = sqlc.narg('error_code'))
  -- Ids are UUIDv7: a creation window is an id range, in the list's order.
  and (sqlc.narg('created_from')::uuid is null or o.id >= sqlc.narg('created_from'))
  and (sqlc.narg('created_to')::uuid is null or o.id < sqlc.narg('created_to'))
  -- The id range finds the rows in the index's order; created_at, the time
  -- the API shows, decides (an id is minted before its transaction began).
  and (sqlc.narg('created_after')::timestamptz is null or o.created_at >= sqlc.narg('created_after'))
  and (sqlc.narg('created_before')::timestamptz is null or o.created_at < sqlc.narg('created_before'))
  and (sqlc.narg('settled_after')::timestamptz is null or o.settled_at >= sqlc.narg('settled_after'))
  and (sqlc.narg('settled_before')::timestamptz is null or o.settled_at < sqlc.narg('settled_before'))
  and (sqlc.narg('consumer_id')::bigint is null or exists (
        select 1 from attempts a where a.occurrence_id = o.id and a.consumer_id = sqlc.narg('consumer_id')))
  and (sqlc.narg('destination')::text is null or o.destination = sqlc.narg('destination'))
  -- Waiting out a retry delay, or (false) not (true: with status
  -- available, its index range).
  and (sqlc.narg('waiting_retry')::boolean is null or sqlc.narg('waiting_retry')::boolean = (o.status = 'available' and o.attempts > 0
       and o.available_at > coalesce(sqlc.narg('now')::timestamptz, now())))
  and o.id > @after::uuid
order by o.id
limit @max;

-- name: OccurrenceDefer :exec
-- The attempt stays open (whoever settles the occurrence ends it) but,
-- like the occurrence, no longer has a lock that could expire.
with attempt as (
    update attempts set lock_expires_at = null
    where occurrence_id = @id and number = @attempt and ended_at is null
)
update occurrences
set status = 'deferred', deferred_at = @now::timestamptz, defer_reason = @reason,
    lock_expires_at = null, claimable_at = null
where id = @id;

-- name: OccurrenceRelease :one
-- Hands a reservation back at once; the attempt it spent is given back.
update occurrences
set status = 'available', available_at = @now::timestamptz, claimable_at = @now::timestamptz,
    lock_expires_at = null, attempt_credit = attempt_credit + 1
where id = @id
returning *;

-- name: OccurrenceSetCredit :exec
-- A worker lowering what is left: the attempts it gives up are waived.
update occurrences set attempt_credit = @attempt_credit, attempts_waived = attempts_waived + @waived where id = @id;

-- name: OccurrenceListSettled :many
-- What the bindings of an instance's next nodes may read: the outputs of
-- its completed occurrences and the errors of its failed ones.
select node, status, outputs, sealed_outputs, id, error_code, error_message from occurrences
where instance_id = @instance_id and status in ('completed', 'failed');

-- name: OccurrenceHeldAt :one
-- The failed occurrence a held instance stopped at: its latest settled.
select * from occurrences
where instance_id = @instance_id and status = 'failed'
order by settled_at desc, created_at desc
limit 1;

-- name: OccurrenceRetryHeld :one
-- An operator's retry: offered again now with a fresh max_attempts (the
-- credit makes attempts left equal max_attempts) and a fresh deadline from
-- now if its policy has one (a passed one would fail it again at once,
-- before any worker saw it), its attempt history and last error kept.
update occurrences
set status = 'available', available_at = @now::timestamptz, claimable_at = @now::timestamptz,
    lock_expires_at = null, settled_at = null, attempt_credit = attempts, attempts_waived = 0,
    deadline_at = deadline + @now::timestamptz, deferred_at = null, defer_reason = null
where id = @id and status = 'failed'
returning *;

-- name: OccurrenceWaitsRetryAt :one
-- Whether an instance's occurrence of a definition waits out a retry
-- delay (by the statement's clock, as OccurrenceRetryNow judges it): a
-- bulk stop over retrying_at re-checks it under the instance's lock, and
-- skips an instance whose retry came due and moved on meanwhile.
select exists (
    select 1 from occurrences
    where instance_id = @instance_id and definition_key = @definition_key and status = 'available' and attempts > 0
      and available_at > greatest(@now::timestamptz, clock_timestamp()))::boolean;

-- name: OccurrenceRetryNow :many
-- An operator's retry of a running instance: its occurrences waiting out
-- a retry delay are offered now, their attempts left and deadline
-- unchanged (an occurrence not yet tried is not one to bring forward).
-- Waiting is judged by the clock as the statement runs, not only by the
-- transaction's: one that waited for the instance's lock began before a
-- concurrent retry of the held instance committed, and read the
-- occurrence that retry offered at its own, later, now as waiting (two
-- racing retries both applied).
update occurrences
set available_at = @now::timestamptz, claimable_at = @now::timestamptz
where instance_id = @instance_id and status = 'available' and attempts > 0
    and available_at > greatest(@now::timestamptz, clock_timestamp())
returning *;

-- name: OccurrenceOfferRetryNow :one
-- A pull occurrence whose retry waits out its delay, offered now, its
-- attempts left and deadline unchanged: the Camunda facade's unlock of a
-- task a failure's retryTimeout holds back (Camunda's unlock clears the
-- lock that failure set). Waiting is judged as OccurrenceRetryNow does.
update occurrences
set available_at = coalesce(sqlc.narg('now')::timestamptz, now()), claimable_at = coalesce(sqlc.narg('now')::timestamptz, now())
where id = @id and mode = 'pull' and status = 'available' and attempts > 0
    and available_at > greatest(coalesce(sqlc.narg('now')::timestamptz, now()), clock_timestamp())
returning mode, definition_key, revision, available_at;

-- name: OccurrenceListOpenPull :many
-- The open pull occurrences of some (definition, revision) pairs (a
-- consumer's grants), as the Camunda facade lists external tasks: filtered,
-- sorted by one key then id, paged by offset. A lapsed lock is not locked;
-- what remains of the budget counts the attempt in progress (a live lock or
-- a deferral). Without values: the list shows none. Another consumer's
-- live lock or deferral is its own (as its deferred list is): not listed.
select sqlc.embed(o), relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now())) as lapsed
from occurrence_heads o
join (select unnest(@definition_keys::text[]) as definition_key,
             unnest(@revisions::integer[])   as revision) s
  on o.definition_key = s.definition_key and o.revision = s.revision
where o.mode = 'pull' and o.status in ('available', 'reserved', 'deferred')
  and (o.status = 'available' or o.consumer_id = @consumer_id
       or (o.status = 'reserved' and o.lock_expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())))
  and (sqlc.narg('ids')::uuid[] is null or o.id = any(sqlc.narg('ids')::uuid[]))
  and (sqlc.narg('definition_key')::text is null or o.definition_key = sqlc.narg('definition_key'))
  and (sqlc.narg('worker_id')::text is null or (o.worker_id = sqlc.narg('worker_id') and o.consumer_id = @consumer_id))
  and (sqlc.narg('lock_expires_after')::timestamptz is null or o.lock_expires_at > sqlc.narg('lock_expires_after'))
  and (sqlc.narg('lock_expires_before')::timestamptz is null or o.lock_expires_at < sqlc.narg('lock_expires_before'))
  and (sqlc.narg('nodes')::text[] is null or o.node = any(sqlc.narg('nodes')::text[]))
  and (sqlc.narg('instance_ids')::uuid[] is null or o.instance_id = any(sqlc.narg('instance_ids')::uuid[]))
  and (sqlc.narg('process_keys')::text[] is null or o.process_key = any(sqlc.narg('process_keys')::text[]))
  and (sqlc.narg('min_priority')::integer is null or o.priority >= sqlc.narg('min_priority'))
  and (sqlc.narg('max_priority')::integer is null or o.priority <= sqlc.narg('max_priority'))
  and (sqlc.narg('locked')::boolean is null
       or coalesce(o.status = 'reserved' and o.lock_expires_at > coalesce(sqlc.narg('now')::timestamptz, now()), false) = sqlc.narg('locked'))
  and (sqlc.narg('has_remaining')::boolean is null
       or (o.max_attempts + o.attempt_credit - o.attempts
           + case when (o.status = 'reserved' and not relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now()))) or o.status = 'deferred' then 1 else 0 end > 0)
          = sqlc.narg('has_remaining'))
order by
    case when @sort_by::text = 'priority' and not @descending::boolean then o.priority end,
    case when @sort_by::text = 'priority' and @descending::boolean then o.priority end desc,
    case when @sort_by::text = 'lock_expires_at' and not @descending::boolean then o.lock_expires_at end,
    case when @sort_by::text = 'lock_expires_at' and @descending::boolean then o.lock_expires_at end desc,
    case when @sort_by::text = 'instance' and not @descending::boolean then o.instance_id end,
    case when @sort_by::text = 'instance' and @descending::boolean then o.instance_id end desc,
    case when @sort_by::text = 'process' and not @descending::boolean then o.process_key end,
    case when @sort_by::text = 'process' and @descending::boolean then o.process_key end desc,
    case when @descending::boolean then o.id end desc,
    o.id
limit @max offset @skip;

-- name: OccurrenceCountOpenPull :one
-- How many occurrences OccurrenceListOpenPull would list without paging.
select count(*)
from occurrences o
join (select unnest(@definition_keys::text[]) as definition_key,
             unnest(@revisions::integer[])   as revision) s
  on o.definition_key = s.definition_key and o.revision = s.revision
where o.mode = 'pull' and o.status in ('available', 'reserved', 'deferred')
  and (o.status = 'available' or o.consumer_id = @consumer_id
       or (o.status = 'reserved' and o.lock_expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())))
  and (sqlc.narg('ids')::uuid[] is null or o.id = any(sqlc.narg('ids')::uuid[]))
  and (sqlc.narg('definition_key')::text is null or o.definition_key = sqlc.narg('definition_key'))
  and (sqlc.narg('worker_id')::text is null or (o.worker_id = sqlc.narg('worker_id') and o.consumer_id = @consumer_id))
  and (sqlc.narg('lock_expires_after')::timestamptz is null or o.lock_expires_at > sqlc.narg('lock_expires_after'))
  and (sqlc.narg('lock_expires_before')::timestamptz is null or o.lock_expires_at < sqlc.narg('lock_expires_before'))
  and (sqlc.narg('nodes')::text[] is null or o.node = any(sqlc.narg('nodes')::text[]))
  and (sqlc.narg('instance_ids')::uuid[] is null or o.instance_id = any(sqlc.narg('instance_ids')::uuid[]))
  and (sqlc.narg('process_keys')::text[] is null or o.process_key = any(sqlc.narg('process_keys')::text[]))
  and (sqlc.narg('min_priority')::integer is null or o.priority >= sqlc.narg('min_priority'))
  and (sqlc.narg('max_priority')::integer is null or o.priority <= sqlc.narg('max_priority'))
  and (sqlc.narg('locked')::boolean is null
       or coalesce(o.status = 'reserved' and o.lock_expires_at > coalesce(sqlc.narg('now')::timestamptz, now()), false) = sqlc.narg('locked'))
  and (sqlc.narg('has_remaining')::boolean is null
       or (o.max_attempts + o.attempt_credit - o.attempts
           + case when (o.status = 'reserved' and not relais_lock_lapsed(o.status, o.mode, o.lock_expires_at, o.attempts, o.max_attempts + o.attempt_credit, o.deadline_at, coalesce(sqlc.narg('now')::timestamptz, now()))) or o.status = 'deferred' then 1 else 0 end > 0)
          = sqlc.narg('has_remaining'));

-- name: OccurrenceKeepAlive :many
-- Extends, in one statement, every lock a worker stream still holds (each
-- occurrence at the attempt it was assigned, its lock not lapsed), and
-- reports what became of the others: each held occurrence's status and the
-- outcome of its assigned attempt, so the stream can tell a settlement
-- from a cancellation or a lost lock. Rows are locked in id order. The
-- attempt must still be open, and is locked too: a hand-back that commits
-- while this statement waits for the row (another stream of the worker
-- ending as this one resumes its tasks) sets the lock's end to its own
-- clock, later than this statement's, and only the attempt it ended tells
-- that the lock is gone.
with held as (
    select unnest(@ids::uuid[]) as id, unnest(@attempts::integer[]) as attempt
),
locked as (
    select o.id from occurrences o
    join held h on h.id = o.id and h.attempt = o.attempts
    join attempts a on a.occurrence_id = o.id and a.number = o.attempts
    where o.status = 'reserved' and o.consumer_id = @consumer_id and o.worker_id = @worker_id
      and o.lock_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
      and a.ended_at is null
    order by o.id
    for update of o, a
),
extended as (
    update occurrences o
    -- Never earlier than it ends: a worker's Extend may have set it
    -- further out, and was answered so.
    set lock_expires_at = greatest(o.lock_expires_at, coalesce(sqlc.narg('now')::timestamptz, now()) + @lock_duration::interval),
        claimable_at = case when o.attempts < o.max_attempts + o.attempt_credit
                            then greatest(o.lock_expires_at, coalesce(sqlc.narg('now')::timestamptz, now()) + @lock_duration::interval) end
    from locked l
    where o.id = l.id
    returning o.id, o.attempts, o.lock_expires_at
),
attempts_extended as (
    update attempts a set lock_expires_at = e.lock_expires_at
    from extended e
    where a.occurrence_id = e.id and a.number = e.attempts
)
select h.id::uuid as id, h.attempt::integer as attempt, (e.id is not null)::boolean as kept, o.status, o.error_code, a.outcome,
    o.definition_key, o.revision,
    -- The attempt the occurrence is at, for the worker's own occurrences
    -- only (0 otherwise): a resume naming a later one is a client's bug.
    (case when o.consumer_id = @consumer_id and o.worker_id = @worker_id then o.attempts else 0 end)::integer as current_attempt
from held h
join occurrences o on o.id = h.id
left join attempts a on a.occurrence_id = h.id and a.number = h.attempt
left join extended e on e.id = h.id;

-- name: OccurrenceHeldStates :many
-- What became of held occurrences, read afresh: OccurrenceKeepAlive reads
-- their status and outcome as they were when it began, so one settled
-- while it waited for its lock still looks reserved and open there.
with held as (
    select unnest(@ids::uuid[]) as id, unnest(@attempts::integer[]) as attempt
)
select h.id::uuid as id, h.attempt::integer as attempt, o.status, o.error_code, a.outcome
from held h
join occurrences o on o.id = h.id
left join attempts a on a.occurrence_id = h.id and a.number = h.attempt;

-- name: OccurrenceDisconnect :many
-- Ends the unsettled assignments of a worker stream that ended: each lock
-- expires now and its attempt ends disconnected, which counts (a task that
-- kills its workers still ends). The claim re-offers them at once, as any
-- lapsed lock, and the timer fails those without attempts left.
with held as (
    select unnest(@ids::uuid[]) as id, unnest(@attempts::integer[]) as attempt
),
locked as (
    select o.id from occurrences o
    join held h on h.id = o.id and h.attempt = o.attempts
    where o.status = 'reserved' and o.consumer_id = @consumer_id and o.worker_id = @worker_id
    order by o.id
    for update of o
),
handed as (
    update occurrences o
    set lock_expires_at = least(o.lock_expires_at, coalesce(sqlc.narg('now')::timestamptz, now())),
        claimable_at = case when o.attempts < o.max_attempts + o.attempt_credit
                            then least(o.lock_expires_at, coalesce(sqlc.narg('now')::timestamptz, now())) end
    from locked l
    where o.id = l.id
    returning o.id, o.attempts, o.mode, o.definition_key, o.revision,
              coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz as at
),
ended as (
    update attempts a
    set outcome = 'disconnected', ended_at = coalesce(sqlc.narg('now')::timestamptz, now())
    from handed h
    where a.occurrence_id = h.id and a.number = h.attempts and a.ended_at is null
    returning a.occurrence_id, a.number, a.ended_at, h.definition_key
),
lapses as (
    -- A stream that ended holding assignments let their locks lapse (the
    -- worker catalog's lapsed count).
    insert into worker_lapses (occurrence_id, attempt, consumer_id, worker_id, definition_key, lapsed_at)
    select e.occurrence_id, e.number, @consumer_id, @worker_id, e.definition_key, e.ended_at
    from ended e
    on conflict do nothing
)
select id, attempts, mode, definition_key, revision, at from handed;

-- name: OccurrenceReleaseHeld :many
-- Hands back the assignments of a stream its replica is ending (shutting
-- down): available again now, the attempt ends released and is given back
-- to the budget, as a worker's own release. A lapsed lock is left as it is
-- (already offered again).
with held as (
    select unnest(@ids::uuid[]) as id, unnest(@attempts::integer[]) as attempt
),
locked as (
    select o.id from occurrences o
    join held h on h.id = o.id and h.attempt = o.attempts
    where o.status = 'reserved' and o.consumer_id = @consumer_id and o.worker_id = @worker_id
      and o.lock_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    order by o.id
    for update of o
),
handed as (
    update occurrences o
    set status = 'available', available_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        claimable_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        lock_expires_at = null, attempt_credit = o.attempt_credit + 1
    from locked l
    where o.id = l.id
    returning o.id, o.attempts, o.mode, o.definition_key, o.revision,
              coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz as at
),
ended as (
    update attempts a
    set outcome = 'released', ended_at = coalesce(sqlc.narg('now')::timestamptz, now())
    from handed h
    where a.occurrence_id = h.id and a.number = h.attempts and a.ended_at is null
)
select id, attempts, mode, definition_key, revision, at from handed;

-- name: OccurrenceInsertNewMany :exec
-- OccurrenceInsertNew for many rows in one statement (engine/merge.go):
-- the nth array holds each row's nth parameter of OccurrenceInsertNew.
insert into occurrences (
    id, instance_id, node, definition_key, revision, mode, status,
    priority, max_attempts, retry_delay, deadline, deadline_at, destination, timeout,
    available_at, claimable_at, inputs, sealed_inputs, error_code, error_message, settled_at,
    process_key, business_key, process_version, retry_backoff, max_retry_delay, created_at)
select
    v.id, v.instance_id, v.node, v.definition_key, v.revision, v.mode, v.status,
    v.priority, v.max_attempts, v.retry_delay, v.deadline, v.deadline_at, v.destination, v.timeout,
    v.available_at, v.claimable_at, v.inputs, v.sealed_inputs, v.error_code, v.error_message, v.settled_at,
    v.process_key, v.business_key, v.process_version, v.retry_backoff, v.max_retry_delay, v.created_at
from (
    select unnest($1::uuid[]) as id,
        unnest($2::uuid[]) as instance_id,
        unnest($3::text[]) as node,
        unnest($4::text[]) as definition_key,
        unnest($5::integer[]) as revision,
        unnest($6::text[]) as mode,
        unnest($7::text[]) as status,
        unnest($8::smallint[]) as priority,
        unnest($9::integer[]) as max_attempts,
        unnest($10::interval[]) as retry_delay,
        unnest($11::interval[]) as deadline,
        unnest($12::timestamptz[]) as deadline_at,
        unnest($13::text[]) as destination,
        unnest($14::interval[]) as timeout,
        unnest($15::timestamptz[]) as available_at,
        unnest($16::timestamptz[]) as claimable_at,
        unnest($17::jsonb[]) as inputs,
        unnest($18::bytea[]) as sealed_inputs,
        unnest($19::text[]) as error_code,
        unnest($20::text[]) as error_message,
        unnest($21::timestamptz[]) as settled_at,
        unnest($22::text[]) as process_key,
        unnest($23::text[]) as business_key,
        unnest($24::integer[]) as process_version,
        unnest($25::double precision[]) as retry_backoff,
        unnest($26::interval[]) as max_retry_delay,
        unnest($27::timestamptz[]) as created_at
) v;

-- name: OccurrenceCompleteMany :exec
-- OccurrenceComplete for many rows in one statement (engine/merge.go).
with v as (
    select unnest($1::timestamptz[]) as at,
        unnest($2::jsonb[]) as outputs,
        unnest($3::bytea[]) as sealed_outputs,
        unnest($4::text[]) as outputs_digest,
        unnest($5::text[]) as route,
        unnest($6::uuid[]) as id
),
done as (
    update occurrences o
    set status = 'completed', outputs = v.outputs, sealed_outputs = v.sealed_outputs,
        outputs_digest = v.outputs_digest, route = v.route, settled_at = v.at, claimable_at = null
    from v
    where o.id = v.id
    returning o.id, o.attempts, v.at
)
update attempts a
set outcome = 'completed', ended_at = done.at
from done
where a.occurrence_id = done.id and a.number = done.attempts and a.ended_at is null;

-- name: OccurrenceListDeferredByConsumer :many
-- A consumer's deferred occurrences (DESIGN §11), newest first, paged by
-- id: what its workers handed to a person or a front end, for a back end
-- that must find them again. Without values, as every list.
select sqlc.embed(o)
from occurrence_heads o
where o.status = 'deferred' and o.consumer_id = @consumer_id
  and (sqlc.narg('definition_key')::text is null or o.definition_key = sqlc.narg('definition_key'))
  and (sqlc.narg('worker_id')::text is null or o.worker_id = sqlc.narg('worker_id'))
  and (sqlc.narg('before')::uuid is null or o.id < sqlc.narg('before'))
order by o.id desc
limit @max;
