-- History partitioned by time, step 2 of 3 (docs/DESIGN.md, "History partitioned by time"):
-- 000031's CHECKs validated. VALIDATE CONSTRAINT scans the table under SHARE UPDATE
-- EXCLUSIVE, which lets inserts, updates and deletes through: on a big table this step takes
-- as long as reading it, and no write waits for it (docs/SCALING.md, "History partitioned by
-- time", has the figures). In a transaction of its own, apart from 000031's, whose brief
-- ACCESS EXCLUSIVE locks would otherwise be held through the scans.

-- The webhooks an early version stored without their provider's time take their arrival's:
-- the nearest time payorch has, and the partition 000032 gives them is the legacy one either
-- way. So do the ones a provider dated at or past the bound (a clock ahead, a test's fixture
-- dated years on), which the legacy partition could not hold and would fail the CHECK with:
-- their own time stays in their payload, and the dedup of a later copy does not depend on it
-- (it is by provider and event id across every partition: migration 000037). Rare rows;
-- one statement, row locks only.
UPDATE provider_webhooks SET provider_created_at = received_at
WHERE provider_created_at IS NULL
   OR provider_created_at >= (SELECT legacy_until FROM history_tables
                              WHERE name = 'provider_webhooks');

ALTER TABLE merchant_events VALIDATE CONSTRAINT merchant_events_legacy_bound;
ALTER TABLE event_deliveries VALIDATE CONSTRAINT event_deliveries_legacy_bound;
ALTER TABLE delivery_attempts VALIDATE CONSTRAINT delivery_attempts_legacy_bound;
ALTER TABLE provider_webhooks VALIDATE CONSTRAINT provider_webhooks_legacy_bound;
ALTER TABLE attempt_transitions VALIDATE CONSTRAINT attempt_transitions_legacy_bound;
ALTER TABLE refund_transitions VALIDATE CONSTRAINT refund_transitions_legacy_bound;
