-- relais:no-transaction
-- Push claims take turns across destinations (OccurrenceClaimPush): each
-- destination's first ready call, then each one's second, so that one
-- destination's backlog (a slow partner, a burst) does not hold back the
-- calls to every other until their deadlines pass. Each destination's
-- ready calls are read through this index, in claim order; the index
-- over every destination's ready calls together (0004), which no query
-- reads any more, goes, and every push insert and claim writes one index
-- fewer. Built and dropped CONCURRENTLY, outside a transaction, as 0020
-- is, for the same reasons.
drop index concurrently if exists occurrences_ready_push_by_destination;

create index concurrently occurrences_ready_push_by_destination on occurrences (destination, priority desc, available_at, id)
    where mode = 'push' and status = 'available';

drop index concurrently if exists occurrences_ready_push;
