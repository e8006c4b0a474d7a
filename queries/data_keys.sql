-- name: DataKeyList :many
select * from data_keys order by created_at;

-- name: DataKeyInsert :exec
insert into data_keys (id, probe) values (@id, @probe) on conflict (id) do nothing;

-- name: DataKeyRetire :exec
update data_keys set retired_at = now() where id = @id and retired_at is null;

-- name: SealedValuesExist :one
select (exists (select 1 from instances where sealed_inputs is not null)
    or exists (select 1 from occurrences where sealed_inputs is not null or sealed_outputs is not null)
    or exists (select 1 from destinations where sealed_headers is not null or sealed_url_query is not null))::boolean;

-- name: InstanceSealedBatch :many
-- Rows sealed with another key than @primary (the key id is stored in the
-- value's header: version byte, id length byte, id).
select id, sealed_inputs from instances
where sealed_inputs is not null
  and substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) <> convert_to(@primary_key::text, 'UTF8')
limit @max
for update skip locked;

-- name: InstanceReseal :exec
update instances set sealed_inputs = @sealed_inputs where id = @id;

-- name: OccurrenceSealedBatch :many
select id, sealed_inputs, sealed_outputs from occurrences
where (sealed_inputs is not null
       and substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) <> convert_to(@primary_key::text, 'UTF8'))
   or (sealed_outputs is not null
       and substring(sealed_outputs from 3 for get_byte(sealed_outputs, 1)) <> convert_to(@primary_key::text, 'UTF8'))
limit @max
for update skip locked;

-- name: OccurrenceReseal :exec
update occurrences set sealed_inputs = @sealed_inputs, sealed_outputs = @sealed_outputs where id = @id;

-- name: DestinationSealedBatch :many
select name, sealed_headers, sealed_url_query, sealed_signing_secret from destinations
where (sealed_headers is not null
       and substring(sealed_headers from 3 for get_byte(sealed_headers, 1)) <> convert_to(@primary_key::text, 'UTF8'))
   or (sealed_url_query is not null
       and substring(sealed_url_query from 3 for get_byte(sealed_url_query, 1)) <> convert_to(@primary_key::text, 'UTF8'))
   or (sealed_signing_secret is not null
       and substring(sealed_signing_secret from 3 for get_byte(sealed_signing_secret, 1)) <> convert_to(@primary_key::text, 'UTF8'))
limit @max
for update skip locked;

-- name: DestinationReseal :exec
update destinations set sealed_headers = @sealed_headers, sealed_url_query = @sealed_url_query,
    sealed_signing_secret = @sealed_signing_secret where name = @name;

-- name: SealedUnderOtherKeys :one
select ((select count(*) from instances
         where sealed_inputs is not null
           and substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) <> convert_to(@primary_key::text, 'UTF8'))
      + (select count(*) from occurrences
         where (sealed_inputs is not null
                and substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) <> convert_to(@primary_key::text, 'UTF8'))
            or (sealed_outputs is not null
                and substring(sealed_outputs from 3 for get_byte(sealed_outputs, 1)) <> convert_to(@primary_key::text, 'UTF8')))
      + (select count(*) from destinations
         where (sealed_headers is not null
                and substring(sealed_headers from 3 for get_byte(sealed_headers, 1)) <> convert_to(@primary_key::text, 'UTF8'))
            or (sealed_url_query is not null
                and substring(sealed_url_query from 3 for get_byte(sealed_url_query, 1)) <> convert_to(@primary_key::text, 'UTF8'))
            or (sealed_signing_secret is not null
                and substring(sealed_signing_secret from 3 for get_byte(sealed_signing_secret, 1)) <> convert_to(@primary_key::text, 'UTF8'))))::bigint;

-- name: SealedUnderKeyExists :one
-- Whether any stored value is sealed with @key_id (the id in the value's
-- header): a recorded key that sealed nothing still stored may go.
select (exists (select 1 from instances
                where sealed_inputs is not null
                  and substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) = convert_to(@key_id::text, 'UTF8'))
     or exists (select 1 from occurrences
                where (sealed_inputs is not null
                       and substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) = convert_to(@key_id::text, 'UTF8'))
                   or (sealed_outputs is not null
                       and substring(sealed_outputs from 3 for get_byte(sealed_outputs, 1)) = convert_to(@key_id::text, 'UTF8')))
     or exists (select 1 from destinations
                where (sealed_headers is not null
                       and substring(sealed_headers from 3 for get_byte(sealed_headers, 1)) = convert_to(@key_id::text, 'UTF8'))
                   or (sealed_url_query is not null
                       and substring(sealed_url_query from 3 for get_byte(sealed_url_query, 1)) = convert_to(@key_id::text, 'UTF8'))))::boolean;
