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
