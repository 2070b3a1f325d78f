-- Support search (README, "Support"): every filter of GET /v1/support/payments served by an
-- index, with a million attempts. Results are newest first by id: attempt ids are UUIDv7,
-- whose leading bits are the time they were made, so the primary key (merchant_id, id) and
-- payment_attempts_id serve the order and the keyset pagination.

-- An order's attempts, found by the order alone (support knows an order id before it knows
-- the merchant); the merchant's own listing filters the few rows this finds.
DROP INDEX payment_attempts_order;
CREATE INDEX payment_attempts_order ON payment_attempts (order_id, created_at DESC);

-- The client's Idempotency-Key that made an attempt, after the key row itself has expired.
CREATE INDEX payment_attempts_idempotency_key ON payment_attempts (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Failed attempts, newest first: a decline is a small share of attempts, too rare to find by
-- walking every id. (Succeeded attempts are most of them, and open ones have
-- payment_attempts_due.)
CREATE INDEX payment_attempts_failed ON payment_attempts (id) WHERE status = 'failed';

-- What needs a human: attempts that failed because the provider had no record, and
-- webhooks that contradicted an attempt. Both are rare, so these indexes are small.
CREATE INDEX payment_attempts_no_record ON payment_attempts (id)
    WHERE failure_code = 'provider_no_record';
CREATE INDEX webhook_events_conflicts ON webhook_events (received_at)
    WHERE outcome = 'conflict';
