SELECT count(*) FILTER (WHERE finished_at > $3) AS last_day,
    count(*) AS last_30_days
FROM payment_attempts
WHERE merchant_id = $1 AND payment_method = $2 AND finished_at > $4
  AND status = 'failed' AND provider_failure_code IS NOT NULL
  AND failure_code <> 'provider_rejected' AND id <> $5
