-- A settle token names the attempt it was issued for: it settles that
-- attempt while it is deferred, and afterwards answers as the consumer's
-- own token would (a replay 200, 409 already_settled or
-- occurrence_cancelled) instead of an opaque 401, until it expires; an
-- occurrence offered again after a retry takes none of its earlier
-- attempt's tokens. Tokens issued before have none: they keep working
-- only while their occurrence is deferred, as then.
alter table settle_tokens add column attempt integer;
