DROP TABLE merchant_routing;
DROP DOMAIN provider_name;
-- Before `unavailable` existed, a call that never reached its provider was logged `unknown`.
UPDATE provider_calls SET outcome = 'unknown' WHERE outcome = 'unavailable';
ALTER DOMAIN provider_outcome DROP CONSTRAINT provider_outcome_known;
ALTER DOMAIN provider_outcome ADD CONSTRAINT provider_outcome_known
    CHECK (VALUE IN ('succeeded', 'failed', 'pending', 'unknown', 'not_found'));
