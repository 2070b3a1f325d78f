-- One decline vocabulary (docs/guides/declines.md): a failed attempt's `failure_code` is now
-- payorch's code, the same through both protocols; what the provider said is kept beside it
-- in `provider_failure_code`, and what the failure allows next in `failure_class`.
--
-- Wait at most 5 s for the table's lock: every ALTER below needs payment_attempts exclusively
-- for an instant, and one stuck behind a long transaction would hold up every write to
-- attempts queued behind it. A migration that times out changes nothing (it runs in its own
-- transaction); `payorch migrate` again applies it.
SET LOCAL lock_timeout = '5s';

-- Plain `text` with a table CHECK, not a domain as one column's rule usually is
-- (docs/DESIGN.md, "Attempts"): adding a column of a domain that has a CHECK rewrites the
-- whole table and its indexes under that exclusive lock (PostgreSQL 17 and before), and
-- validating a domain's CHECK later blocks writes for its scan, where a table's VALIDATE
-- CONSTRAINT does not. The
-- four words are providers::decline::FailureClass's, which tests/api/schema_mirrors.rs holds
-- the list to.
ALTER TABLE payment_attempts
    ADD COLUMN failure_class text,
    ADD COLUMN provider_failure_code text;

-- A class belongs to a failed attempt and is never `unknown` (an attempt whose outcome is
-- unknown is not failed: it stays pending); a provider's code comes only with a class. A class
-- may stand without a provider's code: payorch's own codes (`provider_no_record`,
-- `provider_unavailable`) were named by no provider. Not "every failed attempt has a class":
-- the attempts failed before this migration have neither (their `failure_code` is the
-- provider's raw code), and while the previous release's replicas serve during a rolling
-- deploy they still fail attempts without one; every failed attempt this release writes has a
-- class (`Decline::stored`).
--
-- NOT VALID, both: every row there is passes (the columns are new, so NULL), but proving it
-- means scanning the whole table while holding the exclusive lock ADD CONSTRAINT takes, which
-- stops every read and write of attempts for the scan. NOT VALID checks every row written from
-- now on and skips the scan. A later migration validates both (`ALTER TABLE payment_attempts
-- VALIDATE CONSTRAINT …`, which lets writes through while it scans); until then
-- `pg_constraint.convalidated` is false for them (docs/DESIGN.md, "Attempts").
ALTER TABLE payment_attempts
    ADD CONSTRAINT payment_attempts_failure_class_known CHECK (
        failure_class IN ('hard', 'soft', 'authentication_required', 'unknown')
    ) NOT VALID,
    ADD CONSTRAINT payment_attempts_class_is_a_failure CHECK (
        (failure_class IS NULL OR (status = 'failed' AND failure_class <> 'unknown'))
        AND (provider_failure_code IS NULL OR failure_class IS NOT NULL)
    ) NOT VALID;
