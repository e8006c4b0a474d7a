-- The pull protocol, completed (DESIGN §11).

-- Namespaced keys: dotted segments of the former grammar (crm.add_company).
alter table definitions drop constraint definitions_key_check;
alter table definitions add constraint definitions_key_check
    check (key ~ '^[a-z][a-z0-9_]{1,62}(\.[a-z][a-z0-9_]{1,62})*$' and length(key) <= 200);

-- A grant names a key or a pattern (crm.* or *) that also covers keys
-- created later: it can no longer reference definitions. Keys are checked
-- to exist when the grant is made; a pattern's revisions are all.
alter table consumer_grants drop constraint consumer_grants_definition_key_fkey;
alter table consumer_grants add constraint consumer_grants_pattern
    check (definition_key !~ '\*' or revisions is null);

-- Deferred: handed back by its holder to be settled later by any worker of
-- its consumer (or a settle token): no lock, no expiry; the deadline still
-- applies and a stop still cancels it.
alter table occurrences drop constraint occurrences_status_check;
alter table occurrences add constraint occurrences_status_check
    check (status in ('available', 'reserved', 'deferred', 'completed', 'failed', 'cancelled'));
alter table occurrences add column deferred_at timestamptz;
alter table occurrences add column defer_reason text;

-- The attempt budget is max_attempts (the frozen policy) plus this credit:
-- a release gives its attempt back (+1), a worker lowering attempts_left
-- takes some (negative). A column of its own keeps the policy as frozen.
alter table occurrences add column attempt_credit integer not null default 0;

-- Deadlines of deferred occurrences are driven by the timer too.
drop index occurrences_deadline;
create index occurrences_deadline on occurrences (deadline_at)
    where deadline_at is not null and status in ('available', 'reserved', 'deferred');

alter table attempts drop constraint attempts_outcome_check;
alter table attempts add constraint attempts_outcome_check
    check (outcome in ('completed', 'failed', 'expired', 'rejected', 'cancelled', 'released', 'disconnected'));
-- A failure report's digest (keyed HMAC of the request, with its worker) and
-- the answer it got, so an identical replay answers the same.
alter table attempts add column report_digest text;
alter table attempts add column report_answer jsonb;

-- Occurrence-scoped tokens for a front end that must settle one deferred
-- occurrence and nothing else; only the SHA-256 of the token is stored.
create table settle_tokens (
    hash          bytea       primary key,
    occurrence_id uuid        not null references occurrences (id),
    consumer_id   bigint      not null references consumers (id),
    created_at    timestamptz not null default now(),
    expires_at    timestamptz not null
);
create index settle_tokens_by_occurrence on settle_tokens (occurrence_id);
