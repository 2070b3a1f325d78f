DROP TABLE idempotency_keys;
DROP TRIGGER orders_guard_transition ON orders;
DROP FUNCTION orders_guard_transition();
DROP TABLE orders;
