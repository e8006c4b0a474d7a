-- name: RevisionLatest :one
select * from revisions
where definition_key = @definition_key
order by revision desc
limit 1;

-- name: RevisionInsert :one
insert into revisions (definition_key, revision, digest, document)
values (@definition_key, @revision, @digest, @document)
returning *;

-- name: RevisionGet :one
select * from revisions where definition_key = @definition_key and revision = @revision;

-- name: RevisionListByDefinition :many
select * from revisions where definition_key = @definition_key order by revision;

-- name: RevisionNumbers :many
select revision from revisions where definition_key = @definition_key order by revision;

-- name: RevisionPairsWithPrefix :many
-- Every (definition, revision) whose key starts with prefix ('' for all):
-- what a pattern subscription (crm.* or *) resolves to at fetch time.
select definition_key, revision from revisions
where starts_with(definition_key, @prefix::text)
order by definition_key, revision;
