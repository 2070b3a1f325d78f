SELECT merchant_id, id, secret, previous_secret FROM webhook_endpoints
WHERE NOT starts_with(secret, $1)
   OR NOT starts_with(COALESCE(previous_secret, $1), $1)
ORDER BY merchant_id, id LIMIT $2
