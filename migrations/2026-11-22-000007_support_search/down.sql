DROP INDEX payment_attempts_failed;
DROP INDEX webhook_events_conflicts;
DROP INDEX payment_attempts_no_record;
DROP INDEX payment_attempts_idempotency_key;
DROP INDEX payment_attempts_order;
CREATE INDEX payment_attempts_order ON payment_attempts (merchant_id, order_id, created_at DESC);
