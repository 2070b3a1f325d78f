DROP VIEW events;
DROP VIEW webhook_events;
DROP VIEW refund_events;
DROP VIEW attempt_events;

CREATE OR REPLACE FUNCTION events_emit(merchant uuid, kind event_type, resource uuid, of_order uuid,
                                       snapshot jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    made uuid;
BEGIN
    INSERT INTO events (merchant_id, type, resource_id, order_id, snapshot, request)
    VALUES (merchant, kind, resource, of_order, snapshot,
            NULLIF(current_setting('payorch.request', true), '')::jsonb)
    RETURNING id INTO made;
    INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id)
    SELECT made, e.id, e.merchant_id FROM webhook_endpoints e
    WHERE e.merchant_id = merchant AND e.status = 'enabled' AND e.deleted_at IS NULL
      AND (kind = ANY (e.enabled_events) OR '*' = ANY (e.enabled_events));
END;
$$;

ALTER INDEX merchant_events_seq RENAME TO events_seq;
ALTER INDEX merchant_events_once RENAME TO events_once;
ALTER INDEX merchant_events_of_order RENAME TO events_of_order;
ALTER INDEX merchant_events_of_merchant RENAME TO events_of_merchant;
ALTER INDEX merchant_events_age RENAME TO events_age;
ALTER TABLE merchant_events RENAME CONSTRAINT merchant_events_merchant_fkey TO events_merchant_id_fkey;
ALTER TABLE merchant_events RENAME CONSTRAINT merchant_events_pkey TO events_pkey;
ALTER SEQUENCE merchant_events_seq_seq RENAME TO events_seq_seq;
ALTER TABLE merchant_events RENAME TO events;

ALTER INDEX provider_webhooks_unkept RENAME TO webhook_events_unkept;
ALTER INDEX provider_webhooks_conflicts RENAME TO webhook_events_conflicts;
ALTER INDEX provider_webhooks_attempt RENAME TO webhook_events_attempt;
ALTER INDEX provider_webhooks_age RENAME TO webhook_events_age;
ALTER TABLE provider_webhooks
    RENAME CONSTRAINT provider_webhooks_unknown_has_no_attempt TO webhook_events_unknown_has_no_attempt;
ALTER TABLE provider_webhooks
    RENAME CONSTRAINT provider_webhooks_attempt_known TO webhook_events_attempt_known;
ALTER TABLE provider_webhooks RENAME CONSTRAINT provider_webhooks_attempt_fk TO webhook_events_attempt_fk;
ALTER TABLE provider_webhooks
    RENAME CONSTRAINT provider_webhooks_provider_event_key TO webhook_events_provider_event_key;
ALTER TABLE provider_webhooks RENAME CONSTRAINT provider_webhooks_pkey TO webhook_events_pkey;
ALTER TABLE provider_webhooks RENAME TO webhook_events;

ALTER INDEX refund_transitions_refund RENAME TO refund_events_refund;
ALTER TABLE refund_transitions
    RENAME CONSTRAINT refund_transitions_refund_fkey TO refund_events_merchant_id_refund_id_fkey;
ALTER TABLE refund_transitions RENAME CONSTRAINT refund_transitions_pkey TO refund_events_pkey;
ALTER SEQUENCE refund_transitions_id_seq RENAME TO refund_events_id_seq;
ALTER TABLE refund_transitions RENAME TO refund_events;

ALTER INDEX attempt_transitions_attempt RENAME TO attempt_events_attempt;
ALTER TABLE attempt_transitions
    RENAME CONSTRAINT attempt_transitions_attempt_fkey TO attempt_events_merchant_id_attempt_id_fkey;
ALTER TABLE attempt_transitions RENAME CONSTRAINT attempt_transitions_pkey TO attempt_events_pkey;
ALTER SEQUENCE attempt_transitions_id_seq RENAME TO attempt_events_id_seq;
ALTER TABLE attempt_transitions RENAME TO attempt_events;
