-- name: OccurrenceCountByDefinitionStatus :many
-- Every (definition, status) pair with its number of occurrences, for the
-- console's counts. The GROUP BY follows occurrences_by_definition_status
-- (definition_key, status, id desc), so PostgreSQL aggregates in index order
-- (an index-only scan once the visibility map is set) without sorting. It
-- still reads every entry: the console caches the result for a few seconds
-- instead of running it on every request.
select definition_key, status, count(*)::bigint as count
from occurrences
group by definition_key, status
order by definition_key, status;

-- name: OccurrenceLapsedLocksByDefinition :many
-- Reserved pull occurrences whose lock expired with attempts left: stored
-- as reserved until a claim takes them, they are available (DESIGN §3).
-- Few wait there, and occurrences_lock_expiring finds them.
select definition_key, count(*)::bigint as count
from occurrences
where status = 'reserved'
  and relais_lock_lapsed(status, mode, lock_expires_at, attempts, max_attempts + attempt_credit, deadline_at, coalesce(sqlc.narg('now')::timestamptz, now()))
group by definition_key;

-- name: OccurrenceCountByNode :many
-- Each node's occurrences of one process version by stored status, from
-- occurrences_by_process_node (an index-only scan once the visibility map
-- is set). It reads every entry of the version: the console caches it for a
-- few seconds, as it does the counts by definition.
select node, status, count(*)::bigint as count
from occurrences
where process_key = @process_key and process_version = @process_version
group by node, status;

-- name: OccurrenceLapsedLocksByNode :many
-- The reserved occurrences of a process version whose lock lapsed: they
-- count as available (DESIGN §3). Few wait there.
select node, count(*)::bigint as count
from occurrences
where status = 'reserved' and process_key = @process_key and process_version = @process_version
  and relais_lock_lapsed(status, mode, lock_expires_at, attempts, max_attempts + attempt_credit, deadline_at, coalesce(sqlc.narg('now')::timestamptz, now()))
group by node;

-- name: OccurrenceOldestAvailableByDefinition :many
-- Queue lag, part one: per definition, the time its oldest available
-- occurrence due by now became available. One probe of
-- occurrences_available_since per definition, however long the queue.
select d.key as definition_key, o.available_at
from definitions d
cross join lateral (
    select x.available_at from occurrences x
    where x.status = 'available' and x.definition_key = d.key
      and x.available_at <= coalesce(sqlc.narg('now')::timestamptz, now())
    order by x.available_at
    limit 1
) o;

-- name: OccurrenceWaitingRetryByDefinition :many
-- Per definition, its occurrences waiting out a retry delay (a failed
-- attempt with attempts left: available later, tried before) and when the
-- soonest is due. One range of occurrences_available_since per definition,
-- past now: as long as what it counts, not the claimable queue before it.
select d.key as definition_key, w.count, w.next_at::timestamptz as next_at
from definitions d
cross join lateral (
    select count(*)::bigint as count, min(x.available_at) as next_at from occurrences x
    where x.status = 'available' and x.definition_key = d.key
      and x.available_at > coalesce(sqlc.narg('now')::timestamptz, now())
      and x.attempts > 0
) w
where w.count > 0;

-- name: OccurrenceWaitingRetryOf :many
-- Of the given instances, the occurrences waiting out a retry delay, with
-- the code their last attempt failed with and when the next is due: a list
-- of running instances shows why each waits (on-call QA: every row read
-- "—" during an outage).
select instance_id, node, error_code, available_at from occurrences
where instance_id = any(@instance_ids::uuid[]) and status = 'available' and attempts > 0
  and available_at > coalesce(sqlc.narg('now')::timestamptz, now());

-- name: OccurrenceOldestDeferredByDefinition :many
-- Per definition, when its oldest deferred occurrence was deferred. One
-- probe of occurrences_deferred_since per definition.
select d.key as definition_key, o.deferred_at
from definitions d
cross join lateral (
    select x.deferred_at from occurrences x
    where x.status = 'deferred' and x.definition_key = d.key and x.deferred_at is not null
    order by x.deferred_at
    limit 1
) o;

-- name: OccurrenceOldestLapsedByRevision :many
-- Queue lag, part two: per revision, the oldest lock that lapsed with
-- attempts left (available again though stored reserved). One probe of
-- occurrences_lock_expiring per revision.
select r.definition_key, o.lock_expires_at
from revisions r
cross join lateral (
    select x.lock_expires_at from occurrences x
    where x.mode = 'pull' and x.definition_key = r.definition_key and x.revision = r.revision and x.status = 'reserved'
      and relais_lock_lapsed(x.status, x.mode, x.lock_expires_at, x.attempts, x.max_attempts + x.attempt_credit, x.deadline_at,
                             coalesce(sqlc.narg('now')::timestamptz, now()))
    order by x.lock_expires_at
    limit 1
) o;

-- name: OccurrenceSettledBuckets :many
-- Completions and failures of the last hour per definition and 5-minute
-- bucket (0 is the latest), from occurrences_by_settled: it reads the
-- hour's settlements only, however long the history.
select definition_key, status,
    floor(extract(epoch from (coalesce(sqlc.narg('now')::timestamptz, now()) - settled_at)) / 300)::integer as bucket,
    count(*)::bigint as count
from occurrences
where settled_at > coalesce(sqlc.narg('now')::timestamptz, now()) - interval '1 hour'
  and settled_at <= coalesce(sqlc.narg('now')::timestamptz, now())
  and status in ('completed', 'failed')
group by definition_key, status, bucket;

-- name: OccurrencesHoldingInstance :many
-- Of the given occurrences, the failed ones their instance is held at: a
-- held instance's latest failure (as InstanceHeldAt places it). A failure
-- whose instance went on along the node's error path, to be held later at
-- another node, is not one. The console marks them in a list of tasks,
-- where a failure that holds its instance (an incident) would otherwise
-- read as one that failed it.
select o.id from occurrences o
join instances i on i.id = o.instance_id and i.status = 'held'
where o.id = any(@ids::uuid[]) and o.status = 'failed'
  and o.id = (
    select x.id from occurrences x
    where x.instance_id = o.instance_id and x.status = 'failed'
    order by x.settled_at desc, x.created_at desc
    limit 1);
