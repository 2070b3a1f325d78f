CREATE INDEX idempotency_keys_recent ON idempotency_keys (merchant_id, created_at);
DROP TABLE key_quota_counts;
