-- The settlement reconciliation (`payments::settlement::books`) reads, each round and for each
-- provider, the refunds finished within the stretch it compares: by provider and finished_at.
-- Built CONCURRENTLY, alone in its file and outside a transaction, as migration
-- 2026-11-27-000030-1_settlement_attempts_index is and for the same reason; should the build
-- fail, drop the INVALID index (`DROP INDEX CONCURRENTLY refunds_finished`), delete this
-- version from __diesel_schema_migrations if it was recorded, and migrate again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS refunds_finished ON refunds (provider, finished_at) WHERE finished_at IS NOT NULL;
