SELECT date_bin(make_interval(secs => $1), created_at, $2) AS start,
    provider, status, count(*) AS count
FROM payment_attempts
WHERE id >= $3 AND created_at >= $2
GROUP BY 1, 2, 3
