-- name: WorkerStreamUpsert :one
-- A stream's catalog row, written when it connects and every heartbeat
-- (re-created should a pruning replica have taken it meanwhile: inserted
-- says so, xmax being 0 only for a row this statement inserted).
insert into workers (id, consumer_id, worker_id, protocol, transport, replica, subscriptions, definition_keys, revisions,
                     connected_at, last_seen_at, live_until)
values (@id, @consumer_id, @worker_id, 'stream', sqlc.narg('transport'), @replica, @subscriptions, @definition_keys::text[], @revisions::jsonb,
        @connected_at::timestamptz, coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now()) + @live_for::interval)
on conflict (id) do update
set definition_keys = excluded.definition_keys, revisions = excluded.revisions, last_seen_at = excluded.last_seen_at, live_until = excluded.live_until
returning (xmax = 0)::boolean as inserted;

-- name: WorkerDelete :exec
delete from workers where id = @id;

-- name: WorkerPollerSeen :one
-- A polling worker's row, upserted by its fetches. connected says whether
-- it (re)appeared: a new row, or one that was no longer live.
insert into workers (id, consumer_id, worker_id, protocol, replica, subscriptions, definition_keys, revisions,
                     connected_at, last_seen_at, live_until)
values (@id, @consumer_id, @worker_id, @protocol, @replica, @subscriptions, @definition_keys::text[], @revisions::jsonb,
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now()) + @live_for::interval)
on conflict (consumer_id, worker_id) where protocol <> 'stream' do update
set protocol = excluded.protocol, replica = excluded.replica, subscriptions = excluded.subscriptions, definition_keys = excluded.definition_keys,
    revisions = excluded.revisions,
    connected_at = case when workers.live_until <= excluded.last_seen_at then excluded.connected_at else workers.connected_at end,
    last_seen_at = excluded.last_seen_at, live_until = excluded.live_until
returning (connected_at = last_seen_at)::boolean as connected;

-- name: WorkerPollerLeft :exec
-- A poller whose fetch ended before its wait (its client left) is live
-- only as long as after any fetch, unless another replica saw it since
-- (a retry there, waiting now): the row then names that replica.
update workers set live_until = least(live_until, coalesce(sqlc.narg('now')::timestamptz, now()) + @live_for::interval)
where consumer_id = @consumer_id and worker_id = @worker_id and protocol <> 'stream'
  and replica = @replica;

-- name: WorkerListLive :many
-- Live workers (by id, for keyset pagination), each with what it holds now
-- and the locks it let lapse since @lapsed_since.
select w.*, c.name as consumer_name,
       (select count(*) from occurrences o
        where o.consumer_id = w.consumer_id and o.worker_id = w.worker_id and o.status = 'reserved'
          and o.lock_expires_at > coalesce(sqlc.narg('now')::timestamptz, now()))::integer as in_flight,
       -- last_lapsed_at means something only with a lapse counted (sqlc
       -- cannot type a column the left join makes null).
       coalesce(l.lapsed, 0)::integer as lapsed, coalesce(l.last_lapsed_at, w.connected_at)::timestamptz as last_lapsed_at
from workers w
join consumers c on c.id = w.consumer_id
left join (
    select x.consumer_id, x.worker_id, count(*)::integer as lapsed, max(x.lapsed_at)::timestamptz as last_lapsed_at
    from relais_lapses(@lapsed_since::timestamptz, coalesce(sqlc.narg('now')::timestamptz, now())) x
    where sqlc.narg('definition_key')::text is null or x.definition_key = sqlc.narg('definition_key')::text
    group by x.consumer_id, x.worker_id
) l on l.consumer_id = w.consumer_id and l.worker_id = w.worker_id
where w.live_until > coalesce(sqlc.narg('now')::timestamptz, now())
  and (sqlc.narg('definition_key')::text is null or sqlc.narg('definition_key')::text = any(w.definition_keys))
  and (sqlc.narg('after')::uuid is null or w.id > sqlc.narg('after')::uuid)
order by w.id
limit @max;

-- name: WorkerCountLive :one
select count(*)::integer from workers
where live_until > coalesce(sqlc.narg('now')::timestamptz, now()) and @definition_key::text = any(definition_keys);

-- name: WorkerCountLiveByDefinition :many
-- Live workers (every replica's streams and pollers) by definition key and
-- protocol: what /metrics exports for an alert on a definition nobody
-- serves. The catalog holds a row per live worker: a few hundred at most.
select k.key::text as definition_key, w.protocol, count(*)::bigint as count
from workers w cross join lateral unnest(w.definition_keys) as k(key)
where w.live_until > coalesce(sqlc.narg('now')::timestamptz, now())
group by k.key, w.protocol;

-- name: WorkerStreamOf :one
-- The consumer of a stream still in the catalog.
select consumer_id from workers where id = @id and protocol = 'stream';

-- name: WorkerLapseRecord :exec
-- A lock the timers found lapsed with no attempt left (no claim takes it
-- back to record it): counted against the worker that held it.
insert into worker_lapses (occurrence_id, attempt, consumer_id, worker_id, definition_key, lapsed_at)
values (@occurrence_id, @attempt, @consumer_id, @worker_id, @definition_key, @lapsed_at)
on conflict do nothing;

-- name: WorkerLapsesRecent :many
-- The worker ids that let locks lapse since @since (of one definition, or
-- all), connected now or not, the most lapses first: a worker that dies
-- and restarts is listed though its rows come and go, and so are the ids
-- of a worker that takes a new one at each start. total counts the ids.
select x.consumer_id, c.name as consumer_name, x.worker_id, count(*)::integer as lapsed,
       max(x.lapsed_at)::timestamptz as last_lapsed_at,
       exists (select 1 from workers w
               where w.consumer_id = x.consumer_id and w.worker_id = x.worker_id
                 and w.live_until > coalesce(sqlc.narg('now')::timestamptz, now()))::boolean as live,
       (count(*) over ())::integer as total
from relais_lapses(@since::timestamptz, coalesce(sqlc.narg('now')::timestamptz, now())) x
join consumers c on c.id = x.consumer_id
where sqlc.narg('definition_key')::text is null or x.definition_key = sqlc.narg('definition_key')::text
group by x.consumer_id, c.name, x.worker_id
order by lapsed desc, last_lapsed_at desc, x.consumer_id, x.worker_id
limit @max;

-- name: WorkerLapsesPrune :execrows
-- Forgets lapses older than the catalog's window, a batch at a time.
delete from worker_lapses
where (occurrence_id, attempt) in (
    select occurrence_id, attempt from worker_lapses
    where lapsed_at < @before::timestamptz
    order by lapsed_at
    limit @max);

-- name: WorkerPrune :many
-- Takes rows that are no longer live: pollers that stopped fetching and
-- streams whose replica died. Each is taken by one replica (SKIP LOCKED).
delete from workers
where id in (
    select id from workers
    where live_until <= coalesce(sqlc.narg('now')::timestamptz, now())
    order by live_until
    limit @max
    for update skip locked)
returning id, consumer_id, worker_id, protocol, replica;

-- name: PullWorkWaits :one
-- Whether pull occurrences of a definition wait for a worker, from the
-- claim's own indexes: available ones, and reserved ones, which with no
-- worker connected are held by a worker that is gone (the claim takes
-- them back once their lock lapses). A definition only push nodes use has
-- none, and needs no worker.
select exists (
    select 1 from occurrences
    where mode = 'pull' and definition_key = @definition_key and status in ('available', 'reserved')
)::boolean;

-- name: DefinitionUse :one
-- Whether published process versions have pull nodes, push nodes, on the
-- definition: one that only push nodes use needs no worker at all, one
-- that no process uses needs none yet.
select coalesce(bool_or(n.value->>'kind' = 'pull'), false)::boolean as pulled,
       coalesce(bool_or(n.value->>'kind' = 'push'), false)::boolean as pushed
from process_versions pv, json_each(pv.document->'nodes') n
where n.value->>'definition' = @definition_key::text;

-- name: PushOnlyDefinitions :many
-- The definitions only push nodes of published process versions use
-- (DefinitionUse's pushed without pulled, for them all at once): push
-- nodes are never retried, so no retry of theirs waits.
select (n.value->>'definition')::text as definition_key
from process_versions pv, json_each(pv.document->'nodes') n
where n.value->>'definition' is not null
group by 1
having bool_or(n.value->>'kind' = 'push') and not bool_or(n.value->>'kind' = 'pull')
order by 1;

-- name: PullRevisionsWithoutTaker :many
-- The revisions whose pull occurrences wait now (available and due) while
-- no live worker takes them, though one may serve their definition
-- (another revision): one probe of occurrences_ready per revision, and
-- the catalog's few hundred rows. A row whose revisions are unknown (an
-- older replica wrote it) is taken to take them all: no warning is drawn
-- from what is not known.
select r.definition_key, r.revision
from revisions r
where exists (
    select 1 from occurrences x
    where x.mode = 'pull' and x.definition_key = r.definition_key and x.revision = r.revision and x.status = 'available'
      and x.available_at <= coalesce(sqlc.narg('now')::timestamptz, now())
)
and not exists (
    select 1 from workers w
    where w.live_until > coalesce(sqlc.narg('now')::timestamptz, now())
      and r.definition_key = any(w.definition_keys)
      and (w.revisions is null or w.revisions @> jsonb_build_object(r.definition_key::text, jsonb_build_array(r.revision)))
)
order by r.definition_key, r.revision;

-- name: DefinitionPins :many
-- The process versions whose nodes pin a revision of the definition, by
-- revision: what a designer reads before changing or retiring one.
select distinct (n.value->>'revision')::int as revision, pv.process_key, pv.version
from process_versions pv, json_each(pv.document->'nodes') n
where n.value->>'definition' = @definition_key::text
order by revision, pv.process_key, pv.version;

-- name: WorkerLapsesByDefinition :many
-- The locks lapsed since @since by definition, recorded or not yet taken
-- back, as WorkerLapsesRecent counts them: what /metrics exports for an
-- alert on workers that die holding tasks.
select x.definition_key, count(*)::bigint as lapsed
from relais_lapses(@since::timestamptz, coalesce(sqlc.narg('now')::timestamptz, now())) x
group by x.definition_key;

-- name: WorkerLapsesList :many
-- The worker ids that let locks lapse since @since (of one definition, or
-- all), connected now or not, by consumer then worker id for keyset
-- pagination after (@after_consumer, @after_worker): the API's list, which
-- its clients sort as they need.
select x.consumer_id, c.name as consumer_name, x.worker_id, count(*)::integer as lapsed,
       max(x.lapsed_at)::timestamptz as last_lapsed_at,
       exists (select 1 from workers w
               where w.consumer_id = x.consumer_id and w.worker_id = x.worker_id
                 and w.live_until > coalesce(sqlc.narg('now')::timestamptz, now()))::boolean as live
from relais_lapses(@since::timestamptz, coalesce(sqlc.narg('now')::timestamptz, now())) x
join consumers c on c.id = x.consumer_id
where (sqlc.narg('definition_key')::text is null or x.definition_key = sqlc.narg('definition_key')::text)
  and (sqlc.narg('after_consumer')::bigint is null
       or (x.consumer_id, x.worker_id) > (sqlc.narg('after_consumer')::bigint, sqlc.narg('after_worker')::text))
group by x.consumer_id, c.name, x.worker_id
order by x.consumer_id, x.worker_id
limit @max;
