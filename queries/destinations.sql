-- name: DestinationGet :one
select * from destinations where name = @name;

-- name: DestinationUpsert :one
insert into destinations (name, url, sealed_url_query, header_names, sealed_headers, max_timeout, sealed_signing_secret)
values (@name, @url, @sealed_url_query, @header_names, @sealed_headers, @max_timeout, @sealed_signing_secret)
on conflict (name) do update
    set url = excluded.url, sealed_url_query = excluded.sealed_url_query, header_names = excluded.header_names,
        sealed_headers = excluded.sealed_headers, max_timeout = excluded.max_timeout,
        sealed_signing_secret = excluded.sealed_signing_secret, updated_at = now()
returning *, (xmax = 0)::boolean as created;

-- name: DestinationList :many
select * from destinations where name > @after order by name limit @max;

-- name: DestinationDelete :execrows
delete from destinations where name = @name;

-- name: DestinationLockForPublish :many
select name, max_timeout from destinations
where name = any(@names::text[])
order by name
for share;

-- name: DestinationLockName :exec
-- Serializes the puts of one name until the transaction ends: a put reads
-- the destination, compares and writes, and a name not created yet has no
-- row to lock.
select pg_advisory_xact_lock(hashtextextended('relais destination ' || @name::text, 0));

-- name: DestinationNames :many
-- Every destination name, for the closest one to a misspelt reference.
select name from destinations order by name;
