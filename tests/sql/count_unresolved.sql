SELECT count(*) FILTER (WHERE status = 'created') AS created,
    count(*) FILTER (WHERE status = 'pending') AS pending,
    coalesce(extract(epoch FROM now() - min(created_at)), 0)::bigint AS oldest_seconds,
    count(*) FILTER (WHERE created_at < now() - $1) AS overdue
FROM payment_attempts WHERE status IN ('created', 'pending')
