SELECT kind::text AS kind, status::text AS status, failure_code, failure_message, created_at, updated_at FROM dispute_actions WHERE merchant_id = $1 AND dispute_id = $2 ORDER BY id
