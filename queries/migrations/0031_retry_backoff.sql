-- A pull node's policy may grow its retry delay after each failure
-- (retry_backoff, a factor; 1 keeps it fixed) up to max_retry_delay (null:
-- Relais's ceiling, RELAIS_PULL_MAX_RETRY_DELAY, as read when it fails).
-- Frozen on the occurrence with the rest of its policy. A constant default
-- adds the column without rewriting the table, and a replica of the
-- previous release, which names the columns it writes, inserts rows with
-- the fixed delay it knows.
alter table occurrences
    add column retry_backoff double precision not null default 1,
    add column max_retry_delay interval;

-- The lists' view keeps every column in the table's order (0018).
create or replace view occurrence_heads as
select id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
       deadline, deadline_at, destination, timeout, attempts, available_at, claimable_at, consumer_id, worker_id,
       reserved_at, lock_expires_at,
       null::jsonb as inputs, null::bytea as sealed_inputs, null::jsonb as outputs, null::bytea as sealed_outputs,
       outputs_digest, route, error_code, error_message, created_at, settled_at, deferred_at, defer_reason,
       attempt_credit, process_key, business_key, process_version, retry_backoff, max_retry_delay
from occurrences;
