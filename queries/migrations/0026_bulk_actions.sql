-- One record per bulk operator action (DESIGN §12): what was asked (the
-- action, its reason, who, the filter), how many instances the confirmed
-- count held, and how far the action got. Its per-instance records are in
-- operator_actions under the same id; this one says what they cannot: the
-- filter, the instances skipped, whether the action ended. Kept, as
-- operator_actions are, beyond retention.
create table bulk_actions (
    id            uuid        primary key,
    action        text        not null check (action in ('retry', 'abandon', 'stop')),
    reason        text        not null check (reason <> ''),
    actor_id      bigint,
    actor_name    text        not null,
    -- The filter as the API takes it, its fields left out when empty. A
    -- business key is said to have been given, never kept: a customer's
    -- identifier would outlive the retention of its instances.
    filter        jsonb       not null,
    matched       bigint      not null,
    applied       bigint      not null default 0,
    skipped       bigint      not null default 0,
    started_at    timestamptz not null,
    -- Moved by each batch's own transaction, with applied and skipped: a
    -- record whose action neither ended nor progressed for long was left
    -- by a replica that stopped (what it applied stays applied).
    progressed_at timestamptz not null,
    ended_at      timestamptz,
    -- Set when an error stopped the action between two batches.
    stopped       boolean     not null default false
);
