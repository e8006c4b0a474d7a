-- name: InstanceInsert :one
insert into instances (id, process_key, version, status, business_key, inputs, sealed_inputs, idempotency_key, request_digest, created_at)
values (@id, @process_key, @version, 'running', @business_key, @inputs, @sealed_inputs, @idempotency_key, @request_digest,
        coalesce(sqlc.narg('now')::timestamptz, now()))
on conflict (process_key, idempotency_key) do nothing
returning *;

-- name: InstanceGetByIdempotencyKey :one
select * from instances where process_key = @process_key and idempotency_key = @idempotency_key;

-- name: InstanceGet :one
select * from instances where id = @id;

-- name: InstanceLock :one
-- Locking statements also read the clock: the time a transaction acts at
-- costs no round trip of its own (now() is the transaction's start).
select sqlc.embed(i), coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz as now from instances i where i.id = @id for update;

-- name: InstanceLockSkipLocked :one
select sqlc.embed(i), coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz as now from instances i where i.id = @id for update skip locked;

-- name: InstanceEnd :exec
-- Its callers hold the instance's lock and know its status: nothing to
-- read back, so it travels with the next statement.
update instances
set status = @status, end_node = @end_node, error_code = @error_code,
    ended_at = coalesce(sqlc.narg('now')::timestamptz, now())
where id = @id and (status = 'running' or (@from_held::boolean and status = 'held'));

-- name: InstanceHold :execrows
-- The instance stops at a failed node whose on_error holds it; error_code
-- says why, as it does for a failed instance.
update instances
set status = 'held', error_code = @error_code
where id = @id and status = 'running';

-- name: InstanceCancel :execrows
-- A stop ends a running or a held instance.
update instances
set status = 'cancelled', ended_at = coalesce(sqlc.narg('now')::timestamptz, now())
where id = @id and status in ('running', 'held');

-- name: InstanceList :many
-- Without the inputs, which lists do not show: an instance's inputs may be
-- a megabyte.
select id, process_key, version, status, business_key, end_node, error_code, created_at, ended_at from instances
where (sqlc.narg('process_key')::text is null or process_key = sqlc.narg('process_key'))
  and (sqlc.narg('version')::int is null or version = sqlc.narg('version'))
  and (sqlc.narg('status')::text is null or status = sqlc.narg('status'))
  and (sqlc.narg('business_key')::text is null or business_key = sqlc.narg('business_key'))
  and (sqlc.narg('error_code')::text is null or error_code = sqlc.narg('error_code'))
  -- Held at a node of a definition: where InstanceHeldAt counts it.
  and (sqlc.narg('held_at')::text is null or status = 'held' and (
      select x.definition_key from occurrences x
      where x.instance_id = instances.id and x.status = 'failed'
      order by x.settled_at desc, x.created_at desc
      limit 1) = sqlc.narg('held_at'))
  -- Running, one of its occurrences of a definition waiting out a retry
  -- delay (as the Health page counts them): found from the waiting ones.
  and (sqlc.narg('retrying_at')::text is null or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.definition_key = sqlc.narg('retrying_at')
        and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        -- Waiting since before matched_before (see waiting_only).
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))))
  -- Ids are UUIDv7: a creation window is an id range, in the list's order.
  and (sqlc.narg('created_from')::uuid is null or id >= sqlc.narg('created_from'))
  and (sqlc.narg('created_to')::uuid is null or id < sqlc.narg('created_to'))
  -- The id range finds the rows in the index's order; created_at, the time
  -- the API shows, decides (an id is minted before its transaction began).
  and (sqlc.narg('created_after')::timestamptz is null or created_at >= sqlc.narg('created_after'))
  and (sqlc.narg('created_before')::timestamptz is null or created_at < sqlc.narg('created_before'))
  and (sqlc.narg('before')::uuid is null or id < sqlc.narg('before'))
order by id desc
limit @max;

-- name: InstanceListAfter :many
-- The page before a keyset page, ascending (the caller reverses it).
select id, process_key, version, status, business_key, end_node, error_code, created_at, ended_at from instances
where (sqlc.narg('process_key')::text is null or process_key = sqlc.narg('process_key'))
  and (sqlc.narg('version')::int is null or version = sqlc.narg('version'))
  and (sqlc.narg('status')::text is null or status = sqlc.narg('status'))
  and (sqlc.narg('business_key')::text is null or business_key = sqlc.narg('business_key'))
  and (sqlc.narg('error_code')::text is null or error_code = sqlc.narg('error_code'))
  -- Held at a node of a definition: where InstanceHeldAt counts it.
  and (sqlc.narg('held_at')::text is null or status = 'held' and (
      select x.definition_key from occurrences x
      where x.instance_id = instances.id and x.status = 'failed'
      order by x.settled_at desc, x.created_at desc
      limit 1) = sqlc.narg('held_at'))
  -- Running, one of its occurrences of a definition waiting out a retry
  -- delay (as the Health page counts them): found from the waiting ones.
  and (sqlc.narg('retrying_at')::text is null or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.definition_key = sqlc.narg('retrying_at')
        and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        -- Waiting since before matched_before (see waiting_only).
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))))
  -- Ids are UUIDv7: a creation window is an id range, in the list's order.
  and (sqlc.narg('created_from')::uuid is null or id >= sqlc.narg('created_from'))
  and (sqlc.narg('created_to')::uuid is null or id < sqlc.narg('created_to'))
  -- The id range finds the rows in the index's order; created_at, the time
  -- the API shows, decides (an id is minted before its transaction began).
  and (sqlc.narg('created_after')::timestamptz is null or created_at >= sqlc.narg('created_after'))
  and (sqlc.narg('created_before')::timestamptz is null or created_at < sqlc.narg('created_before'))
  and id > @after::uuid
order by id
limit @max;

-- name: InstanceCount :one
-- How many instances a bulk action's filter matches now (the count an
-- operator confirms). status_in, when set, narrows to the statuses the
-- action applies to; retryable_only to the held instances a retry can
-- offer again.
select count(*)::bigint from instances
where (sqlc.narg('process_key')::text is null or process_key = sqlc.narg('process_key'))
  and (sqlc.narg('version')::int is null or version = sqlc.narg('version'))
  and (sqlc.narg('status')::text is null or status = sqlc.narg('status'))
  and status = any(@status_in::text[])
  and (sqlc.narg('business_key')::text is null or business_key = sqlc.narg('business_key'))
  and (sqlc.narg('error_code')::text is null or error_code = sqlc.narg('error_code'))
  -- Held at a node of a definition: where InstanceHeldAt counts it.
  and (sqlc.narg('held_at')::text is null or status = 'held' and (
      select x.definition_key from occurrences x
      where x.instance_id = instances.id and x.status = 'failed'
      order by x.settled_at desc, x.created_at desc
      limit 1) = sqlc.narg('held_at'))
  -- Running, one of its occurrences of a definition waiting out a retry
  -- delay (as the Health page counts them): found from the waiting ones.
  and (sqlc.narg('retrying_at')::text is null or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.definition_key = sqlc.narg('retrying_at')
        and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        -- Waiting since before matched_before (see waiting_only).
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))))
  and (sqlc.narg('created_from')::uuid is null or id >= sqlc.narg('created_from'))
  and (sqlc.narg('created_to')::uuid is null or id < sqlc.narg('created_to'))
  -- The id range finds the rows in the index's order; created_at, the time
  -- the API shows, decides (an id is minted before its transaction began).
  and (sqlc.narg('created_after')::timestamptz is null or created_at >= sqlc.narg('created_after'))
  and (sqlc.narg('created_before')::timestamptz is null or created_at < sqlc.narg('created_before'))
  -- Held since before matched_before, when given (a bulk action's count
  -- pinned to the moment it was read): an instance that came to be held
  -- after it, its latest failure later, is not among those counted.
  and (sqlc.narg('matched_before')::timestamptz is null or status <> 'held' or coalesce((
      select m.settled_at from occurrences m
      where m.instance_id = instances.id and m.status = 'failed'
      order by m.settled_at desc, m.created_at desc
      limit 1), '-infinity') < sqlc.narg('matched_before'))
  -- A retry refuses (not_retryable) a held instance whose failed
  -- occurrence (OccurrenceHeldAt's) failed from birth, its inputs not
  -- built: counting it would make the confirmed count promise what the
  -- retry then skips.
  and (not @retryable_only::boolean or coalesce((
      select not (o.attempts = 0 and o.error_code is not distinct from 'invalid_inputs') from occurrences o
      where o.instance_id = instances.id and o.status = 'failed'
      order by o.settled_at desc, o.created_at desc
      limit 1), false))
  -- A retry of running instances brings their waiting retries forward:
  -- only those with an occurrence waiting out a retry delay, and, with
  -- matched_before, waiting since then (no attempt of it ended since): an
  -- outage's new failures do not change a count pinned to its moment, and
  -- what it counts can only shrink (retries come due meanwhile).
  and (not @waiting_only::boolean or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))));

-- name: InstanceBreakdownForAction :many
-- What a bulk action's filter matches now, by process and error code, the
-- largest groups first: the confirmation says what the count is made of
-- (a retry of 40 instances that are 38 CRM_DOWN and 2 invalid_inputs).
-- The same instances InstanceCount counts: the groups add up to its count.
-- A running instance has no error code: with waiting_codes (a retry that
-- brings waiting retries forward, a stop of those), its group is the code
-- its waiting occurrence last failed with (38 CRM_DOWN waiting, 2 TIMEOUT).
-- may_have_acted counts those held at a push call that ended
-- outcome_unknown, deadline_exceeded or invalid_outputs (a success whose
-- outputs the contract refused), which may have been carried out (a retry
-- calls again); the case keeps the lookup to those codes.
select process_key, coalesce(instances.error_code, case when @waiting_codes::boolean then (
        select o.error_code from occurrences o
        where o.instance_id = instances.id and o.status = 'available' and o.attempts > 0
          and o.available_at > coalesce(sqlc.narg('now')::timestamptz, now())
        order by o.available_at
        limit 1) end) as error_code, count(*)::bigint as count,
  count(*) filter (where case when error_code in ('outcome_unknown', 'deadline_exceeded', 'invalid_outputs') then (
      select p.mode from occurrences p
      where p.instance_id = instances.id and p.status = 'failed'
      order by p.settled_at desc, p.created_at desc
      limit 1) = 'push' else false end)::bigint as may_have_acted,
  -- calling counts, for a stop, the running instances whose push call is
  -- in flight: a stop aborts it, but the destination may have acted.
  count(*) filter (where @with_calls::boolean and status = 'running' and exists (
      select 1 from occurrences c
      where c.instance_id = instances.id and c.mode = 'push' and c.status = 'reserved'))::bigint as calling
from instances
where (sqlc.narg('process_key')::text is null or process_key = sqlc.narg('process_key'))
  and (sqlc.narg('version')::int is null or version = sqlc.narg('version'))
  and (sqlc.narg('status')::text is null or status = sqlc.narg('status'))
  and status = any(@status_in::text[])
  and (sqlc.narg('business_key')::text is null or business_key = sqlc.narg('business_key'))
  and (sqlc.narg('error_code')::text is null or error_code = sqlc.narg('error_code'))
  -- Held at a node of a definition: where InstanceHeldAt counts it.
  and (sqlc.narg('held_at')::text is null or status = 'held' and (
      select x.definition_key from occurrences x
      where x.instance_id = instances.id and x.status = 'failed'
      order by x.settled_at desc, x.created_at desc
      limit 1) = sqlc.narg('held_at'))
  -- Running, one of its occurrences of a definition waiting out a retry
  -- delay (as the Health page counts them): found from the waiting ones.
  and (sqlc.narg('retrying_at')::text is null or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.definition_key = sqlc.narg('retrying_at')
        and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        -- Waiting since before matched_before (see waiting_only).
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))))
  and (sqlc.narg('created_from')::uuid is null or id >= sqlc.narg('created_from'))
  and (sqlc.narg('created_to')::uuid is null or id < sqlc.narg('created_to'))
  -- The id range finds the rows in the index's order; created_at, the time
  -- the API shows, decides (an id is minted before its transaction began).
  and (sqlc.narg('created_after')::timestamptz is null or created_at >= sqlc.narg('created_after'))
  and (sqlc.narg('created_before')::timestamptz is null or created_at < sqlc.narg('created_before'))
  -- Held since before matched_before (see InstanceCount).
  and (sqlc.narg('matched_before')::timestamptz is null or status <> 'held' or coalesce((
      select m.settled_at from occurrences m
      where m.instance_id = instances.id and m.status = 'failed'
      order by m.settled_at desc, m.created_at desc
      limit 1), '-infinity') < sqlc.narg('matched_before'))
  and (not @retryable_only::boolean or coalesce((
      select not (o.attempts = 0 and o.error_code is not distinct from 'invalid_inputs') from occurrences o
      where o.instance_id = instances.id and o.status = 'failed'
      order by o.settled_at desc, o.created_at desc
      limit 1), false))
  -- A retry of running instances brings their waiting retries forward:
  -- only those with an occurrence waiting out a retry delay, and, with
  -- matched_before, waiting since then (no attempt of it ended since): an
  -- outage's new failures do not change a count pinned to its moment, and
  -- what it counts can only shrink (retries come due meanwhile).
  and (not @waiting_only::boolean or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))))
group by 1, 2
order by count(*) desc, 1, 2
limit @max;

-- name: InstanceIDsForAction :many
-- The instances a bulk action applies to, newest first, at most @max.
select id from instances
where (sqlc.narg('process_key')::text is null or process_key = sqlc.narg('process_key'))
  and (sqlc.narg('version')::int is null or version = sqlc.narg('version'))
  and (sqlc.narg('status')::text is null or status = sqlc.narg('status'))
  and status = any(@status_in::text[])
  and (sqlc.narg('business_key')::text is null or business_key = sqlc.narg('business_key'))
  and (sqlc.narg('error_code')::text is null or error_code = sqlc.narg('error_code'))
  -- Held at a node of a definition: where InstanceHeldAt counts it.
  and (sqlc.narg('held_at')::text is null or status = 'held' and (
      select x.definition_key from occurrences x
      where x.instance_id = instances.id and x.status = 'failed'
      order by x.settled_at desc, x.created_at desc
      limit 1) = sqlc.narg('held_at'))
  -- Running, one of its occurrences of a definition waiting out a retry
  -- delay (as the Health page counts them): found from the waiting ones.
  and (sqlc.narg('retrying_at')::text is null or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.definition_key = sqlc.narg('retrying_at')
        and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        -- Waiting since before matched_before (see waiting_only).
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))))
  and (sqlc.narg('created_from')::uuid is null or id >= sqlc.narg('created_from'))
  and (sqlc.narg('created_to')::uuid is null or id < sqlc.narg('created_to'))
  -- The id range finds the rows in the index's order; created_at, the time
  -- the API shows, decides (an id is minted before its transaction began).
  and (sqlc.narg('created_after')::timestamptz is null or created_at >= sqlc.narg('created_after'))
  and (sqlc.narg('created_before')::timestamptz is null or created_at < sqlc.narg('created_before'))
  -- Held since before matched_before (see InstanceCount).
  and (sqlc.narg('matched_before')::timestamptz is null or status <> 'held' or coalesce((
      select m.settled_at from occurrences m
      where m.instance_id = instances.id and m.status = 'failed'
      order by m.settled_at desc, m.created_at desc
      limit 1), '-infinity') < sqlc.narg('matched_before'))
  -- The same instances InstanceCount counts.
  and (not @retryable_only::boolean or coalesce((
      select not (o.attempts = 0 and o.error_code is not distinct from 'invalid_inputs') from occurrences o
      where o.instance_id = instances.id and o.status = 'failed'
      order by o.settled_at desc, o.created_at desc
      limit 1), false))
  -- A retry of running instances brings their waiting retries forward:
  -- only those with an occurrence waiting out a retry delay, and, with
  -- matched_before, waiting since then (no attempt of it ended since): an
  -- outage's new failures do not change a count pinned to its moment, and
  -- what it counts can only shrink (retries come due meanwhile).
  and (not @waiting_only::boolean or status = 'running' and id in (
      select w.instance_id from occurrences w
      where w.status = 'available' and w.available_at > coalesce(sqlc.narg('now')::timestamptz, now()) and w.attempts > 0
        and (sqlc.narg('matched_before')::timestamptz is null or not exists (
            select 1 from attempts a where a.occurrence_id = w.id and a.ended_at >= sqlc.narg('matched_before')))))
order by id desc
limit @max;

-- name: InstanceResume :execrows
-- A retry puts a held instance back to running.
update instances set status = 'running', error_code = null
where id = @id and status = 'held';

-- name: InstanceLockByOccurrence :one
-- Settlements lock the instance before its occurrence (the order stop
-- uses too), finding it from the occurrence in the same round trip.
select sqlc.embed(i), coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz as now from instances i
where i.id = (select o.instance_id from occurrences o where o.id = @occurrence_id)
for update of i;

-- name: SettlementLock :many
-- What settling occurrences locks, in one round trip: their instances,
-- then them (the order every settlement takes), each in id order so that
-- two such statements cannot deadlock. The instances are locked first, all
-- of them, by the CTE (its sort reads every row before locking any); the
-- occurrences then, above the outer sort; locking an instance again there
-- costs nothing and returns its latest version. locked_at is the
-- database's clock once an occurrence is locked (see OccurrenceLock).
with locked as materialized (
    select i.id
    from occurrences o join instances i on i.id = o.instance_id
    where o.id = any(@occurrence_ids::uuid[])
    order by i.id
    for update of i
)
select sqlc.embed(o), sqlc.embed(i), coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz as now,
       coalesce(sqlc.narg('now')::timestamptz, clock_timestamp())::timestamptz as locked_at
from occurrences o join instances i on i.id = o.instance_id
where o.id = any(@occurrence_ids::uuid[]) and i.id in (select id from locked)
order by o.id
for update of o, i;

-- name: InstanceInsertNew :exec
-- A start without an Idempotency-Key: nothing can conflict, so nothing to
-- read back (the engine builds the row, created_at being the
-- transaction's clock).
insert into instances (id, process_key, version, status, business_key, inputs, sealed_inputs, created_at)
values (@id, @process_key, @version, 'running', @business_key, @inputs, @sealed_inputs, @created_at);

-- name: Clock :one
-- The transaction's clock, for a transaction whose statements read none.
select coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz;

-- name: InstanceDeleteEnded :one
-- One retention batch, in one statement: the oldest ended instances before
-- the cutoff, skipping any another replica is deleting, with everything
-- that hangs from them. Foreign keys are checked at the statement's end,
-- when the children are gone too.
with doomed as (
    select id from instances
    where ended_at < @cutoff::timestamptz and status in ('completed', 'failed', 'cancelled')
    order by ended_at
    limit @max
    for update skip locked
),
occ as (
    select o.id from occurrences o where o.instance_id in (select id from doomed)
),
gone_attempts as (
    delete from attempts where occurrence_id in (select id from occ)
),
gone_tokens as (
    delete from settle_tokens where occurrence_id in (select id from occ)
),
gone_occurrences as (
    delete from occurrences where id in (select id from occ)
),
gone as (
    delete from instances where id in (select id from doomed) returning 1
)
select count(*)::bigint from gone;

-- name: InstanceGetMany :many
select * from instances where id = any(@ids::uuid[]);

-- name: InstanceHeldAt :many
-- Held instances (incidents) by where each is held: the node, and its
-- definition, of its latest failed occurrence, per process version. Few
-- instances are held, and instances_by_status finds them; the health page
-- sums them by definition, a version's graph takes its own nodes.
select i.process_key, i.version, o.node, o.definition_key, count(*)::bigint as count
from instances i
cross join lateral (
    select x.node, x.definition_key from occurrences x
    where x.instance_id = i.id and x.status = 'failed'
    order by x.settled_at desc, x.created_at desc
    limit 1
) o
where i.status = 'held'
group by i.process_key, i.version, o.node, o.definition_key;

-- name: InstanceInsertNewMany :exec
-- InstanceInsertNew for many rows in one statement (engine/merge.go): the
-- nth array holds each row's nth parameter of InstanceInsertNew.
insert into instances (id, process_key, version, status, business_key, inputs, sealed_inputs, created_at)
select v.id, v.process_key, v.version, 'running', v.business_key, v.inputs, v.sealed_inputs, v.created_at
from (
    select unnest($1::uuid[]) as id,
        unnest($2::text[]) as process_key,
        unnest($3::integer[]) as version,
        unnest($4::text[]) as business_key,
        unnest($5::jsonb[]) as inputs,
        unnest($6::bytea[]) as sealed_inputs,
        unnest($7::timestamptz[]) as created_at
) v;

-- name: InstanceEndMany :exec
-- InstanceEnd for many rows in one statement (engine/merge.go). The status
-- test is a CASE so that no plan can read instances by status: a generic
-- plan made while the table was small read every running instance at each
-- call (a bitmap scan of instances_by_status) instead of the ids given.
update instances i
set status = v.status, end_node = v.end_node, error_code = v.error_code, ended_at = coalesce(v.at, now())
from (
    select unnest($1::text[]) as status,
        unnest($2::text[]) as end_node,
        unnest($3::text[]) as error_code,
        unnest($4::timestamptz[]) as at,
        unnest($5::uuid[]) as id,
        unnest($6::boolean[]) as from_held
) v
where i.id = v.id and case i.status when 'running' then true when 'held' then v.from_held else false end;

-- name: RetentionSince :one
-- Since when retention may delete: see migration 0022.
select since from retention_since;

-- name: InstanceErase :one
-- One ended instance deleted with everything that hangs from it, as
-- InstanceDeleteEnded deletes a retention batch; its caller holds the
-- instance's lock and knows it ended. It answers what went with it.
with occ as (
    select o.id from occurrences o where o.instance_id = @id
),
gone_attempts as (
    delete from attempts where occurrence_id in (select id from occ) returning 1
),
gone_tokens as (
    delete from settle_tokens where occurrence_id in (select id from occ)
),
gone_occurrences as (
    delete from occurrences where id in (select id from occ) returning 1
),
gone as (
    delete from instances where id = @id
)
select (select count(*) from gone_occurrences)::bigint as occurrences,
    (select count(*) from gone_attempts)::bigint as attempts;

-- name: RetentionNote :many
-- Notes this replica's retention (null: forever) and returns the other
-- replicas' noted within the last @remember_seconds (live: within the
-- last @live_seconds, those still running), forgetting older ones. The
-- database's clock judges them, as it stamps them.
with noted as (
    insert into retention_settings (replica, retention_seconds, noted_at)
    values (@replica::text, sqlc.narg(retention_seconds)::bigint, now())
    on conflict (replica) do update set retention_seconds = excluded.retention_seconds, noted_at = excluded.noted_at
),
forgotten as (
    delete from retention_settings d
    where d.noted_at < now() - make_interval(secs => @remember_seconds::bigint) and d.replica <> @replica::text
)
select s.replica, s.retention_seconds, s.noted_at >= now() - make_interval(secs => @live_seconds::bigint) as live,
       (s.noted_at + make_interval(secs => @remember_seconds::bigint))::timestamptz as weighs_until
from retention_settings s
where s.noted_at >= now() - make_interval(secs => @remember_seconds::bigint) and s.replica <> @replica::text
order by s.replica;

-- name: RetentionForget :exec
-- Forgets every replica's noted retention (a restored backup's are its
-- source's replicas').
delete from retention_settings;

-- name: RetentionForgetReplica :exec
-- Forgets one replica's noted retention: an earlier run of this replica's
-- host (see noteRetention).
delete from retention_settings where replica = @replica::text;

-- name: RetentionStopped :exec
-- Marks a replica's noted retention as a stopped replica's (noted before
-- the live window): it still weighs for the others as long as it would
-- have, and a later run of its host forgets it at once (see noteRetention).
update retention_settings set noted_at = least(noted_at, now() - make_interval(secs => @live_seconds::bigint))
where replica = @replica::text;

-- name: InstanceStatuses :many
-- The statuses of the instances reads wait on (internal/endwait), by
-- their primary key: one statement a tick for them all.
select id, status from instances where id = any(@ids::uuid[]);
