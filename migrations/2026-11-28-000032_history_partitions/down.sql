-- Back to 000031-2: each history table one table again. The legacy partition is detached
-- and takes its old name back; the rows of the months are copied into it (a down migration
-- may take its time), in the order their foreign keys want.
SET LOCAL lock_timeout = '5s';

CREATE OR REPLACE VIEW attempt_events AS SELECT * FROM attempt_transitions_legacy;
CREATE OR REPLACE VIEW refund_events AS SELECT * FROM refund_transitions_legacy;
CREATE OR REPLACE VIEW webhook_events AS SELECT * FROM provider_webhooks_legacy;
CREATE OR REPLACE VIEW events AS SELECT * FROM merchant_events_legacy;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['merchant_events', 'event_deliveries', 'delivery_attempts',
                             'provider_webhooks', 'attempt_transitions', 'refund_transitions'] LOOP
        EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', t, t || '_legacy');
        EXECUTE format('INSERT INTO %I OVERRIDING SYSTEM VALUE SELECT * FROM %I', t || '_legacy', t);
    END LOOP;
END
$$;

DROP TABLE delivery_attempts, event_deliveries, merchant_events, provider_webhooks,
    attempt_transitions, refund_transitions CASCADE;
DROP FUNCTION merchant_events_once();

ALTER TABLE merchant_events_legacy RENAME TO merchant_events;
ALTER INDEX merchant_events_legacy_pkey RENAME TO merchant_events_pkey;
ALTER INDEX merchant_events_legacy_age RENAME TO merchant_events_age;
ALTER INDEX merchant_events_legacy_of_merchant RENAME TO merchant_events_of_merchant;
ALTER INDEX merchant_events_legacy_of_order RENAME TO merchant_events_of_order;
ALTER INDEX merchant_events_legacy_once RENAME TO merchant_events_once;
ALTER INDEX merchant_events_legacy_seq RENAME TO merchant_events_seq;
ALTER SEQUENCE merchant_events_legacy_seq_seq RENAME TO merchant_events_seq_seq;

ALTER TABLE event_deliveries_legacy RENAME TO event_deliveries;
ALTER INDEX event_deliveries_legacy_pkey RENAME TO event_deliveries_pkey;
ALTER INDEX event_deliveries_legacy_due RENAME TO event_deliveries_due;
ALTER INDEX event_deliveries_legacy_of_endpoint RENAME TO event_deliveries_of_endpoint;

ALTER TABLE delivery_attempts_legacy RENAME TO delivery_attempts;
ALTER INDEX delivery_attempts_legacy_pkey RENAME TO delivery_attempts_pkey;
ALTER INDEX delivery_attempts_legacy_of_delivery RENAME TO delivery_attempts_of_delivery;
ALTER SEQUENCE delivery_attempts_legacy_id_seq RENAME TO delivery_attempts_id_seq;

ALTER TABLE provider_webhooks_legacy RENAME TO provider_webhooks;
ALTER TABLE provider_webhooks ALTER COLUMN provider_created_at DROP NOT NULL;
ALTER INDEX provider_webhooks_legacy_pkey RENAME TO provider_webhooks_pkey;
ALTER INDEX provider_webhooks_legacy_provider_event_key RENAME TO provider_webhooks_provider_event_key;
ALTER INDEX provider_webhooks_legacy_event_key RENAME TO provider_webhooks_event_key;
ALTER INDEX provider_webhooks_legacy_age RENAME TO provider_webhooks_age;
ALTER INDEX provider_webhooks_legacy_attempt RENAME TO provider_webhooks_attempt;
ALTER INDEX provider_webhooks_legacy_conflicts RENAME TO provider_webhooks_conflicts;
ALTER INDEX provider_webhooks_legacy_unkept RENAME TO provider_webhooks_unkept;

ALTER TABLE attempt_transitions_legacy RENAME TO attempt_transitions;
ALTER INDEX attempt_transitions_legacy_pkey RENAME TO attempt_transitions_pkey;
ALTER INDEX attempt_transitions_legacy_attempt RENAME TO attempt_transitions_attempt;
ALTER SEQUENCE attempt_transitions_legacy_id_seq RENAME TO attempt_transitions_id_seq;

ALTER TABLE refund_transitions_legacy RENAME TO refund_transitions;
ALTER INDEX refund_transitions_legacy_pkey RENAME TO refund_transitions_pkey;
ALTER INDEX refund_transitions_legacy_refund RENAME TO refund_transitions_refund;
ALTER SEQUENCE refund_transitions_legacy_id_seq RENAME TO refund_transitions_id_seq;

-- Each identity continues past the rows the months held.
SELECT setval('merchant_events_seq_seq', greatest(1, (SELECT max(seq) FROM merchant_events)));
SELECT setval('delivery_attempts_id_seq', greatest(1, (SELECT max(id) FROM delivery_attempts)));
SELECT setval('attempt_transitions_id_seq', greatest(1, (SELECT max(id) FROM attempt_transitions)));
SELECT setval('refund_transitions_id_seq', greatest(1, (SELECT max(id) FROM refund_transitions)));
