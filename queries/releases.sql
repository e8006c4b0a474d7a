-- name: ReleaseInsert :one
insert into releases (definition_key, name, revision, notes)
values (@definition_key, @name, @revision, @notes)
returning *;

-- name: ReleaseGet :one
select * from releases where definition_key = @definition_key and name = @name;

-- name: ReleaseListByDefinition :many
select * from releases where definition_key = @definition_key order by created_at, name;
