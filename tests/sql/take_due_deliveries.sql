WITH due AS (
    SELECT event_id, endpoint_id FROM event_deliveries
    WHERE state = 'pending' AND next_attempt_at <= now()
    ORDER BY next_attempt_at LIMIT $2
    FOR UPDATE SKIP LOCKED),
judged AS (
    SELECT due.event_id, due.endpoint_id,
           e.status = 'enabled' AND e.deleted_at IS NULL AS live
    FROM due JOIN event_deliveries d USING (event_id, endpoint_id)
    JOIN webhook_endpoints e ON e.merchant_id = d.merchant_id AND e.id = d.endpoint_id)
UPDATE event_deliveries d SET
    state = CASE WHEN judged.live THEN 'pending' ELSE 'canceled' END,
    next_attempt_at = CASE WHEN judged.live
        THEN now() + $1 * interval '1 microsecond' ELSE d.next_attempt_at END,
    updated_at = now()
FROM judged, webhook_endpoints e, merchant_events ev
WHERE d.event_id = judged.event_id AND d.endpoint_id = judged.endpoint_id
  AND e.merchant_id = d.merchant_id AND e.id = d.endpoint_id AND ev.id = d.event_id
RETURNING d.event_id, d.endpoint_id, d.merchant_id, d.state::text AS state,
          d.attempts, d.next_attempt_at AS lease_until, e.url, e.secret,
          e.previous_secret, e.previous_secret_until,
          ev.id, ev.seq, ev.type::text AS event_type, ev.resource_id, ev.order_id,
          ev.snapshot, ev.request, ev.created_at
