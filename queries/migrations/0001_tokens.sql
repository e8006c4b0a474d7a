-- Tokens authenticate every API call. Only a SHA-256 of the token is stored:
-- tokens are 256-bit random values, so a fast hash is enough to make a dump of
-- this table useless to an attacker, and lookups stay a single index probe.
create table tokens (
    id          bigint generated always as identity primary key,
    name        text        not null check (name <> ''),
    role        text        not null check (role in ('admin', 'designer', 'operator', 'consumer')),
    hash        bytea       not null unique check (length(hash) = 32),
    created_at  timestamptz not null default now(),
    revoked_at  timestamptz
);
