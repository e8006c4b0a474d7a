-- Connected workers (DESIGN §10).

-- The worker catalog: every connected stream (one row per stream, written
-- when it connects, refreshed every heartbeat, deleted when it ends) and
-- every polling worker (one row per consumer and worker_id, upserted by its
-- fetches at most every few seconds). Rows are for operators only: who may
-- settle what is decided by the occurrence's lock, never by this table.
-- live_until is when the row stops being live: the last sighting plus
-- three heartbeats (plus, for a poller, the wait its fetch may long-poll).
create table workers (
    id              uuid        primary key,
    consumer_id     bigint      not null references consumers (id),
    worker_id       text        not null,
    protocol        text        not null check (protocol in ('stream', 'long_poll')),
    replica         text        not null,
    -- The subscriptions as the worker asked for them ([{definition,
    -- revisions, fields}]), and the definition keys they resolved to.
    subscriptions   jsonb       not null,
    definition_keys text[]      not null,
    connected_at    timestamptz not null,
    last_seen_at    timestamptz not null,
    live_until      timestamptz not null
);
create unique index workers_poller on workers (consumer_id, worker_id) where protocol = 'long_poll';
create index workers_live on workers (live_until);

-- A worker's in-flight count is read from the occurrences it holds, so the
-- catalog is never written per claim or settlement. Reserved rows are few.
create index occurrences_by_holder on occurrences (consumer_id, worker_id) where status = 'reserved';
