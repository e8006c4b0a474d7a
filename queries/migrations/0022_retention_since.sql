-- When this database first ran a relais that deletes ended history
-- (retention, DESIGN §13): history that ended before it is kept a whole
-- retention period from then, so that upgrading a database that kept
-- everything does not delete months of it at the first start. A database
-- created now records its creation, before which nothing ended.
create table retention_since (
    one   boolean primary key default true check (one),
    since timestamptz not null default now()
);
insert into retention_since default values;
