-- The keys of metadata changes go with the operation: the domain could not take them back.
DELETE FROM idempotency_keys WHERE operation = 'update_order';
ALTER DOMAIN key_operation DROP CONSTRAINT key_operation_known;
ALTER DOMAIN key_operation ADD CONSTRAINT key_operation_known CHECK (VALUE IN
    ('create_order', 'cancel_order', 'create_payment', 'checkout', 'create_refund',
     'create_webhook_endpoint', 'rotate_webhook_secret', 'capture_payment', 'cancel_payment'));
