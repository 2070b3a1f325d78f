-- Back to 000025: late approvals and their events gone (an endpoint subscribed to one of
-- their types must be changed first: the CHECK below refuses to come back while one is).
DELETE FROM merchant_events WHERE type LIKE 'late_approval.%';
DROP TABLE late_approvals;
DROP FUNCTION late_approvals_emit_event();
DROP FUNCTION late_approvals_of_a_failure();
DROP FUNCTION late_approvals_guard_transition();
DROP DOMAIN late_approval_source;
DROP DOMAIN late_approval_status;
DROP DOMAIN late_approval_kind;
ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_enabled_events_check,
    ADD CONSTRAINT webhook_endpoints_enabled_events_check CHECK (cardinality(enabled_events) > 0
        AND enabled_events <@ ARRAY['*', 'payment.pending', 'payment.requires_action',
            'payment.authorized', 'payment.succeeded', 'payment.failed', 'payment.canceled',
            'refund.succeeded', 'refund.failed', 'order.paid', 'order.canceled', 'order.refunded']);
ALTER DOMAIN event_type DROP CONSTRAINT event_type_known;
ALTER DOMAIN event_type ADD CONSTRAINT event_type_known CHECK (VALUE IN (
    'payment.pending', 'payment.requires_action', 'payment.authorized', 'payment.succeeded',
    'payment.failed', 'payment.canceled',
    'refund.succeeded', 'refund.failed',
    'order.paid', 'order.canceled', 'order.refunded'));
