WITH moved AS (
    UPDATE event_deliveries SET attempts = attempts + 1, state = 'succeeded',
        updated_at = now()
    WHERE event_id = $1 AND endpoint_id = $2 AND state = 'pending'
      AND next_attempt_at = $6
    RETURNING 1),
logged AS (
    INSERT INTO delivery_attempts (event_id, endpoint_id, http_status, latency_ms, error)
    VALUES ($1, $2, $4, $5, NULL)),
recovered AS (
    UPDATE webhook_endpoints SET failing_since = NULL
    WHERE merchant_id = $3 AND id = $2 AND failing_since IS NOT NULL)
SELECT count(*) AS moved FROM moved
