WITH cutoff AS (SELECT now() - $1 * interval '1 millisecond' AS at)
DELETE FROM provider_webhooks w USING (
    SELECT w.id FROM provider_webhooks w, cutoff
    WHERE w.received_at < cutoff.at
      AND (w.attempt_id IS NULL OR (
          EXISTS (SELECT 1 FROM payment_attempts a
                  WHERE a.merchant_id = w.merchant_id AND a.id = w.attempt_id
                    AND a.finished_at < cutoff.at)
          AND NOT EXISTS (SELECT 1 FROM refunds r
                  WHERE r.merchant_id = w.merchant_id AND r.payment_id = w.attempt_id
                    AND (r.finished_at IS NULL OR r.finished_at >= cutoff.at))
          AND NOT EXISTS (SELECT 1 FROM hold_operations h
                  WHERE h.merchant_id = w.merchant_id AND h.payment_id = w.attempt_id
                    AND (h.finished_at IS NULL OR h.finished_at >= cutoff.at))))
    ORDER BY w.received_at LIMIT $2
    FOR UPDATE OF w SKIP LOCKED) old
WHERE w.id = old.id
