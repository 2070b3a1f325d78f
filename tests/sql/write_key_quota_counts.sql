INSERT INTO key_quota_counts (merchant_id, replica_id, minute, opened)
SELECT m, $1, n, c
FROM unnest($2::uuid[], $3::bigint[], $4::bigint[]) AS u(m, n, c)
ON CONFLICT (merchant_id, replica_id, minute) DO UPDATE SET opened = EXCLUDED.opened
