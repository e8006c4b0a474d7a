-- Bulk operator actions' records (migration 0026); their per-instance
-- records are operator_actions (audit.sql).

-- name: BulkActionInsert :execrows
-- A bulk action's record, before its first batch; 0 rows: the id names
-- another bulk action already.
insert into bulk_actions (id, action, reason, actor_id, actor_name, filter, matched, started_at, progressed_at)
values (@id, @action, @reason, @actor_id, @actor_name, @filter, @matched,
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()))
on conflict (id) do nothing;

-- name: BulkActionProgress :exec
-- In each batch's transaction: the counts move with what the batch wrote.
update bulk_actions
set applied = applied + @applied, skipped = skipped + @skipped, progressed_at = coalesce(sqlc.narg('now')::timestamptz, now())
where id = @id;

-- name: BulkActionEnd :exec
update bulk_actions set ended_at = coalesce(sqlc.narg('now')::timestamptz, now()), stopped = @stopped where id = @id;

-- name: BulkActionGet :one
select sqlc.embed(b), t.role as actor_role
from bulk_actions b
left join tokens t on t.id = b.actor_id
where b.id = @id;

-- name: BulkCountedAt :one
-- The database's clock as a bulk action's count is read: its
-- matched_before is compared with times the database wrote (an attempt's
-- end, an instance's creation), which a replica's skewed clock would
-- misplace.
select statement_timestamp()::timestamptz;
