-- The occurrences as lists read them: every column, in the table's order,
-- but the inputs and outputs, which lists do not show and which may each
-- be a megabyte. The planner inlines the view, so a list keeps its
-- index-ordered plan, and a value it does not select is never read.
create view occurrence_heads as
select id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
       deadline, deadline_at, destination, timeout, attempts, available_at, claimable_at, consumer_id, worker_id,
       reserved_at, lock_expires_at,
       null::jsonb as inputs, null::bytea as sealed_inputs, null::jsonb as outputs, null::bytea as sealed_outputs,
       outputs_digest, route, error_code, error_message, created_at, settled_at, deferred_at, defer_reason,
       attempt_credit, process_key, business_key, process_version
from occurrences;
