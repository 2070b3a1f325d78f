UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, now())
WHERE merchant_id = $1 AND id = $2
RETURNING failing_since, now() AS now
