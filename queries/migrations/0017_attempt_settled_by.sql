-- Who settled a deferred attempt: any worker of its consumer may, or a
-- front end holding a settle token, while the attempt's worker_id stays
-- the worker that deferred it. settled_by is the worker id the call went
-- by (a settle token's call naming none goes by "settle-token"); null for
-- every attempt settled by its own reservation.
alter table attempts add column settled_by text;
alter table attempts add column settled_with_token boolean not null default false;
