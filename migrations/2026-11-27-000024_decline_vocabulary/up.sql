-- One decline vocabulary (docs/guides/declines.md): a failed attempt's `failure_code` is now
-- payorch's code, the same through both protocols; what the provider said is kept beside it
-- in `provider_failure_code`, and what the failure allows next in `failure_class`. The four
-- words are providers::decline::FailureClass's, which tests/api/schema_mirrors.rs holds the
-- domain to.
CREATE DOMAIN failure_class AS text
    CONSTRAINT failure_class_known CHECK (VALUE IN
        ('hard', 'soft', 'authentication_required', 'unknown'));

ALTER TABLE payment_attempts
    ADD COLUMN failure_class failure_class,
    ADD COLUMN provider_failure_code text;

-- A class belongs to a failed attempt, comes with the provider's code, and is never
-- `unknown`: an attempt whose outcome is unknown is not failed, it stays pending.
--
-- Why not "every failed attempt has both": the attempts failed before this migration kept
-- the provider's raw code in `failure_code` and have no class, and while the previous
-- release's replicas serve during a rolling deploy they still fail attempts without one. So
-- the rule binds the columns to each other and to `failed`; every failed attempt this
-- release writes has both (`Decline::stored`). NOT VALID: the old rows have neither column,
-- and checking them would hold a lock over every write to attempts for the scan.
ALTER TABLE payment_attempts ADD CONSTRAINT payment_attempts_class_is_a_failure CHECK (
    failure_class IS NULL
    OR (status = 'failed' AND provider_failure_code IS NOT NULL AND failure_class <> 'unknown')
) NOT VALID;
