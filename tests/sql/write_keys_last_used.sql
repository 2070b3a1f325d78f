WITH written AS (
    UPDATE api_keys SET last_used_at = now()
    WHERE id IN (SELECT id FROM api_keys WHERE id = ANY($1) FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT id FROM api_keys
WHERE id = ANY($1) AND id NOT IN (SELECT id FROM written)
