UPDATE event_deliveries SET attempts = attempts + 1, state = $3,
    next_attempt_at = CASE WHEN $3 = 'pending'
        THEN now() + $4 * interval '1 microsecond' ELSE next_attempt_at END,
    updated_at = now()
WHERE event_id = $1 AND endpoint_id = $2 AND state = 'pending'
  AND next_attempt_at = $5
