-- A destination may sign each push call (HMAC-SHA256 of a timestamp and
-- the body, in Relais-Signature) with a secret of its own, sealed like its
-- header values.
alter table destinations add column sealed_signing_secret bytea;
