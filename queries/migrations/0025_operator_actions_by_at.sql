-- relais:no-transaction
-- Operators read the audit log by time ("what was done between 02:00 and
-- 03:00"): ids follow insertion, not the time an action records, and a
-- window far back would otherwise be found by reading every newer record.
-- Built CONCURRENTLY, outside a transaction, as 0024 is.
drop index concurrently if exists operator_actions_by_at;

create index concurrently operator_actions_by_at on operator_actions (at);
