-- Staff tokens may be made to expire, and record when they were last used so
-- that an admin can tell a forgotten token from a busy one before revoking
-- it. last_used_at is written at most once a minute per token (the lookup
-- says when it is due): authentication must not cost a write per request.
alter table tokens add column expires_at timestamptz;
alter table tokens add column last_used_at timestamptz;
