UPDATE idempotency_keys k SET state = 'expired', response_status = NULL,
    response_body = NULL, locked_until = NULL,
    expires_at = greatest(k.created_at + $2 * interval '1 millisecond', k.expires_at),
    updated_at = now()
FROM (
    SELECT merchant_id, key FROM idempotency_keys i
    WHERE state <> 'in_flight' AND state = 'completed' AND NOT unresolved
      AND expires_at < now() AND idempotency_key_made_money_move(i)
      AND NOT idempotency_key_work_is_open(i)
    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) due
WHERE k.merchant_id = due.merchant_id AND k.key = due.key
