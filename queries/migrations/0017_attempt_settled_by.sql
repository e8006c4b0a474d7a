-- attempts is written by every claim and settlement: give up on its lock
-- (Migrate tries again) rather than queue them all behind a long
-- transaction holding it. Both columns are added without a rewrite.
set local lock_timeout = '5s';

-- Who settled a deferred attempt: any worker of its consumer may, or a
-- front end holding a settle token, while the attempt's worker_id stays
-- the worker that deferred it. settled_by is the worker id the call went
-- by (a settle token's call naming none goes by "settle-token"). Null for
-- an attempt its own reservation settled, and for a deferred attempt
-- settled before this migration (not recorded then).
alter table attempts
    add column settled_by text,
    add column settled_with_token boolean not null default false;

-- A deferral now clears its attempt's lock expiry, as it clears the
-- occurrence's: so do the attempts deferred before.
update attempts a set lock_expires_at = null
from occurrences o
where o.id = a.occurrence_id and o.status = 'deferred' and a.number = o.attempts and a.ended_at is null;
