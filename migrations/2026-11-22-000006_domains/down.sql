-- Back to the base types with the same rules as table CHECK constraints.
ALTER TABLE webhook_events
    ALTER provider_event_id TYPE text,
    ALTER outcome TYPE text,
    ADD CONSTRAINT webhook_events_provider_event_id_check CHECK (length(provider_event_id) BETWEEN 1 AND 255),
    ADD CONSTRAINT webhook_events_outcome_check
        CHECK (outcome IN ('applied', 'stale', 'conflict', 'unknown_attempt', 'ignored'));

ALTER TABLE provider_calls
    ALTER operation TYPE text,
    ALTER source TYPE text,
    ALTER outcome TYPE text,
    ALTER latency_ms TYPE integer,
    ADD CONSTRAINT provider_calls_operation_check CHECK (operation IN ('create', 'retrieve', 'search')),
    ADD CONSTRAINT provider_calls_source_check CHECK (source IN ('api', 'reconciler', 'support')),
    ADD CONSTRAINT provider_calls_outcome_check
        CHECK (outcome IN ('succeeded', 'failed', 'pending', 'unknown', 'not_found')),
    ADD CONSTRAINT provider_calls_latency_ms_check CHECK (latency_ms >= 0);

ALTER TABLE attempt_events
    ALTER from_status TYPE text,
    ALTER to_status TYPE text,
    ALTER source TYPE text,
    ADD CONSTRAINT attempt_events_from_status_check CHECK (from_status IN ('created', 'pending')),
    ADD CONSTRAINT attempt_events_to_status_check
        CHECK (to_status IN ('created', 'pending', 'succeeded', 'failed')),
    ADD CONSTRAINT attempt_events_source_check
        CHECK (source IN ('api', 'provider_response', 'webhook', 'reconciler', 'support'));

DROP TRIGGER payment_attempts_settle_order ON payment_attempts;
ALTER TABLE payment_attempts
    ALTER status TYPE text,
    ALTER amount TYPE bigint,
    ALTER currency TYPE text,
    ALTER payment_method TYPE text,
    ADD CONSTRAINT payment_attempts_status_check
        CHECK (status IN ('created', 'pending', 'succeeded', 'failed')),
    ADD CONSTRAINT payment_attempts_amount_check CHECK (amount > 0 AND amount <= 1000000000000),
    ADD CONSTRAINT payment_attempts_currency_check CHECK (currency ~ '^[a-z]{3}$'),
    ADD CONSTRAINT payment_attempts_payment_method_check CHECK (length(payment_method) BETWEEN 1 AND 255);
CREATE TRIGGER payment_attempts_settle_order AFTER UPDATE OF status ON payment_attempts
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION payment_attempts_settle_order();

ALTER TABLE idempotency_keys
    ALTER key TYPE text,
    ALTER operation TYPE text,
    ALTER fingerprint TYPE bytea,
    ALTER state TYPE text,
    ADD CONSTRAINT idempotency_keys_key_check CHECK (length(key) BETWEEN 1 AND 255),
    ADD CONSTRAINT idempotency_keys_operation_check
        CHECK (operation IN ('create_order', 'cancel_order', 'create_payment', 'checkout')),
    ADD CONSTRAINT idempotency_keys_fingerprint_check CHECK (octet_length(fingerprint) = 32),
    ADD CONSTRAINT idempotency_keys_state_check CHECK (state IN ('in_flight', 'completed'));

ALTER TABLE orders
    ALTER amount TYPE bigint,
    ALTER currency TYPE text,
    ALTER status TYPE text,
    ALTER merchant_reference TYPE text,
    ALTER description TYPE text,
    ALTER metadata TYPE jsonb,
    ADD CONSTRAINT orders_amount_check CHECK (amount > 0 AND amount <= 1000000000000),
    ADD CONSTRAINT orders_currency_check CHECK (currency ~ '^[a-z]{3}$'),
    ADD CONSTRAINT orders_status_check
        CHECK (status IN ('awaiting_payment', 'processing', 'paid', 'canceled')),
    ADD CONSTRAINT orders_merchant_reference_check CHECK (length(merchant_reference) BETWEEN 1 AND 255),
    ADD CONSTRAINT orders_description_check CHECK (length(description) <= 1000),
    ADD CONSTRAINT orders_metadata_check CHECK (jsonb_typeof(metadata) = 'object');

DROP DOMAIN amount_minor, currency_code, order_status, attempt_status, open_attempt_status,
    transition_source, key_operation, key_state, provider_operation, provider_call_source,
    provider_outcome, webhook_outcome, short_text, description_text, json_object,
    sha256_digest, milliseconds;
