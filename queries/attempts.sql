-- name: AttemptEnd :exec
update attempts
set outcome = @outcome::text, ended_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    error_code = sqlc.narg('error_code'), error_message = sqlc.narg('error_message')
where occurrence_id = @occurrence_id and number = @number and ended_at is null;

-- name: AttemptExtend :exec
update attempts set lock_expires_at = @lock_expires_at::timestamptz
where occurrence_id = @occurrence_id and number = @number;

-- name: AttemptCancelOpen :exec
update attempts a
set outcome = 'cancelled', ended_at = coalesce(sqlc.narg('now')::timestamptz, now())
from occurrences o
where o.instance_id = @instance_id and a.occurrence_id = o.id and a.ended_at is null;

-- name: AttemptListByOccurrence :many
select a.*, c.name as consumer_name
from attempts a left join consumers c on c.id = a.consumer_id
where a.occurrence_id = @occurrence_id
order by a.number;
