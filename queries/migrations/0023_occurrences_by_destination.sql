-- relais:no-transaction
-- Operators list the calls made to one push destination (everything that
-- failed against it during its outage): an index over push occurrences by
-- destination, newest first, as the lists read them. Pull occurrences,
-- which have none, are not in it. Built CONCURRENTLY, outside a
-- transaction, as 0020 is, for the same reasons.
drop index concurrently if exists occurrences_by_destination;

create index concurrently occurrences_by_destination on occurrences (destination, id desc) where destination is not null;
