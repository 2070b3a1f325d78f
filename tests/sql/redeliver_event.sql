WITH event AS (SELECT id, merchant_id, type FROM merchant_events WHERE id = $1),
made AS (
    INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id)
    SELECT event.id, e.id, e.merchant_id FROM event
    JOIN webhook_endpoints e ON e.merchant_id = event.merchant_id
    WHERE e.status = 'enabled' AND e.deleted_at IS NULL
      AND (event.type = ANY (e.enabled_events) OR '*' = ANY (e.enabled_events))
    ON CONFLICT (event_id, endpoint_id) DO NOTHING
    RETURNING event_deliveries.*),
due AS (
    UPDATE event_deliveries d
    SET state = 'pending', next_attempt_at = now(), updated_at = now()
    FROM webhook_endpoints e
    WHERE d.event_id = $1 AND e.merchant_id = d.merchant_id AND e.id = d.endpoint_id
      AND e.status = 'enabled' AND e.deleted_at IS NULL
    RETURNING d.*),
kept AS (
    SELECT d.* FROM event_deliveries d WHERE d.event_id = $1
      AND NOT EXISTS (SELECT 1 FROM due WHERE due.endpoint_id = d.endpoint_id))
SELECT x.event_id, x.endpoint_id, e.url, x.state, x.attempts, x.next_attempt_at,
       x.created_at, x.updated_at
FROM (SELECT * FROM made UNION ALL SELECT * FROM due UNION ALL SELECT * FROM kept) x
JOIN webhook_endpoints e ON e.merchant_id = x.merchant_id AND e.id = x.endpoint_id
ORDER BY x.created_at, x.endpoint_id
