-- What the console's triage and health pages read, each with an
-- index-ordered plan at a million occurrences.

-- The process version an occurrence belongs to, copied from its instance at
-- creation like process_key, so that a process version page counts each
-- node's occurrences from one index (an index-only scan) instead of joining
-- every instance of the version.
alter table occurrences add column process_version integer;
update occurrences o set process_version = i.version
from instances i where i.id = o.instance_id;
create index occurrences_by_process_node on occurrences (process_key, process_version, node, status);

-- Queue lag: the oldest claimable occurrence of a definition is the first
-- entry of this index at or before now.
create index occurrences_available_since on occurrences (definition_key, available_at)
    where status = 'available';

-- The audit records of one bulk action (the console shows them after it).
create index operator_actions_by_bulk on operator_actions (bulk_id, id desc) where bulk_id is not null;
