-- Every reveal of a sensitive value in clear is recorded here: who (the
-- token and the name it had at the time, kept even if the token is later
-- revoked), when, and which occurrence, side and field. The value itself is
-- never stored: the point is to know who saw what, not to keep another copy.
create table reveal_audit (
    id            bigint      generated always as identity primary key,
    occurrence_id uuid        not null references occurrences (id),
    side          text        not null check (side in ('inputs', 'outputs')),
    -- An RFC 6901 JSON pointer into the occurrence's inputs or outputs.
    field         text        not null,
    token_id      bigint      references tokens (id),
    principal     text        not null,
    revealed_at   timestamptz not null default now()
);

create index reveal_audit_by_occurrence on reveal_audit (occurrence_id);
