ALTER TABLE merchant_routing
    DROP COLUMN max_attempts,
    DROP COLUMN retry_after_three_d_secure,
    DROP COLUMN retry_soft_declines;
DROP TRIGGER payment_attempts_retry_follows_failure ON payment_attempts;
DROP FUNCTION payment_attempts_retry_follows_failure();
ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_three_d_secure_known,
    DROP CONSTRAINT payment_attempts_retry_has_reason,
    DROP CONSTRAINT payment_attempts_retry_reason_known;
ALTER TABLE payment_attempts
    DROP COLUMN three_d_secure, DROP COLUMN retry_reason, DROP COLUMN retry_of;
