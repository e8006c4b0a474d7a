-- name: DefinitionUpsertWorking :one
insert into definitions (key, working, working_digest)
values (@key, @working, @working_digest)
on conflict (key) do update
    set working = excluded.working,
        working_digest = excluded.working_digest,
        updated_at = case when definitions.working_digest = excluded.working_digest
                          then definitions.updated_at else now() end
returning *, (xmax = 0)::boolean as created;

-- name: DefinitionGet :one
select * from definitions where key = @key;

-- name: DefinitionGetForUpdate :one
select * from definitions where key = @key for update;

-- name: DefinitionList :many
select d.key, d.working, d.created_at, d.updated_at,
       coalesce((select max(r.revision) from revisions r where r.definition_key = d.key), 0)::integer as latest_revision,
       (select count(*) from releases l where l.definition_key = d.key)::integer as release_count
from definitions d
where d.key > @after
order by d.key
limit @max;

-- name: DefinitionKeys :many
-- Every definition key, for the closest one to a misspelt reference.
select key from definitions order by key;
