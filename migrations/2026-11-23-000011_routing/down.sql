DROP TABLE merchant_routing;
DROP DOMAIN provider_name;
ALTER DOMAIN provider_outcome DROP CONSTRAINT provider_outcome_known;
ALTER DOMAIN provider_outcome ADD CONSTRAINT provider_outcome_known
    CHECK (VALUE IN ('succeeded', 'failed', 'pending', 'unknown', 'not_found'));
