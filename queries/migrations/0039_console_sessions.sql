-- Console sessions live in the database, not in each replica's memory: a
-- replica's restart no longer signs every operator out, and behind a load
-- balancer any replica serves any session (it needed sticky routing). The
-- key is the SHA-256 of the session id the browser holds, so that the
-- table holds nothing a browser could present; the token signed in with
-- is kept as its stored hash and looked up at every request (its
-- revocation ends its sessions). A flash is the notice a form's redirect
-- shows once: {"page", "query", …}, opaque to SQL but for its page.
create table console_sessions (
    key           bytea       primary key,
    token_hash    bytea       not null,
    csrf          text        not null,
    created_at    timestamptz not null,
    expires_at    timestamptz not null,
    ends_at       timestamptz not null,
    reload_paused boolean     not null default false,
    flash         jsonb
);
-- The purge of ended sessions.
create index console_sessions_expiry on console_sessions (expires_at);
