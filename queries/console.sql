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
