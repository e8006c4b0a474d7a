-- Each replica's RELAIS_RETENTION, noted at each of its retention passes
-- (DESIGN §13). Ended history is deleted only past the longest retention
-- of the replicas that noted theirs lately: one replica configured
-- shorter than the others (a typo, a manifest left behind) deleted, within
-- seconds of its start, what every other replica keeps; now it deletes
-- nothing the others keep, and each replica that disagrees says so in its
-- log. A replica gone quiet is forgotten.
create table retention_settings (
    replica           text        primary key,
    retention_seconds bigint,     -- null: forever
    noted_at          timestamptz not null default now()
);
