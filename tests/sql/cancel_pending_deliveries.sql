UPDATE event_deliveries SET state = 'canceled', updated_at = now()
WHERE merchant_id = $1 AND endpoint_id = $2 AND state = 'pending'
