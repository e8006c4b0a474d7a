-- Operator actions on instances (DESIGN §12): retry and abandon a held
-- instance, stop a running or held one. Each is recorded with who, when,
-- why and on what. Kept at least as long as the instances (no foreign key:
-- retention deletes ended instances, never their audit trail).
create table operator_actions (
    id           bigint      generated always as identity primary key,
    at           timestamptz not null default now(),
    actor_id     bigint,
    actor_name   text        not null,
    action       text        not null check (action in ('retry', 'abandon', 'stop')),
    reason       text        not null check (reason <> ''),
    instance_id  uuid        not null,
    -- The occurrence a retry offered again, when there was one.
    occurrence_id uuid,
    -- Set when the action was applied to every instance a filter matched.
    bulk_id      uuid
);
create index operator_actions_by_instance on operator_actions (instance_id, id desc);
create index operator_actions_by_time on operator_actions (id desc);

-- Triage filters on occurrences, each with an index-ordered plan for the
-- newest-first list: what the instance is (process, business key) is copied
-- onto its occurrences at creation, since a join could not keep the order.
alter table occurrences add column process_key text;
alter table occurrences add column business_key text;
update occurrences o set process_key = i.process_key, business_key = i.business_key
from instances i where i.id = o.instance_id;
create index occurrences_by_process on occurrences (process_key, id desc);
create index occurrences_by_business_key on occurrences (business_key, id desc) where business_key is not null;
create index occurrences_by_error_code on occurrences (error_code, id desc) where error_code is not null;
create index occurrences_by_settled on occurrences (settled_at desc, id desc) where settled_at is not null;

-- Retention (DESIGN §13) deletes ended instances oldest first; the reveal
-- audit outlives the occurrences it names, like the operator audit.
create index instances_ended on instances (ended_at) where ended_at is not null;
alter table reveal_audit drop constraint reveal_audit_occurrence_id_fkey;
