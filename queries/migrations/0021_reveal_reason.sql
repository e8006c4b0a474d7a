-- Every reveal records why, as every operator action does (DESIGN §12):
-- who saw a protected value is half of an audit. Reveals recorded before
-- this migration have none.
alter table reveal_audit add column reason text;
