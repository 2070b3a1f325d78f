-- What payorch keeps (docs/PRODUCTION.md, sections 5 and 6).
--
-- Webhook-endpoint secrets are stored sealed under the master key
-- (`v1:<key id>:<nonce>:<ciphertext>`, AES-256-GCM; README, "Webhook endpoints"). A migration
-- cannot know the key, so the rows an older version wrote in clear are sealed by `serve` at
-- its start, before it answers; these CHECKs are therefore NOT VALID: they refuse every
-- clear value written from now on (an insert, and any update of a row, so a clear row left
-- over cannot be touched before it is sealed); once a start has sealed them, it validates
-- them as the owner (`events::endpoints::sealed::validate_sealed_checks`), so they hold for
-- every row.
ALTER TABLE webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_secret_sealed
        CHECK (secret ~ '^v1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/]{16}:[A-Za-z0-9+/]+$') NOT VALID,
    ADD CONSTRAINT webhook_endpoints_previous_secret_sealed
        CHECK (previous_secret ~ '^v1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/]{16}:[A-Za-z0-9+/]+$')
        NOT VALID;

-- Provider webhooks are deleted a retention after their payment is final, or after they
-- arrived (`payments::webhooks::retention`): the reaper reads them oldest first, through
-- `webhook_events_age`, built without blocking inserts by a migration of its own
-- (2026-11-27-000020_webhook_events_age).
--
-- `payload_kept`: whether `payload` went through the allowlist of what is kept
-- (`providers::kept`; docs/PRODUCTION.md, section 6). Rows an older version stored hold the
-- whole payload, card and billing data included; the event reaper rewrites them through the
-- same allowlist (`payments::webhooks::old_payloads`). The default stays false and this
-- version sets true on each insert, so a row an older replica writes while an upgrade rolls
-- is marked for stripping too. A constant default: adding the column rewrites nothing.
-- The runtime role's table-wide grant (migration 2026-11-27-000016_runtime_role) covers a
-- new column; it is granted again by name so the rights do not rest on that alone.
ALTER TABLE webhook_events ADD COLUMN payload_kept boolean NOT NULL DEFAULT false;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_events TO payorch_runtime;
