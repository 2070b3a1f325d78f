WITH gone AS (DELETE FROM key_quota_counts WHERE minute < $2 - 2)
SELECT merchant_id, minute, sum(opened)::bigint AS opened FROM key_quota_counts
WHERE minute >= $2 - 1 AND replica_id <> $1 GROUP BY merchant_id, minute
