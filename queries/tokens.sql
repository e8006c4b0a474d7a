-- name: TokenInsert :one
insert into tokens (name, role, hash)
values (@name, @role, @hash)
returning *;

-- name: TokenGetByHash :one
select * from tokens
where hash = @hash and revoked_at is null;

-- name: TokenCountActive :one
select count(*) from tokens where revoked_at is null;

-- name: TokenInsertIfHashAbsent :execrows
insert into tokens (name, role, hash)
values (@name, @role, @hash)
on conflict (hash) do nothing;

-- name: TokenList :many
select * from tokens order by id;

-- name: TokenRevoke :execrows
update tokens set revoked_at = coalesce(sqlc.narg('now')::timestamptz, now())
where id = @id and revoked_at is null;
