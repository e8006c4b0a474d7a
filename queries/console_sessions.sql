-- name: ConsoleSessionInsert :exec
insert into console_sessions (key, token_hash, csrf, created_at, expires_at, ends_at)
values (@key, @token_hash, @csrf, @now::timestamptz, @expires_at, @ends_at);

-- name: ConsoleSessionGet :one
-- A live session (not expired at now).
select * from console_sessions where key = @key and expires_at > @now::timestamptz;

-- name: ConsoleSessionTouch :exec
-- Pushes a session's idle expiry back, never past its end.
update console_sessions set expires_at = least(@expires_at::timestamptz, ends_at)
where key = @key and expires_at < least(@expires_at::timestamptz, ends_at);

-- name: ConsoleSessionSetFlash :exec
update console_sessions set flash = @flash where key = @key;

-- name: ConsoleSessionTakeFlash :one
-- Takes the session's notice if it is for the page at path and, when it
-- names query parameters, for those: a reload, or another page, does not
-- show it again.
-- (RETURNING reads the row as updated: the notice is read before.)
with taken as (
    select s.key, s.flash from console_sessions s
    where s.key = @key and s.flash->>'page' = @path::text
      and coalesce(s.flash->>'query', '') in ('', @query::text)
    for update
)
update console_sessions s set flash = null
from taken
where s.key = taken.key
returning taken.flash;

-- name: ConsoleSessionSetReloadPaused :exec
update console_sessions set reload_paused = @paused where key = @key;

-- name: ConsoleSessionDelete :exec
delete from console_sessions where key = @key;

-- name: ConsoleSessionsPurge :execrows
-- Sessions past their expiry: nobody can present them again.
delete from console_sessions where expires_at <= @now::timestamptz;

-- name: ConsoleSessionsForget :exec
-- Every session, for a restored backup (see engine.ForgetSourceState).
delete from console_sessions;

-- name: ConsoleSessionsOfTokenEnd :exec
-- The console sessions opened with a token being revoked: none could be
-- used again (every request looks the token up), nor need they be kept.
delete from console_sessions where token_hash = (select hash from tokens where id = @token_id);
