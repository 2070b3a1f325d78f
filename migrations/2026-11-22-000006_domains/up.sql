-- Single-column rules as domains instead of table CHECK constraints (docs/DESIGN.md,
-- "Invariants"; BENCHMARKS.md, "Domains instead of CHECK constraints").
--
-- The rules are the same. What changes is their cost: PostgreSQL re-reads and re-plans a
-- table's CHECK constraints from their stored text in every statement that writes the table
-- (and in every statement a trigger runs), which was a fifth of the database's time in a
-- checkout. A domain's constraint is planned once per connection and cached. A domain checks
-- a value whenever it is stored, by INSERT, UPDATE, COPY or a trigger, so nothing that writes
-- a row gets past it. Rules that relate two columns stay table constraints.

CREATE DOMAIN amount_minor AS bigint
    CONSTRAINT amount_minor_range CHECK (VALUE > 0 AND VALUE <= 1000000000000);
CREATE DOMAIN currency_code AS text
    CONSTRAINT currency_code_lower_iso CHECK (VALUE ~ '^[a-z]{3}$');
CREATE DOMAIN order_status AS text
    CONSTRAINT order_status_known CHECK (VALUE IN ('awaiting_payment', 'processing', 'paid', 'canceled'));
CREATE DOMAIN attempt_status AS text
    CONSTRAINT attempt_status_known CHECK (VALUE IN ('created', 'pending', 'succeeded', 'failed'));
-- A timeline row's from_status: only an open attempt moves.
CREATE DOMAIN open_attempt_status AS text
    CONSTRAINT open_attempt_status_known CHECK (VALUE IN ('created', 'pending'));
CREATE DOMAIN transition_source AS text
    CONSTRAINT transition_source_known
    CHECK (VALUE IN ('api', 'provider_response', 'webhook', 'reconciler', 'support'));
CREATE DOMAIN key_operation AS text
    CONSTRAINT key_operation_known
    CHECK (VALUE IN ('create_order', 'cancel_order', 'create_payment', 'checkout'));
CREATE DOMAIN key_state AS text
    CONSTRAINT key_state_known CHECK (VALUE IN ('in_flight', 'completed'));
CREATE DOMAIN provider_operation AS text
    CONSTRAINT provider_operation_known CHECK (VALUE IN ('create', 'retrieve', 'search'));
-- Who called the provider: a provider answer or a webhook never is.
CREATE DOMAIN provider_call_source AS text
    CONSTRAINT provider_call_source_known CHECK (VALUE IN ('api', 'reconciler', 'support'));
CREATE DOMAIN provider_outcome AS text
    CONSTRAINT provider_outcome_known
    CHECK (VALUE IN ('succeeded', 'failed', 'pending', 'unknown', 'not_found'));
CREATE DOMAIN webhook_outcome AS text
    CONSTRAINT webhook_outcome_known
    CHECK (VALUE IN ('applied', 'stale', 'conflict', 'unknown_attempt', 'ignored'));
-- Keys, references, payment methods and provider event ids.
CREATE DOMAIN short_text AS text
    CONSTRAINT short_text_length CHECK (length(VALUE) BETWEEN 1 AND 255);
CREATE DOMAIN description_text AS text
    CONSTRAINT description_text_length CHECK (length(VALUE) <= 1000);
CREATE DOMAIN json_object AS jsonb
    CONSTRAINT json_object_is_object CHECK (jsonb_typeof(VALUE) = 'object');
CREATE DOMAIN sha256_digest AS bytea
    CONSTRAINT sha256_digest_length CHECK (octet_length(VALUE) = 32);
CREATE DOMAIN milliseconds AS integer
    CONSTRAINT milliseconds_not_negative CHECK (VALUE >= 0);

ALTER TABLE orders
    DROP CONSTRAINT orders_amount_check,
    DROP CONSTRAINT orders_currency_check,
    DROP CONSTRAINT orders_status_check,
    DROP CONSTRAINT orders_merchant_reference_check,
    DROP CONSTRAINT orders_description_check,
    DROP CONSTRAINT orders_metadata_check,
    ALTER amount TYPE amount_minor,
    ALTER currency TYPE currency_code,
    ALTER status TYPE order_status,
    ALTER merchant_reference TYPE short_text,
    ALTER description TYPE description_text,
    ALTER metadata TYPE json_object;

ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_key_check,
    DROP CONSTRAINT idempotency_keys_operation_check,
    DROP CONSTRAINT idempotency_keys_fingerprint_check,
    DROP CONSTRAINT idempotency_keys_state_check,
    ALTER key TYPE short_text,
    ALTER operation TYPE key_operation,
    ALTER fingerprint TYPE sha256_digest,
    ALTER state TYPE key_state;

-- The order-settling trigger names the status in its WHEN clause, so it is made again
-- around the change of type.
DROP TRIGGER payment_attempts_settle_order ON payment_attempts;
ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_status_check,
    DROP CONSTRAINT payment_attempts_amount_check,
    DROP CONSTRAINT payment_attempts_currency_check,
    DROP CONSTRAINT payment_attempts_payment_method_check,
    ALTER status TYPE attempt_status,
    ALTER amount TYPE amount_minor,
    ALTER currency TYPE currency_code,
    ALTER payment_method TYPE short_text;
CREATE TRIGGER payment_attempts_settle_order AFTER UPDATE OF status ON payment_attempts
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION payment_attempts_settle_order();

ALTER TABLE attempt_events
    DROP CONSTRAINT attempt_events_from_status_check,
    DROP CONSTRAINT attempt_events_to_status_check,
    DROP CONSTRAINT attempt_events_source_check,
    ALTER from_status TYPE open_attempt_status,
    ALTER to_status TYPE attempt_status,
    ALTER source TYPE transition_source;

ALTER TABLE provider_calls
    DROP CONSTRAINT provider_calls_operation_check,
    DROP CONSTRAINT provider_calls_source_check,
    DROP CONSTRAINT provider_calls_outcome_check,
    DROP CONSTRAINT provider_calls_latency_ms_check,
    ALTER operation TYPE provider_operation,
    ALTER source TYPE provider_call_source,
    ALTER outcome TYPE provider_outcome,
    ALTER latency_ms TYPE milliseconds;

ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_provider_event_id_check,
    DROP CONSTRAINT webhook_events_outcome_check,
    ALTER provider_event_id TYPE short_text,
    ALTER outcome TYPE webhook_outcome;
