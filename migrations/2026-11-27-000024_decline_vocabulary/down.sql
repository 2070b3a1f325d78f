ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_class_is_a_failure;
ALTER TABLE payment_attempts DROP COLUMN provider_failure_code, DROP COLUMN failure_class;
DROP DOMAIN failure_class;
