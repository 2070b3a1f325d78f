ALTER TABLE webhook_events DROP COLUMN payload_kept;
ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_previous_secret_sealed,
    DROP CONSTRAINT webhook_endpoints_secret_sealed;
