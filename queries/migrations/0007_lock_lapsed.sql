-- The one definition of "the lock lapsed, the occurrence is offered again"
-- (DESIGN §3): a reserved pull occurrence whose lock expired with attempts
-- left and its deadline, if any, still ahead. It stays stored as reserved
-- until a claim takes it (no sweeper), and every reader asks this function:
-- the claim, the observation list's status filter, the counts and the
-- observations themselves.
--
-- A plain SQL expression function, immutable and not strict, so the planner
-- inlines it into each query and still sees the indexable conditions (status,
-- mode, lock_expires_at): a plan is the same as with the expression written
-- out. It never answers null (for a non-null at), so NOT of it is exact.
create function relais_lock_lapsed(
    status text, mode text, lock_expires_at timestamptz,
    attempts integer, max_attempts integer, deadline_at timestamptz, at timestamptz)
returns boolean
language sql immutable parallel safe
as $$
    select status = 'reserved' and mode = 'pull'
       and lock_expires_at is not null and lock_expires_at <= at
       and attempts < max_attempts
       and (deadline_at is null or deadline_at > at)
$$;
