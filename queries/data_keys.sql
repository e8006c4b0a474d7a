-- name: DataKeyList :many
select * from data_keys order by created_at;

-- name: DataKeyInsert :exec
insert into data_keys (id, probe) values (@id, @probe) on conflict (id) do nothing;

-- name: DataKeyRetire :exec
update data_keys set retired_at = now() where id = @id and retired_at is null;

-- name: SealedValuesExist :one
select (exists (select 1 from instances where sealed_inputs is not null)
    or exists (select 1 from occurrences where sealed_inputs is not null or sealed_outputs is not null)
    or exists (select 1 from destinations where sealed_headers is not null))::boolean;
