-- POST /v1/orders/{id} changes an order's metadata under an Idempotency-Key: its keys record
-- the operation 'update_order' (docs/DESIGN.md, "Adding a keyed operation"). The list is
-- idempotency::Operation's, which tests/api/schema_mirrors.rs holds it to.
--
-- NOT VALID: a list that only grows cannot refuse a stored key, and checking every key again
-- would hold a lock that stops every keyed write for as long as the scan takes, while the
-- previous release's replicas serve during a rolling deploy. A value stored from now on is
-- checked all the same.
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund',
     'create_webhook_endpoint', 'rotate_webhook_secret', 'capture_payment', 'cancel_payment',
     'update_order')) NOT VALID;
