UPDATE provider_calls SET operation = 'search' WHERE operation = 'list';
ALTER DOMAIN provider_operation DROP CONSTRAINT provider_operation_known;
ALTER DOMAIN provider_operation ADD CONSTRAINT provider_operation_known CHECK (VALUE IN
    ('create', 'retrieve', 'search', 'create_refund', 'retrieve_refund', 'capture', 'cancel',
     'complete_action'));
