-- Operators find incidents by their error code (every held instance that
-- failed with CRM_DOWN, to retry them once the CRM is back): an index over
-- the instances that have one, held or failed, newest first, as the lists
-- read them. Running and completed instances, most of the table, are not
-- in it. Building it reads the table once and holds back instance writes
-- meanwhile (a few seconds for ten million rows); lock_timeout gives up
-- rather than queue every start behind a long transaction (Migrate tries
-- again).
set local lock_timeout = '5s';

create index instances_by_error_code on instances (error_code, id desc) where error_code is not null;
