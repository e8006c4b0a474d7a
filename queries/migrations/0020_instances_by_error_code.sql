-- relais:no-transaction
-- Operators find incidents by their error code (every held instance that
-- failed with CRM_DOWN, to retry them once the CRM is back): an index over
-- the instances that have one, held or failed, newest first, as the lists
-- read them. Running and completed instances, most of the table, are not
-- in it. Built CONCURRENTLY, outside a transaction: a plain build would
-- hold back every start, hold and end of every replica while it reads
-- the table. An earlier build cut short leaves an invalid index, dropped
-- first; so is a valid one whose migration was not recorded (a crash in
-- between), and built again.
drop index concurrently if exists instances_by_error_code;

create index concurrently instances_by_error_code on instances (error_code, id desc) where error_code is not null;
