-- Four tables were called "…events"; each name now says whose events it holds
-- (docs/DESIGN.md, "Tables"):
--   attempt_events -> attempt_transitions  an attempt's moves from status to status
--   refund_events  -> refund_transitions   a refund's moves
--   webhook_events -> provider_webhooks    the providers' webhooks as received
--   events         -> merchant_events      the events payorch sends to merchants (the outbox)
-- Their sequences, indexes and named constraints follow, so that an error or a plan names the
-- table it is about. The API does not change.
--
-- A rolling deploy runs the replicas of the release before this one against the renamed
-- tables until they are replaced, and their statements name the old tables: each old name
-- stays as a view of the new table for that window. A view of one whole table is
-- automatically updatable, so their INSERT … ON CONFLICT, UPDATE, DELETE and FOR UPDATE SKIP
-- LOCKED still work, the table's defaults, constraints and triggers apply, and the runtime
-- role may use them (migration 2026-11-27-000016's default privileges). The first migration
-- of the release after the next drops them. Until then a view's columns are the table's as
-- they are now (`*` is expanded when the view is made): no migration may drop a column of
-- these tables, nor add one the previous release would not fill (NOT NULL without a default).

ALTER TABLE attempt_events RENAME TO attempt_transitions;
ALTER SEQUENCE attempt_events_id_seq RENAME TO attempt_transitions_id_seq;
ALTER TABLE attempt_transitions RENAME CONSTRAINT attempt_events_pkey TO attempt_transitions_pkey;
ALTER TABLE attempt_transitions
    RENAME CONSTRAINT attempt_events_merchant_id_attempt_id_fkey TO attempt_transitions_attempt_fkey;
ALTER INDEX attempt_events_attempt RENAME TO attempt_transitions_attempt;

ALTER TABLE refund_events RENAME TO refund_transitions;
ALTER SEQUENCE refund_events_id_seq RENAME TO refund_transitions_id_seq;
ALTER TABLE refund_transitions RENAME CONSTRAINT refund_events_pkey TO refund_transitions_pkey;
ALTER TABLE refund_transitions
    RENAME CONSTRAINT refund_events_merchant_id_refund_id_fkey TO refund_transitions_refund_fkey;
ALTER INDEX refund_events_refund RENAME TO refund_transitions_refund;

ALTER TABLE webhook_events RENAME TO provider_webhooks;
ALTER TABLE provider_webhooks RENAME CONSTRAINT webhook_events_pkey TO provider_webhooks_pkey;
ALTER TABLE provider_webhooks
    RENAME CONSTRAINT webhook_events_provider_event_key TO provider_webhooks_provider_event_key;
ALTER TABLE provider_webhooks RENAME CONSTRAINT webhook_events_attempt_fk TO provider_webhooks_attempt_fk;
ALTER TABLE provider_webhooks
    RENAME CONSTRAINT webhook_events_attempt_known TO provider_webhooks_attempt_known;
ALTER TABLE provider_webhooks
    RENAME CONSTRAINT webhook_events_unknown_has_no_attempt TO provider_webhooks_unknown_has_no_attempt;
ALTER INDEX webhook_events_age RENAME TO provider_webhooks_age;
ALTER INDEX webhook_events_attempt RENAME TO provider_webhooks_attempt;
ALTER INDEX webhook_events_conflicts RENAME TO provider_webhooks_conflicts;
ALTER INDEX webhook_events_unkept RENAME TO provider_webhooks_unkept;

ALTER TABLE events RENAME TO merchant_events;
ALTER SEQUENCE events_seq_seq RENAME TO merchant_events_seq_seq;
ALTER TABLE merchant_events RENAME CONSTRAINT events_pkey TO merchant_events_pkey;
ALTER TABLE merchant_events RENAME CONSTRAINT events_merchant_id_fkey TO merchant_events_merchant_fkey;
ALTER INDEX events_age RENAME TO merchant_events_age;
ALTER INDEX events_of_merchant RENAME TO merchant_events_of_merchant;
ALTER INDEX events_of_order RENAME TO merchant_events_of_order;
ALTER INDEX events_once RENAME TO merchant_events_once;
ALTER INDEX events_seq RENAME TO merchant_events_seq;

-- The outbox's one writer (the emit triggers call it) names the table it writes by its new
-- name; its signature and behaviour are unchanged.
CREATE OR REPLACE FUNCTION events_emit(merchant uuid, kind event_type, resource uuid, of_order uuid,
                                       snapshot jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    made uuid;
BEGIN
    INSERT INTO merchant_events (merchant_id, type, resource_id, order_id, snapshot, request)
    VALUES (merchant, kind, resource, of_order, snapshot,
            NULLIF(current_setting('payorch.request', true), '')::jsonb)
    RETURNING id INTO made;
    INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id)
    SELECT made, e.id, e.merchant_id FROM webhook_endpoints e
    WHERE e.merchant_id = merchant AND e.status = 'enabled' AND e.deleted_at IS NULL
      AND (kind = ANY (e.enabled_events) OR '*' = ANY (e.enabled_events));
END;
$$;

-- The old names, for the previous release's replicas during a rolling deploy (above).
CREATE VIEW attempt_events AS SELECT * FROM attempt_transitions;
CREATE VIEW refund_events AS SELECT * FROM refund_transitions;
CREATE VIEW webhook_events AS SELECT * FROM provider_webhooks;
CREATE VIEW events AS SELECT * FROM merchant_events;
