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
-- arrived (`payments::webhooks::retention`): the reaper reads them oldest first.
CREATE INDEX webhook_events_age ON webhook_events (received_at);
