-- Locks that lapsed while a worker held them: its lock expired unsettled,
-- or its stream ended holding the assignment. The worker catalog counts a
-- worker's lapses of the last hour, and the Workers page lists the worker
-- ids that let locks lapse, connected or not, so that a worker dying and
-- restarting (under one worker_id or a new one each time) does not look
-- healthy.
-- A row is written only where a lapse is recorded anyway (a claim taking
-- the lapsed lock back, a stream ending, the timers failing an occurrence
-- whose last lock lapsed), never on a settlement's path; the timers prune
-- rows past the window. No reference to occurrences or consumers: the row
-- outlives neither for long, and must not slow their deletion.
create table worker_lapses (
    occurrence_id uuid        not null,
    attempt       integer     not null,
    consumer_id   bigint      not null,
    worker_id     text        not null,
    definition_key text       not null,
    lapsed_at     timestamptz not null,
    primary key (occurrence_id, attempt)
);
create index worker_lapses_by_worker on worker_lapses (consumer_id, worker_id, lapsed_at);
create index worker_lapses_by_time on worker_lapses (lapsed_at);

-- The locks lapsed after since: those recorded, and those lapsed at at
-- that no claim took back yet (a worker alone on its definition that died:
-- nothing takes its tasks back), not those whose lapse a stream's end
-- recorded already. One definition of "lapsed" for the Workers page, its
-- table of worker ids and /metrics. Inlined by the planner (one SELECT).
create function relais_lapses(since timestamptz, at timestamptz)
returns setof worker_lapses
language sql stable as $$
    select r.* from worker_lapses r
    where r.lapsed_at > since
    union all
    select o.id, o.attempts, o.consumer_id, o.worker_id, o.definition_key, o.lock_expires_at from occurrences o
    where o.status = 'reserved' and o.mode = 'pull' and o.consumer_id is not null and o.worker_id is not null
      and o.lock_expires_at <= at and o.lock_expires_at > since
      and not exists (select 1 from worker_lapses d where d.occurrence_id = o.id and d.attempt = o.attempts)
$$;
