-- name: ProcessEnsure :exec
insert into processes (key) values (@key) on conflict (key) do nothing;

-- name: ProcessLockForPublish :exec
select key from processes where key = @key for update;

-- name: ProcessVersionGetByDigest :one
select * from process_versions where process_key = @process_key and digest = @digest;

-- name: ProcessVersionLatest :one
select * from process_versions where process_key = @process_key order by version desc limit 1;

-- name: ProcessVersionInsert :one
insert into process_versions (process_key, version, digest, document)
values (@process_key, @version, @digest, @document)
returning *;

-- name: ProcessVersionGet :one
select * from process_versions where process_key = @process_key and version = @version;

-- name: ProcessVersionList :many
select * from process_versions where process_key = @process_key order by version;

-- name: ProcessKeys :many
-- Every process key, for the closest one to a misspelt reference.
select key from processes order by key;

-- name: ProcessList :many
select p.key, p.created_at,
       coalesce((select max(v.version) from process_versions v where v.process_key = p.key), 0)::integer as latest_version
from processes p
where p.key > @after
order by p.key
limit @max;

-- name: ProcessVersionsUsingDestination :many
-- The published process versions with a push node calling the destination,
-- a few of them: enough to name in a refusal.
select distinct v.process_key, v.version from process_versions v, json_each(v.document -> 'nodes') n
where n.value ->> 'kind' = 'push' and n.value ->> 'destination' = @destination::text
order by v.process_key, v.version
limit 4;

-- name: PushNodesOfDestination :many
-- Every published push node calling the destination, with the timeout its
-- document names ('' for none: the replica's default), for the nodes a
-- lowered max_timeout cuts short.
select v.process_key, v.version, n.key::text as node, coalesce(n.value ->> 'timeout', '')::text as timeout
from process_versions v, json_each(v.document -> 'nodes') n
where n.value ->> 'kind' = 'push' and n.value ->> 'destination' = @destination::text
order by v.process_key, v.version, 3;
