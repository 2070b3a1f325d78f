UPDATE late_approvals SET detail = $3, next_check_at = $4
WHERE merchant_id = $1 AND id = $2 AND status = 'undoing' RETURNING *
