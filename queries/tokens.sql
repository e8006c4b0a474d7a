-- name: TokenInsert :one
insert into tokens (name, role, hash, expires_at)
values (@name, @role, @hash, sqlc.narg('expires_at'))
returning *;

-- name: TokenGetByHash :one
-- touch_due says last_used_at is a minute old or unset, so that the caller
-- writes it at most once a minute (TokenTouch).
select tokens.*,
       (last_used_at is null or last_used_at <= coalesce(sqlc.narg('now')::timestamptz, now()) - interval '1 minute')::boolean as touch_due
from tokens
where hash = @hash and revoked_at is null
  and (expires_at is null or expires_at > coalesce(sqlc.narg('now')::timestamptz, now()));

-- name: TokenTouch :exec
-- The condition repeats TokenGetByHash's so that concurrent requests of one
-- token write once.
update tokens set last_used_at = coalesce(sqlc.narg('now')::timestamptz, now())
where id = @id
  and (last_used_at is null or last_used_at <= coalesce(sqlc.narg('now')::timestamptz, now()) - interval '1 minute');

-- name: TokenCountActive :one
select count(*) from tokens where revoked_at is null;

-- name: TokenInsertIfHashAbsent :execrows
insert into tokens (name, role, hash)
values (@name, @role, @hash)
on conflict (hash) do nothing;

-- name: TokenListStaff :many
-- Staff tokens not revoked, expired ones included (an admin cleans them up);
-- consumer tokens belong to their consumers and are managed there.
select * from tokens
where consumer_id is null and revoked_at is null and id > @after
order by id
limit @max;

-- name: TokenGetStaffForUpdate :one
-- Revoked ones too: revoking one again answers as the first time did.
select * from tokens
where id = @id and consumer_id is null
for update;

-- name: TokenLockUsableAdmins :many
-- Locks every usable admin token, so that two admins revoking each other's
-- tokens at once cannot both see the other as the remaining admin.
select id from tokens
where role = 'admin' and revoked_at is null
  and (expires_at is null or expires_at > coalesce(sqlc.narg('now')::timestamptz, now()))
order by id
for update;

-- name: TokenRevoke :execrows
update tokens set revoked_at = coalesce(sqlc.narg('now')::timestamptz, now())
where id = @id and revoked_at is null;

-- name: TokenGetStaff :one
select * from tokens
where id = @id and consumer_id is null and revoked_at is null;
