-- POST /v1/orders/{id} changes an order's metadata under an Idempotency-Key: its keys record
-- the operation 'update_order' (docs/DESIGN.md, "Adding a keyed operation"). The list is
-- idempotency::Operation's, which tests/api/schema_mirrors.rs holds it to.
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund',
     'create_webhook_endpoint', 'rotate_webhook_secret', 'capture_payment', 'cancel_payment',
     'update_order'));
