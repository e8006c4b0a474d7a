-- A retry that brought a running instance's waiting retry forward (its
-- attempts left unchanged) was recorded as a held instance's retry (a
-- fresh budget of attempts) is: the record says which now, as the API and
-- the console show it (on-call QA: the audit log could not tell them
-- apart). A constant default adds the column without rewriting the table.
alter table operator_actions add column brought_forward boolean not null default false;
