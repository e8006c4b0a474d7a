-- name: RevealAuditInsert :one
insert into reveal_audit (occurrence_id, side, field, token_id, principal, revealed_at, reason)
values (@occurrence_id, @side, @field, sqlc.narg('token_id'), @principal, coalesce(sqlc.narg('revealed_at')::timestamptz, now()), @reason)
returning *;

-- name: RevealAuditList :many
-- Newest first; the keyset cursor is the last id of the previous page.
-- Records outlive their occurrences (retention): occurrence_exists says
-- whether the target can still be shown, as OperatorActionList's does.
select sqlc.embed(r), exists(select 1 from occurrences o where o.id = r.occurrence_id)::boolean as occurrence_exists
from reveal_audit r
where (sqlc.narg('before')::bigint is null or r.id < sqlc.narg('before'))
order by r.id desc
limit @max;

-- name: RevealAuditListByOccurrence :many
select sqlc.embed(r), exists(select 1 from occurrences o where o.id = r.occurrence_id)::boolean as occurrence_exists
from reveal_audit r
where r.occurrence_id = @occurrence_id
  and (sqlc.narg('before')::bigint is null or r.id < sqlc.narg('before'))
order by r.id desc
limit @max;

-- name: OperatorActionInsert :exec
insert into operator_actions (at, actor_id, actor_name, action, reason, instance_id, occurrence_id, bulk_id, brought_forward)
values (@at, @actor_id, @actor_name, @action, @reason, @instance_id, @occurrence_id, @bulk_id, @brought_forward);

-- name: OperatorActionList :many
-- Records outlive their instances (retention deletes ended ones, never the
-- audit trail): instance_exists says whether the target can still be
-- shown, one primary-key probe per record of the page.
-- actor_role is the role of the token that acted (names are not unique;
-- tokens are revoked, never deleted).
select a.*, t.role as actor_role, exists(select 1 from instances i where i.id = a.instance_id)::boolean as instance_exists
from operator_actions a
left join tokens t on t.id = a.actor_id
where (sqlc.narg('instance_id')::uuid is null or a.instance_id = sqlc.narg('instance_id'))
  and (sqlc.narg('action')::text is null or a.action = sqlc.narg('action'))
  and (sqlc.narg('bulk_id')::uuid is null or a.bulk_id = sqlc.narg('bulk_id'))
  and (sqlc.narg('actor')::text is null or a.actor_name = sqlc.narg('actor'))
  -- The instances that still exist with this business key: records of
  -- deleted ones keep no key (the audit outlives retention).
  and (sqlc.narg('business_key')::text is null or a.instance_id in (select i.id from instances i where i.business_key = sqlc.narg('business_key')))
  and (sqlc.narg('acted_after')::timestamptz is null or a.at >= sqlc.narg('acted_after'))
  and (sqlc.narg('acted_before')::timestamptz is null or a.at < sqlc.narg('acted_before'))
  and (sqlc.narg('before')::bigint is null or a.id < sqlc.narg('before'))
order by a.id desc
limit @max;

-- name: OperatorActionCountBulk :one
-- What a bulk action applied so far: one record per instance it changed.
select count(*) from operator_actions where bulk_id = @bulk_id;

-- name: OperatorActionLatest :one
-- The newest operator action recorded on an instance (no row: none): a
-- confirmation carries its id, and an action is refused when another was
-- recorded since (operator_actions_by_instance finds it).
select id, at, actor_name, action, reason from operator_actions
where instance_id = @instance_id
order by id desc
limit 1;

-- name: OperatorActionRecordedOn :one
-- Whether the record id is one of an instance's: a last_action_id naming
-- none of them is a client's mistake, not a colleague's action.
select exists(select 1 from operator_actions where id = @id and instance_id = @instance_id)::boolean;
