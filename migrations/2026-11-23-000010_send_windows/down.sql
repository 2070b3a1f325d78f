DROP TRIGGER payment_attempts_guard_sending ON payment_attempts;
DROP FUNCTION payment_attempts_guard_sending();
ALTER TABLE payment_attempts DROP COLUMN sending_until;
