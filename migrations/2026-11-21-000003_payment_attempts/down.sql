DROP TABLE provider_calls;
DROP TABLE attempt_events;
DROP TABLE payment_attempts;
DROP FUNCTION payment_attempts_claim_order();
DROP FUNCTION payment_attempts_guard_transition();
DROP FUNCTION payment_attempts_settle_order();
