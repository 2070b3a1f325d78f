-- The provider-webhook reaper reads webhook_events oldest first (`payments::webhooks::retention`;
-- docs/PRODUCTION.md, section 6). The table was never reaped before, so it may be big: the
-- index is built CONCURRENTLY, which lets replicas of the older version keep inserting
-- webhooks while it builds. CONCURRENTLY cannot run in a transaction, hence metadata.toml's
-- `run_in_transaction = false`, and the one statement of this file: several statements sent
-- at once would run in one implicit transaction. Should a build fail, PostgreSQL leaves an
-- INVALID index behind: drop it (`DROP INDEX CONCURRENTLY webhook_events_age`), delete this
-- version from __diesel_schema_migrations if it was recorded, and migrate again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_events_age ON webhook_events (received_at);
