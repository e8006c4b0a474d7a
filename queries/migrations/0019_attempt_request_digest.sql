-- attempts is written by every claim and settlement: give up on its lock
-- (Migrate tries again) rather than queue them all behind a long
-- transaction holding it. The column is added without a rewrite.
set local lock_timeout = '5s';

-- The digest of the fetch that made an attempt, beside its request_id: a
-- fetch repeating a request_id with another body (other subscriptions,
-- other declared fields) is refused rather than answered with the first
-- fetch's reservations under the second one's fields. Null for an attempt
-- claimed without a request_id, by a stream, or before this migration
-- (a replay of those is not checked).
alter table attempts add column request_digest bytea;
