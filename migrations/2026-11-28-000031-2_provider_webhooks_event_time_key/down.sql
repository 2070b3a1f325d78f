DROP INDEX CONCURRENTLY IF EXISTS provider_webhooks_event_key;
