-- Erasure (a data subject's request): an ended instance deleted with its
-- occurrences and attempts before retention would, recorded in the
-- operator audit log like any other action on an instance. The check is
-- widened NOT VALID: every row satisfies the narrower one it replaces,
-- and operator_actions, kept forever, is not scanned under its lock.
set local lock_timeout = '5s';
alter table operator_actions drop constraint operator_actions_action_check;
alter table operator_actions add constraint operator_actions_action_check
    check (action in ('retry', 'abandon', 'stop', 'erase')) not valid;
