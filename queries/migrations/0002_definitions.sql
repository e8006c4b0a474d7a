-- A definition's Working copy is the only mutable part; revisions and
-- releases are immutable, enforced by triggers so that no code path (and no
-- hand-written SQL) can reinterpret a process that pinned a revision.
create table definitions (
    key            text        primary key check (key ~ '^[a-z][a-z0-9_]{1,62}$'),
    working        jsonb       not null,
    working_digest text        not null,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now()
);

create table revisions (
    definition_key text        not null references definitions (key),
    revision       integer     not null check (revision > 0),
    digest         text        not null,
    -- json, not jsonb: the canonical bytes are kept exactly as digested.
    document       json        not null,
    created_at     timestamptz not null default now(),
    primary key (definition_key, revision)
);

create table releases (
    definition_key text        not null,
    name           text        not null check (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    revision       integer     not null,
    notes          text        not null default '',
    created_at     timestamptz not null default now(),
    primary key (definition_key, name),
    foreign key (definition_key, revision) references revisions (definition_key, revision)
);

create function relais_refuse_change() returns trigger language plpgsql as $$
begin
    raise exception '% rows are immutable', tg_table_name using errcode = 'RL001';
end $$;

create trigger revisions_immutable before update or delete on revisions
    for each row execute function relais_refuse_change();
create trigger releases_immutable before update or delete on releases
    for each row execute function relais_refuse_change();
