-- How many attempts workers gave up on an occurrence's budget since its
-- last operator retry (attempts_left lowered, a Camunda retries count
-- under what remains): the policy's backoff counts the attempts spent, not
-- those waived, or lowering the budget would jump the delay ahead.
alter table occurrences add column attempts_waived integer not null default 0;

-- The lists' view keeps every column in the table's order (0018).
create or replace view occurrence_heads as
select id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
       deadline, deadline_at, destination, timeout, attempts, available_at, claimable_at, consumer_id, worker_id,
       reserved_at, lock_expires_at,
       null::jsonb as inputs, null::bytea as sealed_inputs, null::jsonb as outputs, null::bytea as sealed_outputs,
       outputs_digest, route, error_code, error_message, created_at, settled_at, deferred_at, defer_reason,
       attempt_credit, process_key, business_key, process_version, retry_backoff, max_retry_delay, attempts_waived
from occurrences;
