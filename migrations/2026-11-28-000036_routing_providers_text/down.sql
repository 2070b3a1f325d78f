ALTER TABLE merchant_routing DROP CONSTRAINT merchant_routing_providers;
ALTER TABLE merchant_routing ALTER COLUMN providers TYPE provider_name[] USING providers::provider_name[];
ALTER TABLE merchant_routing ADD CONSTRAINT merchant_routing_providers CHECK (
    cardinality(providers) BETWEEN 1 AND 16
    AND array_position(providers, NULL::provider_name) IS NULL
);
