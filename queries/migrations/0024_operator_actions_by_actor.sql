-- relais:no-transaction
-- Operators read the audit log by who acted ("what did ops-bob do last
-- night"): a bulk action writes one record per instance, so a name's
-- records may be few among millions. Newest first, as the log reads them.
-- Built CONCURRENTLY, outside a transaction, as 0020 is.
drop index concurrently if exists operator_actions_by_actor;

create index concurrently operator_actions_by_actor on operator_actions (actor_name, id desc);
