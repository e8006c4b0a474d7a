-- An on_error target may hold the instance instead of failing it (DESIGN
-- §12): the instance stops at the failed node, an incident for an operator,
-- and nothing advances it. Held is not ended: ended_at stays null and a stop
-- still cancels it. The failed occurrence keeps its status and error.
alter table instances drop constraint instances_status_check;
alter table instances add constraint instances_status_check
    check (status in ('running', 'held', 'completed', 'failed', 'cancelled'));
