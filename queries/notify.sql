-- name: Notify :exec
select pg_notify(@channel::text, @payload::text);

-- name: NotifyMany :exec
-- Notify for many notifications in one statement (engine/merge.go), sent
-- in order.
select pg_notify(v.channel, v.payload) from (
    select unnest($1::text[]) as channel,
        unnest($2::text[]) as payload
) v;
