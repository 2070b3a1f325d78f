-- The settlement reconciliation (`payments::settlement::books`) reads, each round and for each
-- provider, the payments that succeeded within the stretch it compares: by provider and
-- finished_at, among succeeded attempts (the query's own words, so the planner uses it).
-- payment_attempts may be big and is written all the time: built CONCURRENTLY, for the reason
-- migration 2026-11-27-000020_webhook_events_age gives, alone in its file and outside a
-- transaction (metadata.toml). Should the build fail, drop the INVALID index
-- (`DROP INDEX CONCURRENTLY payment_attempts_settled`), delete this version from
-- __diesel_schema_migrations if it was recorded, and migrate again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS payment_attempts_settled ON payment_attempts (provider, finished_at) WHERE status = 'succeeded';
