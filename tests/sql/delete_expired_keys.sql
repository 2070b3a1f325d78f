DELETE FROM idempotency_keys k USING (
    SELECT merchant_id, key FROM idempotency_keys i
    WHERE state <> 'in_flight' AND NOT unresolved AND expires_at < now()
      AND (state = 'expired' OR NOT idempotency_key_made_money_move(i))
    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) gone
WHERE k.merchant_id = gone.merchant_id AND k.key = gone.key
