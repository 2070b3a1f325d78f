UPDATE late_approvals SET status = $3, detail = $4, provider_undo_id = $5
WHERE merchant_id = $1 AND id = $2 AND status = 'undoing' RETURNING *
