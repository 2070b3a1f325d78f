DELETE FROM merchant_events e USING (
    SELECT id FROM merchant_events
    WHERE created_at < now() - $2 * interval '1 millisecond'
    ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED) old
WHERE e.id = old.id
