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
