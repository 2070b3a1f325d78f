UPDATE late_approvals t SET next_check_at = now() + $1, checks = t.checks + 1
FROM (SELECT merchant_id, id FROM late_approvals
      WHERE status IN ('undoing') AND next_check_at <= now()
      ORDER BY next_check_at LIMIT $2 FOR UPDATE SKIP LOCKED) due
WHERE t.merchant_id = due.merchant_id AND t.id = due.id
RETURNING t.*
