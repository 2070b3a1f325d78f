ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_class_is_a_failure,
    DROP CONSTRAINT payment_attempts_failure_class_known;
ALTER TABLE payment_attempts DROP COLUMN provider_failure_code, DROP COLUMN failure_class;
