-- History partitioned by time (docs/DESIGN.md, "History partitioned by time"): the webhook
-- dedup of the partitioned `provider_webhooks` (migration 2026-11-28-000032) is unique over
-- (provider, provider_event_id, provider_created_at), the partition key with it, as a unique
-- index of a partitioned table must be. ATTACH PARTITION adopts a matching index of the
-- table it attaches rather than building one under its lock, and an ON CONFLICT of a
-- partitioned table needs that index valid on every partition: so it is built here, on the
-- table as it is, CONCURRENTLY (no write waits), alone in its file and outside a transaction
-- (metadata.toml), for the reason migration 2026-11-27-000020_webhook_events_age gives.
-- Should the build fail, drop the INVALID index
-- (`DROP INDEX CONCURRENTLY provider_webhooks_event_key`), delete this version from
-- __diesel_schema_migrations if it was recorded, and migrate again.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS provider_webhooks_event_key
    ON provider_webhooks (provider, provider_event_id, provider_created_at);
