-- Routing between providers and failover (README, "Routing and failover").

-- A provider call can now be known not to have reached the provider (connection refused,
-- its circuit open): `unavailable`.
ALTER DOMAIN provider_outcome DROP CONSTRAINT provider_outcome_known;
ALTER DOMAIN provider_outcome ADD CONSTRAINT provider_outcome_known
    CHECK (VALUE IN ('succeeded', 'failed', 'pending', 'unknown', 'not_found', 'unavailable'));

-- What a provider is called: its name in attempts, refunds, webhook paths and routing.
CREATE DOMAIN provider_name AS text
    CONSTRAINT provider_name_known CHECK (VALUE ~ '^[a-z0-9_-]{1,32}$');

-- A merchant's provider order, and per currency (lowercase ISO 4217) an order of its own.
-- No row: every configured provider, in the configured order.
CREATE TABLE merchant_routing (
    merchant_id uuid PRIMARY KEY REFERENCES merchants (id),
    providers provider_name[] NOT NULL,
    currencies jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text NOT NULL,
    CONSTRAINT merchant_routing_providers
        CHECK (cardinality(providers) BETWEEN 1 AND 16 AND array_position(providers, NULL) IS NULL),
    CONSTRAINT merchant_routing_currencies CHECK (jsonb_typeof(currencies) = 'object')
);
