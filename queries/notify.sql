-- name: Notify :exec
select pg_notify(@channel::text, @payload::text);
