-- Back to 000030: no bound, no CHECKs.
ALTER TABLE refund_transitions DROP CONSTRAINT IF EXISTS refund_transitions_legacy_bound;
ALTER TABLE attempt_transitions DROP CONSTRAINT IF EXISTS attempt_transitions_legacy_bound;
ALTER TABLE provider_webhooks DROP CONSTRAINT IF EXISTS provider_webhooks_legacy_bound;
ALTER TABLE delivery_attempts DROP CONSTRAINT IF EXISTS delivery_attempts_legacy_bound;
ALTER TABLE event_deliveries DROP CONSTRAINT IF EXISTS event_deliveries_legacy_bound;
ALTER TABLE merchant_events DROP CONSTRAINT IF EXISTS merchant_events_legacy_bound;
DROP TABLE history_tables;
DROP FUNCTION history_uuid_at(timestamptz);
