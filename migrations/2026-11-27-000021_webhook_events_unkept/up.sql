-- The rows whose payload has not been through the allowlist yet (`payload_kept`, migration
-- 2026-11-27-000018): the event reaper finds them here, oldest first, every round
-- (`payments::webhooks::old_payloads`). Partial, so once they are stripped it is empty and a
-- round costs nothing. Built CONCURRENTLY for the reason migration 2026-11-27-000020 gives,
-- alone in its file and outside a transaction (metadata.toml).
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_events_unkept ON webhook_events (received_at)
    WHERE NOT payload_kept;
