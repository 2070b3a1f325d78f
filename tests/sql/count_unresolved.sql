SELECT count(*) FILTER (WHERE status = 'created') AS created,
    count(*) FILTER (WHERE status = 'pending') AS pending,
    coalesce(extract(epoch FROM now() - min(created_at)), 0)::bigint AS oldest_seconds,
    count(*) FILTER (WHERE created_at < now() - $1) AS overdue,
    (SELECT count(*) FROM refunds
        WHERE status IN ('created', 'pending') AND created_at < now() - $1) AS refunds_overdue,
    (SELECT count(*) FROM late_approvals
        WHERE status = 'undoing' AND detected_at < now() - $1) AS late_approvals_overdue
FROM payment_attempts WHERE status IN ('created', 'pending')
