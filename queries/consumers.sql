-- name: ConsumerInsert :one
insert into consumers (name) values (@name) returning *;

-- name: ConsumerGet :one
select * from consumers where id = @id;

-- name: ConsumerGetForUpdate :one
-- Locks the consumer's row: grants replaced against the ones read (If-Match)
-- by two clients at once are judged one after the other.
select * from consumers where id = @id for update;

-- name: ConsumerList :many
select * from consumers where id > @after order by id limit @max;

-- name: ConsumerRevoke :one
-- Whether this statement revoked it: now() is the transaction's start, so
-- revoked_at equals it only when set here (an earlier revocation is older).
update consumers set revoked_at = coalesce(revoked_at, now()) where id = @id
returning (revoked_at = now())::boolean as revoked_now;

-- name: ConsumerTokenRevokeAll :exec
update tokens set revoked_at = now() where consumer_id = @consumer_id and revoked_at is null;

-- name: ConsumerTokenExpireAll :many
-- A rotation with an overlap: the consumer's live tokens expire at
-- now() + overlap instead of at once (one that expires sooner keeps its
-- expiry).
update tokens
set expires_at = least(coalesce(expires_at, 'infinity'::timestamptz), now() + make_interval(secs => @overlap_seconds::float8))
where consumer_id = @consumer_id and revoked_at is null and (expires_at is null or expires_at > now())
returning expires_at;

-- name: ConsumerTokenInsert :one
insert into tokens (name, role, hash, consumer_id) values (@name, 'consumer', @hash, @consumer_id) returning *;

-- name: GrantDeleteAll :exec
delete from consumer_grants where consumer_id = @consumer_id;

-- name: GrantInsert :exec
insert into consumer_grants (consumer_id, definition_key, revisions) values (@consumer_id, @definition_key, @revisions);

-- name: GrantList :many
select * from consumer_grants where consumer_id = @consumer_id order by definition_key;

-- name: GrantListLive :many
-- The grants that authorize: none once the consumer is revoked (its grants
-- stay, for the record), so that a long poll or a stream it had open
-- claims nothing more.
select g.* from consumer_grants g
join consumers c on c.id = g.consumer_id and c.revoked_at is null
where g.consumer_id = @consumer_id
order by g.definition_key;

-- name: ConsumerNames :many
select id, name from consumers where id = any(@ids::bigint[]);

-- name: ConsumerByName :one
select * from consumers where name = @name;
