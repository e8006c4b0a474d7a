-- Each replica's RELAIS_RETENTION, noted as it starts and at each of its
-- retention passes (DESIGN §13). Ended history is deleted only past the
-- longest retention noted within a day: one replica configured shorter
-- than the others (a typo, a manifest left behind) deleted, within
-- seconds of its start, what every other replica keeps; now it deletes
-- nothing the others keep, even while they are stopped for a deployment,
-- and each replica that disagrees with a running one says so in its log.
-- A replica quiet for a day is forgotten.
create table retention_settings (
    replica           text        primary key,
    retention_seconds bigint,     -- null: forever
    noted_at          timestamptz not null default now()
);
