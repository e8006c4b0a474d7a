-- The revisions each live worker takes, by definition key ({"crm": [1, 2]}),
-- as its subscriptions resolved them (a list of revisions, every granted
-- one, or those its declared fields fit): the console says when a
-- revision's occurrences wait and no live worker takes it (a process
-- version pinned a revision its workers do not subscribe to yet), where
-- it said nothing while some worker served the definition. Null in a row
-- an older replica wrote: what that worker takes is unknown, and no
-- warning is drawn from it.
alter table workers add column revisions jsonb;
