-- name: ReleaseInsert :one
insert into releases (definition_key, name, revision, notes)
values (@definition_key, @name, @revision, @notes)
returning *;

-- name: ReleaseGet :one
select * from releases where definition_key = @definition_key and name = @name;

-- name: ReleaseListByDefinitionAfter :many
select * from releases
where definition_key = @definition_key
  and (sqlc.narg('after_created_at')::timestamptz is null
       or (created_at, name) > (sqlc.narg('after_created_at')::timestamptz, sqlc.narg('after_name')::text))
order by created_at, name
limit @max;
