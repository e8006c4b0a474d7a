-- The reports of an attempt that Relais refused (outputs the contract does
-- not take, a failure it cannot record, a Camunda variable it cannot
-- convert): how many, the last one's code and pointers, and when. A
-- refused report changes nothing else, so an attempt whose worker kept
-- sending one until its lock lapsed read as a worker that never answered,
-- and its incident as a lock to lengthen (Camunda QA). No message is kept:
-- a refusal's words may quote the refused value.
alter table attempts
    add column refusals integer not null default 0,
    add column refused_at timestamptz,
    add column refusal_code text,
    add column refusal_pointers text[];
