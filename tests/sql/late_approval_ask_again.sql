UPDATE late_approvals SET detail = $3,
    provider_undo_id = coalesce($4, provider_undo_id), next_check_at = $5
WHERE merchant_id = $1 AND id = $2 AND status = 'undoing' RETURNING *
