-- relais:no-transaction
-- relais_oldest_deferred_age_seconds reads, per definition, when its
-- oldest deferred occurrence was deferred (OccurrenceOldestDeferredByDefinition):
-- one probe of this index per definition, however many approvals wait.
-- Built CONCURRENTLY, outside a transaction, as 0020 is, for the same
-- reasons.
drop index concurrently if exists occurrences_deferred_since;

create index concurrently occurrences_deferred_since on occurrences (definition_key, deferred_at)
    where status = 'deferred';
