-- Replicas keep usable tokens in memory (every request authenticates).
-- Whatever revokes, expires or deletes a token, the API, the CLI or an
-- operator's SQL in an emergency, tells every replica to forget what it
-- kept, in the transaction that does it.
create function relais_tokens_changed() returns trigger
language plpgsql as $$
begin
    perform pg_notify('relais_invalidate', 'tokens');
    return null;
end
$$;

create trigger tokens_changed
    after update of revoked_at, expires_at, hash, role, consumer_id or delete on tokens
    for each statement execute function relais_tokens_changed();
