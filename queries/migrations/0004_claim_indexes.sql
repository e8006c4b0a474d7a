-- Claim from two index ranges instead of one: ready occurrences
-- (status available, in priority order) and reserved ones whose lock
-- expired (in expiry order). With one index on claimable_at, every
-- occurrence in flight sat in the claim's range with a future claimable_at,
-- and the planner could not see that a subscription selects few rows.
drop index occurrences_claim;
drop index occurrences_claim_push;

create index occurrences_ready on occurrences (mode, definition_key, revision, priority desc, available_at, id)
    where status = 'available';
create index occurrences_lock_expiring on occurrences (mode, definition_key, revision, lock_expires_at)
    where status = 'reserved';
create index occurrences_claimable_next on occurrences (mode, definition_key, revision, claimable_at)
    where claimable_at is not null;
create index occurrences_ready_push on occurrences (priority desc, available_at, id)
    where mode = 'push' and status = 'available';
