-- Processes, instances, occurrences and their attempts; consumers and their
-- grants; push destinations; the data-key check.

create table processes (
    key        text        primary key check (key ~ '^[a-z][a-z0-9_]{1,62}$'),
    created_at timestamptz not null default now()
);

create table process_versions (
    process_key text        not null references processes (key),
    version     integer     not null check (version > 0),
    digest      text        not null,
    -- json keeps the canonical bytes exactly as digested.
    document    json        not null,
    created_at  timestamptz not null default now(),
    primary key (process_key, version),
    unique (process_key, digest)
);

create trigger process_versions_immutable before update or delete on process_versions
    for each row execute function relais_refuse_change();

-- Secret values never sit in a jsonb column: they are split out of inputs
-- and outputs and stored AES-GCM sealed in the sealed_* columns.
create table instances (
    id              uuid        primary key,
    process_key     text        not null,
    version         integer     not null,
    status          text        not null check (status in ('running', 'completed', 'failed', 'cancelled')),
    business_key    text,
    inputs          jsonb       not null,
    sealed_inputs   bytea,
    idempotency_key text,
    request_digest  text,
    end_node        text,
    error_code      text,
    created_at      timestamptz not null default now(),
    ended_at        timestamptz,
    foreign key (process_key, version) references process_versions (process_key, version),
    unique (process_key, idempotency_key)
);

create index instances_by_process on instances (process_key, id desc);
create index instances_by_status on instances (status, id desc);
create index instances_by_business_key on instances (business_key, id desc) where business_key is not null;

create table consumers (
    id         bigint      generated always as identity primary key,
    name       text        not null unique check (name <> ''),
    created_at timestamptz not null default now(),
    revoked_at timestamptz
);

alter table tokens add column consumer_id bigint references consumers (id);
alter table tokens add constraint tokens_consumer_role check ((role = 'consumer') = (consumer_id is not null));

-- revisions null means every revision, present and future.
create table consumer_grants (
    consumer_id    bigint  not null references consumers (id),
    definition_key text    not null references definitions (key),
    revisions      integer[],
    primary key (consumer_id, definition_key)
);

create table destinations (
    name           text        primary key check (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    url            text        not null,
    header_names   text[]      not null default '{}',
    sealed_headers bytea,
    max_timeout    interval    not null,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now()
);

create table occurrences (
    id              uuid        primary key,
    instance_id     uuid        not null references instances (id),
    node            text        not null,
    definition_key  text        not null,
    revision        integer     not null,
    mode            text        not null check (mode in ('pull', 'push')),
    status          text        not null check (status in ('available', 'reserved', 'completed', 'failed', 'cancelled')),
    -- The policy frozen at creation.
    priority        smallint    not null check (priority between 0 and 9),
    max_attempts    integer     not null check (max_attempts > 0),
    retry_delay     interval    not null,
    deadline        interval,
    deadline_at     timestamptz,
    destination     text,
    timeout         interval,
    attempts        integer     not null default 0,
    available_at    timestamptz not null,
    -- When a claim may take the occurrence: available_at while available;
    -- the lock expiry while reserved with attempts left (an expired lock is
    -- re-offered by the claim itself, no sweeper); null otherwise.
    claimable_at    timestamptz,
    consumer_id     bigint      references consumers (id),
    worker_id       text,
    reserved_at     timestamptz,
    lock_expires_at timestamptz,
    inputs          jsonb       not null,
    sealed_inputs   bytea,
    outputs         jsonb,
    sealed_outputs  bytea,
    outputs_digest  text,
    route           text,
    error_code      text,
    error_message   text,
    created_at      timestamptz not null default now(),
    settled_at      timestamptz,
    -- Exactly one occurrence per (instance, node), whatever the races.
    unique (instance_id, node),
    foreign key (definition_key, revision) references revisions (definition_key, revision)
);

create index occurrences_claim on occurrences (mode, definition_key, revision, priority desc, claimable_at, id)
    where claimable_at is not null;
create index occurrences_deadline on occurrences (deadline_at)
    where deadline_at is not null and status in ('available', 'reserved');
create index occurrences_lock_expiry on occurrences (lock_expires_at)
    where status = 'reserved';
create index occurrences_by_definition on occurrences (definition_key, id desc);
create index occurrences_by_status on occurrences (status, id desc);
create index occurrences_by_definition_status on occurrences (definition_key, status, id desc);

create table attempts (
    occurrence_id   uuid        not null references occurrences (id),
    number          integer     not null check (number > 0),
    consumer_id     bigint      references consumers (id),
    worker_id       text,
    request_id      text,
    reserved_at     timestamptz not null,
    lock_expires_at timestamptz,
    ended_at        timestamptz,
    outcome         text        check (outcome in ('completed', 'failed', 'expired', 'rejected', 'cancelled')),
    error_code      text,
    error_message   text,
    primary key (occurrence_id, number)
);

create index attempts_by_request on attempts (consumer_id, worker_id, request_id) where request_id is not null;
create index attempts_by_consumer on attempts (consumer_id, occurrence_id);

-- One row per data key: a value sealed with it, so a wrong key is detected
-- at boot instead of when a consumer asks for its inputs.
-- retired_at is set once a rotation re-encrypted everything the key sealed.
create table data_keys (
    id         text        primary key,
    probe      bytea       not null,
    created_at timestamptz not null default now(),
    retired_at timestamptz
);

create index occurrences_claim_push on occurrences (priority desc, claimable_at, id)
    where mode = 'push' and claimable_at is not null;
