-- The schema as the migrations leave it, generated from the catalog by
-- tests/api/schema_file.rs: do not edit. After a migration, regenerate with
-- PAYORCH_BLESS_SQL=1 cargo test --test api schema_file

-- Domains: the words and ranges a column may hold
-- -----------------------------------------------

CREATE DOMAIN amount_minor AS bigint
    CONSTRAINT amount_minor_range CHECK (((VALUE > 0) AND (VALUE <= '1000000000000'::bigint)));

CREATE DOMAIN attempt_status AS text
    CONSTRAINT attempt_status_known CHECK ((VALUE = ANY (ARRAY['created'::text, 'pending'::text, 'authorized'::text, 'succeeded'::text, 'failed'::text, 'canceled'::text])));

CREATE DOMAIN capture_method AS text
    CONSTRAINT capture_method_known CHECK ((VALUE = ANY (ARRAY['automatic'::text, 'manual'::text])));

CREATE DOMAIN currency_code AS text
    CONSTRAINT currency_code_lower_iso CHECK ((VALUE ~ '^[a-z]{3}$'::text));

CREATE DOMAIN delivery_count AS integer
    CONSTRAINT delivery_count_positive CHECK ((VALUE >= 1));

CREATE DOMAIN delivery_state AS text
    CONSTRAINT delivery_state_known CHECK ((VALUE = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text, 'canceled'::text])));

CREATE DOMAIN description_text AS text
    CONSTRAINT description_text_length CHECK ((length(VALUE) <= 1000));

CREATE DOMAIN dispute_action_kind AS text
    CONSTRAINT dispute_action_kind_known CHECK ((VALUE = ANY (ARRAY['evidence'::text, 'accept'::text])));

CREATE DOMAIN dispute_action_status AS text
    CONSTRAINT dispute_action_status_known CHECK ((VALUE = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text])));

CREATE DOMAIN dispute_reason AS text
    CONSTRAINT dispute_reason_known CHECK ((VALUE = ANY (ARRAY['bank_cannot_process'::text, 'credit_not_processed'::text, 'customer_initiated'::text, 'debit_not_authorized'::text, 'duplicate'::text, 'fraudulent'::text, 'general'::text, 'incorrect_account_details'::text, 'insufficient_funds'::text, 'product_not_received'::text, 'product_unacceptable'::text, 'subscription_canceled'::text, 'unrecognized'::text])));

CREATE DOMAIN dispute_stage AS text
    CONSTRAINT dispute_stage_known CHECK ((VALUE = ANY (ARRAY['inquiry'::text, 'chargeback'::text, 'second_chargeback'::text, 'pre_arbitration'::text, 'arbitration'::text])));

CREATE DOMAIN dispute_status AS text
    CONSTRAINT dispute_status_known CHECK ((VALUE = ANY (ARRAY['warning_needs_response'::text, 'warning_under_review'::text, 'warning_closed'::text, 'needs_response'::text, 'under_review'::text, 'won'::text, 'lost'::text])));

CREATE DOMAIN endpoint_status AS text
    CONSTRAINT endpoint_status_known CHECK ((VALUE = ANY (ARRAY['enabled'::text, 'disabled'::text])));

CREATE DOMAIN event_type AS text
    CONSTRAINT event_type_known CHECK ((VALUE = ANY (ARRAY['payment.pending'::text, 'payment.requires_action'::text, 'payment.authorized'::text, 'payment.succeeded'::text, 'payment.failed'::text, 'payment.canceled'::text, 'refund.succeeded'::text, 'refund.failed'::text, 'order.paid'::text, 'order.canceled'::text, 'order.refunded'::text, 'late_approval.detected'::text, 'late_approval.voided'::text, 'late_approval.refunded'::text, 'late_approval.undo_failed'::text, 'dispute.created'::text, 'dispute.updated'::text, 'dispute.closed'::text]))) NOT VALID;

CREATE DOMAIN held_amount AS bigint
    CONSTRAINT held_amount_not_negative CHECK ((VALUE >= 0));

CREATE DOMAIN hold_operation_kind AS text
    CONSTRAINT hold_operation_kind_known CHECK ((VALUE = ANY (ARRAY['capture'::text, 'void'::text])));

CREATE DOMAIN json_object AS jsonb
    CONSTRAINT json_object_is_object CHECK ((jsonb_typeof(VALUE) = 'object'::text));

CREATE DOMAIN key_operation AS text
    CONSTRAINT key_operation_known CHECK ((VALUE = ANY (ARRAY['create_order'::text, 'cancel_order'::text, 'create_payment'::text, 'checkout'::text, 'create_refund'::text, 'create_webhook_endpoint'::text, 'rotate_webhook_secret'::text, 'capture_payment'::text, 'cancel_payment'::text, 'update_order'::text, 'submit_dispute_evidence'::text, 'accept_dispute'::text]))) NOT VALID;

CREATE DOMAIN key_state AS text
    CONSTRAINT key_state_known CHECK ((VALUE = ANY (ARRAY['in_flight'::text, 'completed'::text, 'expired'::text])));

CREATE DOMAIN late_approval_kind AS text
    CONSTRAINT late_approval_kind_known CHECK ((VALUE = ANY (ARRAY['authorized'::text, 'succeeded'::text])));

CREATE DOMAIN late_approval_source AS text
    CONSTRAINT late_approval_source_known CHECK ((VALUE = ANY (ARRAY['webhook'::text])));

CREATE DOMAIN late_approval_status AS text
    CONSTRAINT late_approval_status_known CHECK ((VALUE = ANY (ARRAY['undoing'::text, 'voided'::text, 'refunded'::text, 'undo_failed'::text])));

CREATE DOMAIN milliseconds AS integer
    CONSTRAINT milliseconds_not_negative CHECK ((VALUE >= 0));

CREATE DOMAIN open_attempt_status AS text
    CONSTRAINT open_attempt_status_known CHECK ((VALUE = ANY (ARRAY['created'::text, 'pending'::text, 'authorized'::text])));

CREATE DOMAIN open_refund_status AS text
    CONSTRAINT open_refund_status_known CHECK ((VALUE = ANY (ARRAY['created'::text, 'pending'::text])));

CREATE DOMAIN order_status AS text
    CONSTRAINT order_status_known CHECK ((VALUE = ANY (ARRAY['awaiting_payment'::text, 'processing'::text, 'authorized'::text, 'paid'::text, 'canceled'::text, 'partially_refunded'::text, 'refunded'::text])));

CREATE DOMAIN provider_call_source AS text
    CONSTRAINT provider_call_source_known CHECK ((VALUE = ANY (ARRAY['api'::text, 'reconciler'::text, 'support'::text])));

CREATE DOMAIN provider_name AS text
    CONSTRAINT provider_name_known CHECK ((VALUE ~ '^[a-z0-9_-]{1,32}$'::text));

CREATE DOMAIN provider_operation AS text
    CONSTRAINT provider_operation_known CHECK ((VALUE = ANY (ARRAY['create'::text, 'retrieve'::text, 'search'::text, 'list'::text, 'create_refund'::text, 'retrieve_refund'::text, 'capture'::text, 'cancel'::text, 'complete_action'::text])));

CREATE DOMAIN provider_outcome AS text
    CONSTRAINT provider_outcome_known CHECK ((VALUE = ANY (ARRAY['succeeded'::text, 'failed'::text, 'pending'::text, 'unknown'::text, 'not_found'::text, 'unavailable'::text, 'authorized'::text, 'requires_action'::text, 'canceled'::text])));

CREATE DOMAIN refund_status AS text
    CONSTRAINT refund_status_known CHECK ((VALUE = ANY (ARRAY['created'::text, 'pending'::text, 'succeeded'::text, 'failed'::text])));

CREATE DOMAIN settlement_entry_kind AS text
    CONSTRAINT settlement_entry_kind_known CHECK ((VALUE = ANY (ARRAY['charge'::text, 'refund'::text, 'dispute_withdrawal'::text, 'dispute_reinstatement'::text, 'other'::text])));

CREATE DOMAIN settlement_finding_kind AS text
    CONSTRAINT settlement_finding_kind_known CHECK ((VALUE = ANY (ARRAY['unknown_charge'::text, 'captured_twice'::text, 'amount_mismatch'::text, 'charge_not_booked'::text, 'refund_not_booked'::text, 'unknown_refund'::text, 'unexplained_dispute'::text])));

CREATE DOMAIN sha256_digest AS bytea
    CONSTRAINT sha256_digest_length CHECK ((octet_length(VALUE) = 32));

CREATE DOMAIN short_text AS text
    CONSTRAINT short_text_length CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 255)));

CREATE DOMAIN transition_source AS text
    CONSTRAINT transition_source_known CHECK ((VALUE = ANY (ARRAY['api'::text, 'provider_response'::text, 'webhook'::text, 'reconciler'::text, 'support'::text])));

CREATE DOMAIN webhook_outcome AS text
    CONSTRAINT webhook_outcome_known CHECK ((VALUE = ANY (ARRAY['applied'::text, 'stale'::text, 'conflict'::text, 'unknown_attempt'::text, 'ignored'::text])));

-- Tables, each with its indexes and triggers
-- ------------------------------------------

CREATE TABLE api_keys (
    id uuid NOT NULL,
    secret_sha256 bytea NOT NULL,
    role text NOT NULL,
    merchant_id uuid,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    support_role text,
    expires_at timestamp with time zone,
    last_used_at timestamp with time zone,
    rotated_from uuid,
    life_changed_at timestamp with time zone,
    life_changed_xid xid8,
    CONSTRAINT api_keys_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT api_keys_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT api_keys_pkey PRIMARY KEY (id),
    CONSTRAINT api_keys_role_check CHECK ((role = ANY (ARRAY['merchant'::text, 'support'::text]))),
    CONSTRAINT api_keys_role_merchant CHECK (((role = 'merchant'::text) = (merchant_id IS NOT NULL))),
    CONSTRAINT api_keys_rotated_from_fkey FOREIGN KEY (rotated_from) REFERENCES api_keys(id),
    CONSTRAINT api_keys_secret_sha256_check CHECK ((octet_length(secret_sha256) = 32)),
    CONSTRAINT api_keys_secret_sha256_key UNIQUE (secret_sha256),
    CONSTRAINT api_keys_support_role CHECK (((role = 'support'::text) = (support_role IS NOT NULL))),
    CONSTRAINT api_keys_support_role_check CHECK ((support_role = ANY (ARRAY['read'::text, 'operate'::text])))
);

CREATE INDEX api_keys_life_changed_xid ON public.api_keys USING btree (life_changed_xid) WHERE (life_changed_xid IS NOT NULL);

CREATE INDEX api_keys_merchant_id ON public.api_keys USING btree (merchant_id) WHERE (merchant_id IS NOT NULL);

CREATE TRIGGER api_keys_life BEFORE UPDATE ON api_keys FOR EACH ROW EXECUTE FUNCTION api_keys_life();

CREATE TABLE attempt_transitions (
    merchant_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    attempt_id uuid NOT NULL,
    from_status open_attempt_status,
    to_status attempt_status NOT NULL,
    source transition_source NOT NULL,
    detail text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT attempt_transitions_attempt_fkey FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id)
) PARTITION BY RANGE (created_at);

CREATE INDEX attempt_transitions_attempt ON ONLY public.attempt_transitions USING btree (merchant_id, attempt_id, id);

CREATE UNIQUE INDEX attempt_transitions_key ON ONLY public.attempt_transitions USING btree (merchant_id, id, created_at);

CREATE TABLE attempt_transitions_legacy (
    merchant_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    attempt_id uuid NOT NULL,
    from_status open_attempt_status,
    to_status attempt_status NOT NULL,
    source transition_source NOT NULL,
    detail text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT attempt_transitions_attempt_fkey FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT attempt_transitions_legacy_pkey PRIMARY KEY (merchant_id, id)
)
PARTITION OF attempt_transitions;

CREATE INDEX attempt_transitions_legacy_attempt ON public.attempt_transitions_legacy USING btree (merchant_id, attempt_id, id);

CREATE TABLE delivery_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    event_id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    attempted_at timestamp with time zone DEFAULT now() NOT NULL,
    http_status smallint,
    latency_ms milliseconds NOT NULL,
    error text
) PARTITION BY RANGE (event_id);

CREATE INDEX delivery_attempts_of_delivery ON ONLY public.delivery_attempts USING btree (event_id, endpoint_id);

CREATE UNIQUE INDEX delivery_attempts_key ON ONLY public.delivery_attempts USING btree (event_id, id);

CREATE TABLE delivery_attempts_legacy (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    event_id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    attempted_at timestamp with time zone DEFAULT now() NOT NULL,
    http_status smallint,
    latency_ms milliseconds NOT NULL,
    error text,
    CONSTRAINT delivery_attempts_event_id_endpoint_id_fkey FOREIGN KEY (event_id, endpoint_id) REFERENCES event_deliveries_legacy(event_id, endpoint_id) ON DELETE CASCADE,
    CONSTRAINT delivery_attempts_legacy_pkey PRIMARY KEY (id)
)
PARTITION OF delivery_attempts;

CREATE INDEX delivery_attempts_legacy_of_delivery ON public.delivery_attempts_legacy USING btree (event_id, endpoint_id);

CREATE TABLE dispute_actions (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    dispute_id uuid NOT NULL,
    kind dispute_action_kind NOT NULL,
    status dispute_action_status DEFAULT 'pending'::text NOT NULL,
    provider provider_name NOT NULL,
    provider_dispute_id text NOT NULL,
    provider_idempotency_key text NOT NULL,
    evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    failure_code text,
    failure_message text,
    sends integer DEFAULT 0 NOT NULL,
    idempotency_key text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dispute_actions_failure_told CHECK ((((status)::text = 'failed'::text) = (failure_code IS NOT NULL))),
    CONSTRAINT dispute_actions_merchant_id_dispute_id_fkey FOREIGN KEY (merchant_id, dispute_id) REFERENCES disputes(merchant_id, id),
    CONSTRAINT dispute_actions_pkey PRIMARY KEY (merchant_id, id),
    CONSTRAINT dispute_actions_sends_check CHECK ((sends >= 0))
);

CREATE INDEX dispute_actions_dispute ON public.dispute_actions USING btree (merchant_id, dispute_id, id);

CREATE UNIQUE INDEX dispute_actions_one_pending ON public.dispute_actions USING btree (merchant_id, dispute_id) WHERE ((status)::text = 'pending'::text);

CREATE UNIQUE INDEX dispute_actions_provider_key ON public.dispute_actions USING btree (provider, provider_idempotency_key);

CREATE TRIGGER dispute_actions_guard_transition BEFORE UPDATE ON dispute_actions FOR EACH ROW EXECUTE FUNCTION dispute_actions_guard_transition();

CREATE TRIGGER dispute_actions_of_an_open_dispute BEFORE INSERT ON dispute_actions FOR EACH ROW EXECUTE FUNCTION dispute_actions_of_an_open_dispute();

CREATE TABLE dispute_transitions (
    merchant_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    dispute_id uuid NOT NULL,
    from_status dispute_status,
    to_status dispute_status NOT NULL,
    stage dispute_stage NOT NULL,
    source transition_source NOT NULL,
    detail text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dispute_transitions_merchant_id_dispute_id_fkey FOREIGN KEY (merchant_id, dispute_id) REFERENCES disputes(merchant_id, id),
    CONSTRAINT dispute_transitions_pkey PRIMARY KEY (merchant_id, id)
);

CREATE INDEX dispute_transitions_dispute ON public.dispute_transitions USING btree (merchant_id, dispute_id, id);

CREATE TABLE disputes (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    attempt_id uuid NOT NULL,
    order_id uuid NOT NULL,
    provider provider_name NOT NULL,
    provider_dispute_id text NOT NULL,
    provider_payment_id text NOT NULL,
    status dispute_status NOT NULL,
    stage dispute_stage NOT NULL,
    amount amount_minor NOT NULL,
    currency currency_code NOT NULL,
    reason dispute_reason NOT NULL,
    provider_reason text NOT NULL,
    evidence_due_by timestamp with time zone,
    refunded_before held_amount DEFAULT 0 NOT NULL,
    overlap held_amount DEFAULT 0 NOT NULL,
    provider_updated_at timestamp with time zone NOT NULL,
    evidence_submitted_at timestamp with time zone,
    opened_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    closed_at timestamp with time zone,
    CONSTRAINT disputes_closed_is_finished CHECK ((((status)::text = ANY (ARRAY['won'::text, 'lost'::text, 'warning_closed'::text])) = (closed_at IS NOT NULL))),
    CONSTRAINT disputes_merchant_id_attempt_id_fkey FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT disputes_merchant_id_order_id_fkey FOREIGN KEY (merchant_id, order_id) REFERENCES orders(merchant_id, id),
    CONSTRAINT disputes_pkey PRIMARY KEY (merchant_id, id)
);

CREATE INDEX disputes_attempt ON public.disputes USING btree (merchant_id, attempt_id);

CREATE INDEX disputes_id ON public.disputes USING btree (id);

CREATE INDEX disputes_of_merchant ON public.disputes USING btree (merchant_id, id);

CREATE UNIQUE INDEX disputes_provider_dispute ON public.disputes USING btree (provider, provider_dispute_id);

CREATE TRIGGER dispute_actions_end_with_the_dispute AFTER UPDATE OF status ON disputes FOR EACH ROW WHEN ((old.status::text = ANY (ARRAY['needs_response'::text, 'warning_needs_response'::text])) AND (new.status::text <> ALL (ARRAY['needs_response'::text, 'warning_needs_response'::text]))) EXECUTE FUNCTION dispute_actions_end_with_the_dispute();

CREATE TRIGGER disputes_emit_event AFTER UPDATE OF status, stage ON disputes FOR EACH ROW WHEN (old.status::text IS DISTINCT FROM new.status::text OR old.stage::text IS DISTINCT FROM new.stage::text) EXECUTE FUNCTION disputes_emit_event();

CREATE TRIGGER disputes_emit_event_made AFTER INSERT ON disputes FOR EACH ROW EXECUTE FUNCTION disputes_emit_event();

CREATE TRIGGER disputes_guard_transition BEFORE UPDATE ON disputes FOR EACH ROW EXECUTE FUNCTION disputes_guard_transition();

CREATE TRIGGER disputes_hold_amount AFTER INSERT OR UPDATE ON disputes FOR EACH ROW EXECUTE FUNCTION disputes_hold_amount();

CREATE TRIGGER disputes_of_a_payment BEFORE INSERT ON disputes FOR EACH ROW EXECUTE FUNCTION disputes_of_a_payment();

CREATE TRIGGER disputes_overlap_flag BEFORE INSERT OR UPDATE ON disputes FOR EACH ROW EXECUTE FUNCTION disputes_overlap_flag();

CREATE TABLE event_deliveries (
    event_id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    merchant_id uuid NOT NULL,
    state delivery_state DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT event_deliveries_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT event_deliveries_merchant_id_endpoint_id_fkey FOREIGN KEY (merchant_id, endpoint_id) REFERENCES webhook_endpoints(merchant_id, id),
    CONSTRAINT event_deliveries_pkey PRIMARY KEY (event_id, endpoint_id)
) PARTITION BY RANGE (event_id);

CREATE INDEX event_deliveries_due ON ONLY public.event_deliveries USING btree (next_attempt_at) WHERE ((state)::text = 'pending'::text);

CREATE INDEX event_deliveries_of_endpoint ON ONLY public.event_deliveries USING btree (merchant_id, endpoint_id) WHERE ((state)::text = 'pending'::text);

CREATE TABLE event_deliveries_legacy (
    event_id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    merchant_id uuid NOT NULL,
    state delivery_state DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT event_deliveries_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT event_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES merchant_events_legacy(id) ON DELETE CASCADE,
    CONSTRAINT event_deliveries_legacy_pkey PRIMARY KEY (event_id, endpoint_id),
    CONSTRAINT event_deliveries_merchant_id_endpoint_id_fkey FOREIGN KEY (merchant_id, endpoint_id) REFERENCES webhook_endpoints(merchant_id, id)
)
PARTITION OF event_deliveries;

CREATE INDEX event_deliveries_legacy_due ON public.event_deliveries_legacy USING btree (next_attempt_at) WHERE ((state)::text = 'pending'::text);

CREATE INDEX event_deliveries_legacy_of_endpoint ON public.event_deliveries_legacy USING btree (merchant_id, endpoint_id) WHERE ((state)::text = 'pending'::text);

CREATE TABLE history_tables (
    name text NOT NULL,
    key_kind text NOT NULL,
    legacy_until timestamp with time zone NOT NULL,
    CONSTRAINT history_tables_pkey PRIMARY KEY (name)
);

CREATE TABLE hold_operations (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    payment_id uuid NOT NULL,
    order_id uuid NOT NULL,
    kind hold_operation_kind NOT NULL,
    status refund_status NOT NULL,
    amount amount_minor,
    currency currency_code NOT NULL,
    provider provider_name NOT NULL,
    provider_idempotency_key text NOT NULL,
    failure_code text,
    failure_message text,
    source transition_source NOT NULL,
    reason short_text,
    idempotency_key text,
    next_check_at timestamp with time zone,
    checks integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT hold_operations_amount_for_capture CHECK ((((kind)::text = 'capture'::text) = (amount IS NOT NULL))),
    CONSTRAINT hold_operations_failed_has_code CHECK ((((status)::text = 'failed'::text) = (failure_code IS NOT NULL))),
    CONSTRAINT hold_operations_final_is_finished CHECK ((((status)::text = ANY (ARRAY['succeeded'::text, 'failed'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT hold_operations_merchant_id_order_id_fkey FOREIGN KEY (merchant_id, order_id) REFERENCES orders(merchant_id, id),
    CONSTRAINT hold_operations_merchant_id_payment_id_fkey FOREIGN KEY (merchant_id, payment_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT hold_operations_open_is_checked CHECK ((((status)::text = ANY (ARRAY['created'::text, 'pending'::text])) = (next_check_at IS NOT NULL))),
    CONSTRAINT hold_operations_pkey PRIMARY KEY (merchant_id, id)
);

CREATE INDEX hold_operations_due ON public.hold_operations USING btree (next_check_at) WHERE ((status)::text = ANY (ARRAY['created'::text, 'pending'::text]));

CREATE INDEX hold_operations_id ON public.hold_operations USING btree (id);

CREATE INDEX hold_operations_payment ON public.hold_operations USING btree (merchant_id, payment_id, created_at);

CREATE UNIQUE INDEX hold_operations_one_per_hold ON public.hold_operations USING btree (merchant_id, payment_id) WHERE ((status)::text <> 'failed'::text);

CREATE UNIQUE INDEX hold_operations_provider_key ON public.hold_operations USING btree (provider, provider_idempotency_key);

CREATE TRIGGER hold_operations_check_hold BEFORE INSERT ON hold_operations FOR EACH ROW EXECUTE FUNCTION hold_operations_check_hold();

CREATE TRIGGER hold_operations_guard_transition BEFORE UPDATE ON hold_operations FOR EACH ROW EXECUTE FUNCTION hold_operations_guard_transition();

CREATE TABLE idempotency_keys (
    merchant_id uuid NOT NULL,
    key short_text NOT NULL,
    operation key_operation NOT NULL,
    fingerprint sha256_digest NOT NULL,
    state key_state NOT NULL,
    locked_until timestamp with time zone,
    recovery_point text DEFAULT 'started'::text NOT NULL,
    resource_type text,
    resource_id uuid,
    response_status smallint,
    response_body jsonb,
    unresolved boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT idempotency_keys_completed_has_response CHECK ((((state)::text = 'completed'::text) = (response_status IS NOT NULL))),
    CONSTRAINT idempotency_keys_in_flight_has_lease CHECK ((((state)::text <> 'in_flight'::text) OR (locked_until IS NOT NULL))),
    CONSTRAINT idempotency_keys_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (merchant_id, key)
);

CREATE INDEX idempotency_keys_expiry ON public.idempotency_keys USING btree (expires_at) WHERE (((state)::text <> 'in_flight'::text) AND (NOT unresolved));

CREATE TRIGGER idempotency_keys_guard_delete BEFORE DELETE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION idempotency_keys_guard_life();

CREATE TRIGGER idempotency_keys_guard_retire BEFORE UPDATE ON idempotency_keys FOR EACH ROW WHEN (old.state::text = 'expired'::text OR new.state::text = 'expired'::text) EXECUTE FUNCTION idempotency_keys_guard_life();

CREATE TABLE key_quota_counts (
    merchant_id uuid NOT NULL,
    replica_id uuid NOT NULL,
    minute bigint NOT NULL,
    opened bigint NOT NULL,
    CONSTRAINT key_quota_counts_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT key_quota_counts_opened_check CHECK ((opened >= 0)),
    CONSTRAINT key_quota_counts_pkey PRIMARY KEY (merchant_id, replica_id, minute)
);

CREATE TABLE late_approvals (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    attempt_id uuid NOT NULL,
    order_id uuid NOT NULL,
    provider provider_name NOT NULL,
    provider_payment_id text NOT NULL,
    amount amount_minor NOT NULL,
    currency currency_code NOT NULL,
    approved_as late_approval_kind NOT NULL,
    source late_approval_source NOT NULL,
    status late_approval_status DEFAULT 'undoing'::text NOT NULL,
    detail text,
    provider_undo_id text,
    next_check_at timestamp with time zone,
    checks integer DEFAULT 0 NOT NULL,
    detected_at timestamp with time zone DEFAULT now() NOT NULL,
    undone_at timestamp with time zone,
    CONSTRAINT late_approvals_final_is_finished CHECK ((((status)::text = 'undoing'::text) = (undone_at IS NULL))),
    CONSTRAINT late_approvals_merchant_id_attempt_id_fkey FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT late_approvals_merchant_id_order_id_fkey FOREIGN KEY (merchant_id, order_id) REFERENCES orders(merchant_id, id),
    CONSTRAINT late_approvals_open_is_checked CHECK ((((status)::text = 'undoing'::text) = (next_check_at IS NOT NULL))),
    CONSTRAINT late_approvals_pkey PRIMARY KEY (merchant_id, id)
);

CREATE INDEX late_approvals_detected ON public.late_approvals USING btree (detected_at);

CREATE INDEX late_approvals_due ON public.late_approvals USING btree (next_check_at) WHERE ((status)::text = 'undoing'::text);

CREATE UNIQUE INDEX late_approvals_once ON public.late_approvals USING btree (merchant_id, attempt_id);

CREATE TRIGGER late_approvals_emit_event AFTER UPDATE OF status ON late_approvals FOR EACH ROW WHEN (old.status::text IS DISTINCT FROM new.status::text) EXECUTE FUNCTION late_approvals_emit_event();

CREATE TRIGGER late_approvals_emit_event_made AFTER INSERT ON late_approvals FOR EACH ROW EXECUTE FUNCTION late_approvals_emit_event();

CREATE TRIGGER late_approvals_guard_transition BEFORE UPDATE ON late_approvals FOR EACH ROW EXECUTE FUNCTION late_approvals_guard_transition();

CREATE TRIGGER late_approvals_of_a_failure BEFORE INSERT ON late_approvals FOR EACH ROW EXECUTE FUNCTION late_approvals_of_a_failure();

CREATE TABLE merchant_events (
    id uuid DEFAULT uuid_v7() NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    merchant_id uuid NOT NULL,
    type event_type NOT NULL,
    resource_id uuid NOT NULL,
    order_id uuid NOT NULL,
    snapshot jsonb NOT NULL,
    request jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT merchant_events_merchant_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT merchant_events_pkey PRIMARY KEY (id)
) PARTITION BY RANGE (id);

CREATE INDEX merchant_events_age ON ONLY public.merchant_events USING btree (created_at);

CREATE INDEX merchant_events_of_merchant ON ONLY public.merchant_events USING btree (merchant_id, seq);

CREATE INDEX merchant_events_of_order ON ONLY public.merchant_events USING btree (merchant_id, order_id);

CREATE INDEX merchant_events_once ON ONLY public.merchant_events USING btree (merchant_id, resource_id, type);

CREATE INDEX merchant_events_seq ON ONLY public.merchant_events USING btree (seq);

CREATE TRIGGER merchant_events_once BEFORE INSERT ON merchant_events FOR EACH ROW EXECUTE FUNCTION merchant_events_once();

CREATE TABLE merchant_events_legacy (
    id uuid DEFAULT uuid_v7() NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    merchant_id uuid NOT NULL,
    type event_type NOT NULL,
    resource_id uuid NOT NULL,
    order_id uuid NOT NULL,
    snapshot jsonb NOT NULL,
    request jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT merchant_events_legacy_pkey PRIMARY KEY (id),
    CONSTRAINT merchant_events_merchant_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id)
)
PARTITION OF merchant_events;

CREATE INDEX merchant_events_legacy_age ON public.merchant_events_legacy USING btree (created_at);

CREATE INDEX merchant_events_legacy_of_merchant ON public.merchant_events_legacy USING btree (merchant_id, seq);

CREATE INDEX merchant_events_legacy_of_order ON public.merchant_events_legacy USING btree (merchant_id, order_id);

CREATE UNIQUE INDEX merchant_events_legacy_once ON public.merchant_events_legacy USING btree (merchant_id, resource_id, type);

CREATE UNIQUE INDEX merchant_events_legacy_seq ON public.merchant_events_legacy USING btree (seq);

CREATE TRIGGER merchant_events_once BEFORE INSERT ON merchant_events_legacy FOR EACH ROW EXECUTE FUNCTION merchant_events_once();

CREATE TABLE merchant_routing (
    merchant_id uuid NOT NULL,
    providers text[] NOT NULL,
    currencies jsonb DEFAULT '{}'::jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by text NOT NULL,
    retry_soft_declines boolean DEFAULT false NOT NULL,
    retry_after_three_d_secure boolean DEFAULT false NOT NULL,
    max_attempts smallint DEFAULT 2 NOT NULL,
    strategy text DEFAULT 'ordered'::text NOT NULL,
    CONSTRAINT merchant_routing_currencies CHECK ((jsonb_typeof(currencies) = 'object'::text)),
    CONSTRAINT merchant_routing_max_attempts CHECK (((max_attempts >= 1) AND (max_attempts <= 4))),
    CONSTRAINT merchant_routing_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT merchant_routing_pkey PRIMARY KEY (merchant_id),
    CONSTRAINT merchant_routing_providers CHECK ((((cardinality(providers) >= 1) AND (cardinality(providers) <= 16)) AND (array_position(providers, NULL::text) IS NULL) AND ((providers)::provider_name[] IS NOT NULL))),
    CONSTRAINT merchant_routing_strategy_known CHECK ((strategy = ANY (ARRAY['ordered'::text, 'success_rate'::text])))
);

CREATE TABLE merchants (
    id uuid NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT merchants_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT merchants_pkey PRIMARY KEY (id)
);

CREATE TABLE orders (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    amount amount_minor NOT NULL,
    currency currency_code NOT NULL,
    status order_status DEFAULT 'awaiting_payment'::text NOT NULL,
    merchant_reference short_text,
    description description_text,
    metadata json_object DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    checkout_demo boolean DEFAULT false NOT NULL,
    CONSTRAINT orders_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT orders_merchant_reference_key UNIQUE (merchant_id, merchant_reference),
    CONSTRAINT orders_pkey PRIMARY KEY (merchant_id, id)
);

CREATE INDEX orders_id ON public.orders USING btree (id);

CREATE TRIGGER orders_checkout_demo_fixed BEFORE UPDATE OF checkout_demo ON orders FOR EACH ROW WHEN (old.checkout_demo IS DISTINCT FROM new.checkout_demo) EXECUTE FUNCTION orders_checkout_demo_is_fixed();

CREATE TRIGGER orders_emit_event AFTER UPDATE OF status ON orders FOR EACH ROW WHEN ((new.status::text = ANY (ARRAY['paid'::text, 'canceled'::text, 'refunded'::text])) AND old.status::text IS DISTINCT FROM new.status::text) EXECUTE FUNCTION orders_emit_event();

CREATE TRIGGER orders_guard_transition BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION orders_guard_transition();

CREATE TABLE payment_attempts (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    order_id uuid NOT NULL,
    status attempt_status NOT NULL,
    amount amount_minor NOT NULL,
    currency currency_code NOT NULL,
    payment_method short_text NOT NULL,
    provider text NOT NULL,
    provider_idempotency_key text NOT NULL,
    provider_payment_id text,
    failure_code text,
    failure_message text,
    idempotency_key text,
    next_check_at timestamp with time zone,
    checks integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    refund_held held_amount DEFAULT 0 NOT NULL,
    sending_until timestamp with time zone DEFAULT (now() + '1 day'::interval) NOT NULL,
    capture_method capture_method DEFAULT 'automatic'::text NOT NULL,
    amount_captured amount_minor,
    next_action json_object,
    return_url text,
    authorized_until timestamp with time zone,
    cancellation_reason short_text,
    failure_class text,
    provider_failure_code text,
    retry_of uuid,
    retry_reason text,
    three_d_secure text DEFAULT 'automatic'::text NOT NULL,
    dispute_held held_amount DEFAULT 0 NOT NULL,
    CONSTRAINT payment_attempts_canceled_has_reason CHECK ((((status)::text = 'canceled'::text) = (cancellation_reason IS NOT NULL))),
    CONSTRAINT payment_attempts_captured_only_manual CHECK (((amount_captured IS NULL) OR (((capture_method)::text = 'manual'::text) AND ((status)::text = 'succeeded'::text)))),
    CONSTRAINT payment_attempts_captured_within_authorized CHECK (((amount_captured)::bigint <= (amount)::bigint)),
    CONSTRAINT payment_attempts_class_is_a_failure CHECK ((((failure_class IS NULL) OR (((status)::text = 'failed'::text) AND (failure_class <> 'unknown'::text))) AND ((provider_failure_code IS NULL) OR (failure_class IS NOT NULL)))) NOT VALID,
    CONSTRAINT payment_attempts_failed_has_code CHECK ((((status)::text = 'failed'::text) = (failure_code IS NOT NULL))),
    CONSTRAINT payment_attempts_failure_class_known CHECK ((failure_class = ANY (ARRAY['hard'::text, 'soft'::text, 'authentication_required'::text, 'unknown'::text]))) NOT VALID,
    CONSTRAINT payment_attempts_final_is_finished CHECK ((((status)::text = ANY (ARRAY['succeeded'::text, 'failed'::text, 'canceled'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT payment_attempts_merchant_id_order_id_fkey FOREIGN KEY (merchant_id, order_id) REFERENCES orders(merchant_id, id),
    CONSTRAINT payment_attempts_open_is_checked CHECK ((((status)::text = ANY (ARRAY['created'::text, 'pending'::text, 'authorized'::text])) = (next_check_at IS NOT NULL))),
    CONSTRAINT payment_attempts_pkey PRIMARY KEY (merchant_id, id),
    CONSTRAINT payment_attempts_retry_has_reason CHECK (((retry_of IS NULL) = (retry_reason IS NULL))) NOT VALID,
    CONSTRAINT payment_attempts_retry_reason_known CHECK ((retry_reason = ANY (ARRAY['provider_unreached'::text, 'soft_decline'::text, 'authentication_required'::text]))) NOT VALID,
    CONSTRAINT payment_attempts_three_d_secure_known CHECK ((three_d_secure = ANY (ARRAY['automatic'::text, 'required'::text]))) NOT VALID
);

CREATE INDEX payment_attempts_card_declines ON public.payment_attempts USING btree (merchant_id, payment_method, finished_at) WHERE (((status)::text = 'failed'::text) AND (provider_failure_code IS NOT NULL) AND (failure_code <> 'provider_rejected'::text));

CREATE INDEX payment_attempts_due ON public.payment_attempts USING btree (next_check_at) WHERE ((status)::text = ANY (ARRAY['created'::text, 'pending'::text, 'authorized'::text]));

CREATE INDEX payment_attempts_failed ON public.payment_attempts USING btree (id) WHERE ((status)::text = 'failed'::text);

CREATE INDEX payment_attempts_id ON public.payment_attempts USING btree (id);

CREATE INDEX payment_attempts_idempotency_key ON public.payment_attempts USING btree (idempotency_key) WHERE (idempotency_key IS NOT NULL);

CREATE INDEX payment_attempts_no_record ON public.payment_attempts USING btree (id) WHERE (failure_code = 'provider_no_record'::text);

CREATE INDEX payment_attempts_order ON public.payment_attempts USING btree (order_id, created_at DESC);

CREATE INDEX payment_attempts_scored ON public.payment_attempts USING btree (provider, currency, created_at DESC) WHERE (((status)::text = ANY (ARRAY['succeeded'::text, 'authorized'::text])) OR (((status)::text = 'failed'::text) AND ((failure_class = 'soft'::text) OR (failure_code = 'provider_unavailable'::text))));

CREATE INDEX payment_attempts_settled ON public.payment_attempts USING btree (provider, finished_at) WHERE ((status)::text = 'succeeded'::text);

CREATE UNIQUE INDEX payment_attempts_one_open ON public.payment_attempts USING btree (merchant_id, order_id) WHERE ((status)::text = ANY (ARRAY['created'::text, 'pending'::text, 'authorized'::text]));

CREATE UNIQUE INDEX payment_attempts_one_succeeded ON public.payment_attempts USING btree (merchant_id, order_id) WHERE ((status)::text = 'succeeded'::text);

CREATE UNIQUE INDEX payment_attempts_provider_key ON public.payment_attempts USING btree (provider, provider_idempotency_key);

CREATE UNIQUE INDEX payment_attempts_provider_payment ON public.payment_attempts USING btree (provider, provider_payment_id);

CREATE TRIGGER payment_attempts_claim_order BEFORE INSERT ON payment_attempts FOR EACH ROW EXECUTE FUNCTION payment_attempts_claim_order();

CREATE TRIGGER payment_attempts_emit_event AFTER UPDATE OF status ON payment_attempts FOR EACH ROW WHEN (new.status::text <> 'created'::text AND old.status::text IS DISTINCT FROM new.status::text) EXECUTE FUNCTION payment_attempts_emit_event();

CREATE TRIGGER payment_attempts_emit_event_action AFTER UPDATE OF next_action ON payment_attempts FOR EACH ROW WHEN (old.next_action IS NULL AND new.next_action IS NOT NULL AND new.status::text = 'pending'::text) EXECUTE FUNCTION payment_attempts_emit_action();

CREATE TRIGGER payment_attempts_emit_event_made AFTER INSERT ON payment_attempts FOR EACH ROW WHEN (new.status::text <> 'created'::text) EXECUTE FUNCTION payment_attempts_emit_event();

CREATE TRIGGER payment_attempts_guard_sending BEFORE UPDATE ON payment_attempts FOR EACH ROW WHEN (new.sending_until < old.sending_until OR NOT new.failure_code IS DISTINCT FROM 'provider_no_record'::text) EXECUTE FUNCTION payment_attempts_guard_sending();

CREATE TRIGGER payment_attempts_guard_transition BEFORE UPDATE ON payment_attempts FOR EACH ROW EXECUTE FUNCTION payment_attempts_guard_transition();

CREATE TRIGGER payment_attempts_retry_follows_failure BEFORE INSERT OR UPDATE OF retry_of ON payment_attempts FOR EACH ROW WHEN (new.retry_of IS NOT NULL) EXECUTE FUNCTION payment_attempts_retry_follows_failure();

CREATE TRIGGER payment_attempts_settle_order AFTER UPDATE OF status ON payment_attempts FOR EACH ROW WHEN ((new.status::text = ANY (ARRAY['authorized'::text, 'succeeded'::text, 'failed'::text, 'canceled'::text])) AND old.status::text IS DISTINCT FROM new.status::text) EXECUTE FUNCTION payment_attempts_settle_order();

CREATE TABLE provider_calls (
    merchant_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    attempt_id uuid NOT NULL,
    operation provider_operation NOT NULL,
    source provider_call_source NOT NULL,
    outcome provider_outcome NOT NULL,
    http_status smallint,
    latency_ms milliseconds NOT NULL,
    detail text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    refund_id uuid,
    hold_operation_id uuid,
    CONSTRAINT provider_calls_hold_operation FOREIGN KEY (merchant_id, hold_operation_id) REFERENCES hold_operations(merchant_id, id),
    CONSTRAINT provider_calls_merchant_id_attempt_id_fkey FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT provider_calls_pkey PRIMARY KEY (merchant_id, id),
    CONSTRAINT provider_calls_refund FOREIGN KEY (merchant_id, refund_id) REFERENCES refunds(merchant_id, id)
);

CREATE INDEX provider_calls_attempt ON public.provider_calls USING btree (merchant_id, attempt_id, id);

CREATE TABLE provider_webhooks (
    id uuid NOT NULL,
    provider text NOT NULL,
    provider_event_id short_text NOT NULL,
    event_type text NOT NULL,
    outcome webhook_outcome NOT NULL,
    detail text,
    merchant_id uuid,
    attempt_id uuid,
    payload jsonb NOT NULL,
    provider_created_at timestamp with time zone NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    deliveries delivery_count DEFAULT 1 NOT NULL,
    payload_kept boolean DEFAULT false NOT NULL,
    CONSTRAINT provider_webhooks_attempt_fk FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT provider_webhooks_attempt_known CHECK ((((outcome)::text = ANY (ARRAY['unknown_attempt'::text, 'ignored'::text])) OR (attempt_id IS NOT NULL))),
    CONSTRAINT provider_webhooks_unknown_has_no_attempt CHECK ((((outcome)::text <> 'unknown_attempt'::text) OR (attempt_id IS NULL)))
) PARTITION BY RANGE (provider_created_at);

CREATE INDEX provider_webhooks_age ON ONLY public.provider_webhooks USING btree (received_at);

CREATE INDEX provider_webhooks_attempt ON ONLY public.provider_webhooks USING btree (merchant_id, attempt_id, received_at) WHERE (attempt_id IS NOT NULL);

CREATE INDEX provider_webhooks_conflicts ON ONLY public.provider_webhooks USING btree (received_at) WHERE ((outcome)::text = 'conflict'::text);

CREATE INDEX provider_webhooks_unkept ON ONLY public.provider_webhooks USING btree (received_at) WHERE (NOT payload_kept);

CREATE UNIQUE INDEX provider_webhooks_event_key ON ONLY public.provider_webhooks USING btree (provider, provider_event_id, provider_created_at);

CREATE UNIQUE INDEX provider_webhooks_key ON ONLY public.provider_webhooks USING btree (id, provider_created_at);

CREATE TRIGGER provider_webhooks_once BEFORE INSERT ON provider_webhooks FOR EACH ROW EXECUTE FUNCTION provider_webhooks_once();

CREATE TABLE provider_webhooks_legacy (
    id uuid NOT NULL,
    provider text NOT NULL,
    provider_event_id short_text NOT NULL,
    event_type text NOT NULL,
    outcome webhook_outcome NOT NULL,
    detail text,
    merchant_id uuid,
    attempt_id uuid,
    payload jsonb NOT NULL,
    provider_created_at timestamp with time zone NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    deliveries delivery_count DEFAULT 1 NOT NULL,
    payload_kept boolean DEFAULT false NOT NULL,
    CONSTRAINT provider_webhooks_attempt_fk FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT provider_webhooks_attempt_known CHECK ((((outcome)::text = ANY (ARRAY['unknown_attempt'::text, 'ignored'::text])) OR (attempt_id IS NOT NULL))),
    CONSTRAINT provider_webhooks_legacy_pkey PRIMARY KEY (id),
    CONSTRAINT provider_webhooks_legacy_provider_event_key UNIQUE (provider, provider_event_id),
    CONSTRAINT provider_webhooks_unknown_has_no_attempt CHECK ((((outcome)::text <> 'unknown_attempt'::text) OR (attempt_id IS NULL)))
)
PARTITION OF provider_webhooks;

CREATE INDEX provider_webhooks_legacy_age ON public.provider_webhooks_legacy USING btree (received_at);

CREATE INDEX provider_webhooks_legacy_attempt ON public.provider_webhooks_legacy USING btree (merchant_id, attempt_id, received_at) WHERE (attempt_id IS NOT NULL);

CREATE INDEX provider_webhooks_legacy_conflicts ON public.provider_webhooks_legacy USING btree (received_at) WHERE ((outcome)::text = 'conflict'::text);

CREATE INDEX provider_webhooks_legacy_unkept ON public.provider_webhooks_legacy USING btree (received_at) WHERE (NOT payload_kept);

CREATE UNIQUE INDEX provider_webhooks_legacy_event_key ON public.provider_webhooks_legacy USING btree (provider, provider_event_id, provider_created_at);

CREATE TRIGGER provider_webhooks_once BEFORE INSERT ON provider_webhooks_legacy FOR EACH ROW EXECUTE FUNCTION provider_webhooks_once();

CREATE TABLE provider_webhooks_outside (
    id uuid NOT NULL,
    provider text NOT NULL,
    provider_event_id short_text NOT NULL,
    event_type text NOT NULL,
    outcome webhook_outcome NOT NULL,
    detail text,
    merchant_id uuid,
    attempt_id uuid,
    payload jsonb NOT NULL,
    provider_created_at timestamp with time zone NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    deliveries delivery_count DEFAULT 1 NOT NULL,
    payload_kept boolean DEFAULT false NOT NULL,
    CONSTRAINT provider_webhooks_attempt_fk FOREIGN KEY (merchant_id, attempt_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT provider_webhooks_attempt_known CHECK ((((outcome)::text = ANY (ARRAY['unknown_attempt'::text, 'ignored'::text])) OR (attempt_id IS NOT NULL))),
    CONSTRAINT provider_webhooks_unknown_has_no_attempt CHECK ((((outcome)::text <> 'unknown_attempt'::text) OR (attempt_id IS NULL)))
)
PARTITION OF provider_webhooks;

CREATE INDEX provider_webhooks_outside_merchant_id_attempt_id_received_a_idx ON public.provider_webhooks_outside USING btree (merchant_id, attempt_id, received_at) WHERE (attempt_id IS NOT NULL);

CREATE INDEX provider_webhooks_outside_received_at_idx ON public.provider_webhooks_outside USING btree (received_at);

CREATE INDEX provider_webhooks_outside_received_at_idx1 ON public.provider_webhooks_outside USING btree (received_at) WHERE ((outcome)::text = 'conflict'::text);

CREATE INDEX provider_webhooks_outside_received_at_idx2 ON public.provider_webhooks_outside USING btree (received_at) WHERE (NOT payload_kept);

CREATE UNIQUE INDEX provider_webhooks_outside_provider_provider_event_id_provid_idx ON public.provider_webhooks_outside USING btree (provider, provider_event_id, provider_created_at);

CREATE TRIGGER provider_webhooks_once BEFORE INSERT ON provider_webhooks_outside FOR EACH ROW EXECUTE FUNCTION provider_webhooks_once();

CREATE TABLE refund_transitions (
    merchant_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    refund_id uuid NOT NULL,
    from_status open_refund_status,
    to_status refund_status NOT NULL,
    source transition_source NOT NULL,
    detail text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT refund_transitions_refund_fkey FOREIGN KEY (merchant_id, refund_id) REFERENCES refunds(merchant_id, id)
) PARTITION BY RANGE (created_at);

CREATE INDEX refund_transitions_refund ON ONLY public.refund_transitions USING btree (merchant_id, refund_id, id);

CREATE UNIQUE INDEX refund_transitions_key ON ONLY public.refund_transitions USING btree (merchant_id, id, created_at);

CREATE TABLE refund_transitions_legacy (
    merchant_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    refund_id uuid NOT NULL,
    from_status open_refund_status,
    to_status refund_status NOT NULL,
    source transition_source NOT NULL,
    detail text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT refund_transitions_legacy_pkey PRIMARY KEY (merchant_id, id),
    CONSTRAINT refund_transitions_refund_fkey FOREIGN KEY (merchant_id, refund_id) REFERENCES refunds(merchant_id, id)
)
PARTITION OF refund_transitions;

CREATE INDEX refund_transitions_legacy_refund ON public.refund_transitions_legacy USING btree (merchant_id, refund_id, id);

CREATE TABLE refunds (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    payment_id uuid NOT NULL,
    order_id uuid NOT NULL,
    status refund_status NOT NULL,
    amount amount_minor NOT NULL,
    currency currency_code NOT NULL,
    reason description_text,
    provider text NOT NULL,
    provider_idempotency_key text NOT NULL,
    provider_refund_id text,
    failure_code text,
    failure_message text,
    idempotency_key text,
    next_check_at timestamp with time zone,
    checks integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT refunds_failed_has_code CHECK ((((status)::text = 'failed'::text) = (failure_code IS NOT NULL))),
    CONSTRAINT refunds_final_is_finished CHECK ((((status)::text = ANY (ARRAY['succeeded'::text, 'failed'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT refunds_merchant_id_order_id_fkey FOREIGN KEY (merchant_id, order_id) REFERENCES orders(merchant_id, id),
    CONSTRAINT refunds_merchant_id_payment_id_fkey FOREIGN KEY (merchant_id, payment_id) REFERENCES payment_attempts(merchant_id, id),
    CONSTRAINT refunds_open_is_checked CHECK ((((status)::text = ANY (ARRAY['created'::text, 'pending'::text])) = (next_check_at IS NOT NULL))),
    CONSTRAINT refunds_pkey PRIMARY KEY (merchant_id, id)
);

CREATE INDEX refunds_due ON public.refunds USING btree (next_check_at) WHERE ((status)::text = ANY (ARRAY['created'::text, 'pending'::text]));

CREATE INDEX refunds_finished ON public.refunds USING btree (provider, finished_at) WHERE (finished_at IS NOT NULL);

CREATE INDEX refunds_id ON public.refunds USING btree (id);

CREATE INDEX refunds_payment ON public.refunds USING btree (merchant_id, payment_id, created_at);

CREATE UNIQUE INDEX refunds_provider_key ON public.refunds USING btree (provider, provider_idempotency_key);

CREATE UNIQUE INDEX refunds_provider_refund ON public.refunds USING btree (provider, provider_refund_id);

CREATE TRIGGER refunds_emit_event AFTER UPDATE OF status ON refunds FOR EACH ROW WHEN ((new.status::text = ANY (ARRAY['succeeded'::text, 'failed'::text])) AND old.status::text IS DISTINCT FROM new.status::text) EXECUTE FUNCTION refunds_emit_event();

CREATE TRIGGER refunds_emit_event_made AFTER INSERT ON refunds FOR EACH ROW WHEN (new.status::text = ANY (ARRAY['succeeded'::text, 'failed'::text])) EXECUTE FUNCTION refunds_emit_event();

CREATE TRIGGER refunds_guard_transition BEFORE UPDATE ON refunds FOR EACH ROW EXECUTE FUNCTION refunds_guard_transition();

CREATE TRIGGER refunds_hold_amount BEFORE INSERT ON refunds FOR EACH ROW EXECUTE FUNCTION refunds_hold_amount();

CREATE TRIGGER refunds_settle_order AFTER UPDATE OF status ON refunds FOR EACH ROW WHEN (new.status::text = 'succeeded'::text AND old.status::text IS DISTINCT FROM new.status::text) EXECUTE FUNCTION refunds_settle_order();

CREATE TABLE settlement_cursors (
    provider provider_name NOT NULL,
    position text NOT NULL,
    read_through timestamp with time zone NOT NULL,
    checked_through timestamp with time zone NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT settlement_cursors_checked_after_read CHECK ((checked_through <= read_through)),
    CONSTRAINT settlement_cursors_pkey PRIMARY KEY (provider)
);

CREATE TABLE settlement_entries (
    provider provider_name NOT NULL,
    provider_entry_id text NOT NULL,
    kind settlement_entry_kind NOT NULL,
    provider_payment_id text,
    provider_source_id text,
    amount bigint NOT NULL,
    currency currency_code NOT NULL,
    booked_at timestamp with time zone NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    reference text,
    batch bigint,
    read_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT settlement_entries_pkey PRIMARY KEY (provider, provider_entry_id)
);

CREATE INDEX settlement_entries_booked ON public.settlement_entries USING btree (provider, booked_at);

CREATE INDEX settlement_entries_payment ON public.settlement_entries USING btree (provider, provider_payment_id);

CREATE INDEX settlement_entries_source ON public.settlement_entries USING btree (provider, provider_source_id);

CREATE TABLE settlement_findings (
    id uuid NOT NULL,
    provider provider_name NOT NULL,
    kind settlement_finding_kind NOT NULL,
    subject text NOT NULL,
    provider_payment_id text,
    merchant_id uuid,
    attempt_id uuid,
    refund_id uuid,
    expected bigint,
    found bigint,
    currency currency_code,
    evidence jsonb NOT NULL,
    found_at timestamp with time zone DEFAULT now() NOT NULL,
    resolved_at timestamp with time zone,
    resolution text,
    CONSTRAINT settlement_findings_pkey PRIMARY KEY (id),
    CONSTRAINT settlement_findings_resolved_has_resolution CHECK (((resolved_at IS NULL) = (resolution IS NULL)))
);

CREATE INDEX settlement_findings_merchant ON public.settlement_findings USING btree (merchant_id, found_at) WHERE (merchant_id IS NOT NULL);

CREATE INDEX settlement_findings_open ON public.settlement_findings USING btree (found_at) WHERE (resolved_at IS NULL);

CREATE UNIQUE INDEX settlement_findings_open_once ON public.settlement_findings USING btree (provider, kind, subject) WHERE (resolved_at IS NULL);

CREATE TABLE support_actions (
    id uuid NOT NULL,
    key_id uuid NOT NULL,
    key_name text NOT NULL,
    support_role text NOT NULL,
    action text NOT NULL,
    target_kind text NOT NULL,
    target_id uuid NOT NULL,
    merchant_id uuid NOT NULL,
    order_id uuid,
    before jsonb,
    after jsonb,
    answers uuid,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT support_actions_action_check CHECK ((action = ANY (ARRAY['reconcile_payment'::text, 'void_payment'::text, 'reconcile_refund'::text, 'redeliver_event'::text, 'change_routing'::text]))),
    CONSTRAINT support_actions_action_target CHECK (
CASE action
    WHEN 'reconcile_payment'::text THEN (target_kind = 'payment'::text)
    WHEN 'void_payment'::text THEN (target_kind = 'payment'::text)
    WHEN 'reconcile_refund'::text THEN (target_kind = 'refund'::text)
    WHEN 'redeliver_event'::text THEN (target_kind = 'event'::text)
    WHEN 'change_routing'::text THEN (target_kind = 'merchant'::text)
    ELSE NULL::boolean
END),
    CONSTRAINT support_actions_answers FOREIGN KEY (answers, key_id, action, target_id) REFERENCES support_actions(id, key_id, action, target_id),
    CONSTRAINT support_actions_askable UNIQUE (id, key_id, action, target_id),
    CONSTRAINT support_actions_asked_first CHECK (
CASE
    WHEN (action = ANY (ARRAY['reconcile_payment'::text, 'void_payment'::text, 'reconcile_refund'::text])) THEN ((NOT (after IS DISTINCT FROM '{"outcome": "asked"}'::jsonb)) = (answers IS NULL))
    ELSE ((answers IS NULL) AND (after IS DISTINCT FROM '{"outcome": "asked"}'::jsonb))
END),
    CONSTRAINT support_actions_key_id_fkey FOREIGN KEY (key_id) REFERENCES api_keys(id),
    CONSTRAINT support_actions_key_name_check CHECK (((length(key_name) >= 1) AND (length(key_name) <= 200))),
    CONSTRAINT support_actions_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT support_actions_one_outcome UNIQUE (answers),
    CONSTRAINT support_actions_pkey PRIMARY KEY (id),
    CONSTRAINT support_actions_support_role_check CHECK ((support_role = ANY (ARRAY['read'::text, 'operate'::text]))),
    CONSTRAINT support_actions_target CHECK (((target_kind = 'merchant'::text) = (order_id IS NULL))),
    CONSTRAINT support_actions_target_kind_check CHECK ((target_kind = ANY (ARRAY['payment'::text, 'refund'::text, 'event'::text, 'merchant'::text])))
);

CREATE INDEX support_actions_key ON public.support_actions USING btree (key_id, at);

CREATE INDEX support_actions_order ON public.support_actions USING btree (merchant_id, order_id, at) WHERE (order_id IS NOT NULL);

CREATE TRIGGER support_actions_append_only BEFORE DELETE OR UPDATE ON support_actions FOR EACH ROW EXECUTE FUNCTION support_actions_append_only();

CREATE TRIGGER support_actions_no_truncate BEFORE TRUNCATE ON support_actions FOR EACH STATEMENT EXECUTE FUNCTION support_actions_append_only();

CREATE TABLE webhook_endpoints (
    merchant_id uuid NOT NULL,
    id uuid NOT NULL,
    url text NOT NULL,
    description text,
    enabled_events text[] NOT NULL,
    secret text NOT NULL,
    previous_secret text,
    previous_secret_until timestamp with time zone,
    status endpoint_status DEFAULT 'enabled'::text NOT NULL,
    disabled_reason text,
    failing_since timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT webhook_endpoints_check CHECK (((previous_secret IS NULL) = (previous_secret_until IS NULL))),
    CONSTRAINT webhook_endpoints_check1 CHECK ((((status)::text = 'disabled'::text) = (disabled_reason IS NOT NULL))),
    CONSTRAINT webhook_endpoints_description_check CHECK ((length(description) <= 1000)),
    CONSTRAINT webhook_endpoints_enabled_events_check CHECK (((cardinality(enabled_events) > 0) AND (enabled_events <@ ARRAY['*'::text, 'payment.pending'::text, 'payment.requires_action'::text, 'payment.authorized'::text, 'payment.succeeded'::text, 'payment.failed'::text, 'payment.canceled'::text, 'refund.succeeded'::text, 'refund.failed'::text, 'order.paid'::text, 'order.canceled'::text, 'order.refunded'::text, 'late_approval.detected'::text, 'late_approval.voided'::text, 'late_approval.refunded'::text, 'late_approval.undo_failed'::text, 'dispute.created'::text, 'dispute.updated'::text, 'dispute.closed'::text]))) NOT VALID,
    CONSTRAINT webhook_endpoints_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id),
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (merchant_id, id),
    CONSTRAINT webhook_endpoints_previous_secret_sealed CHECK ((previous_secret ~ '^v1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/]{16}:[A-Za-z0-9+/]+$'::text)) NOT VALID,
    CONSTRAINT webhook_endpoints_secret_sealed CHECK ((secret ~ '^v1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/]{16}:[A-Za-z0-9+/]+$'::text)) NOT VALID,
    CONSTRAINT webhook_endpoints_url_check CHECK (((length(url) >= 1) AND (length(url) <= 2048)))
);

CREATE INDEX webhook_endpoints_live ON public.webhook_endpoints USING btree (merchant_id) WHERE (((status)::text = 'enabled'::text) AND (deleted_at IS NULL));

CREATE TRIGGER webhook_endpoints_limit BEFORE INSERT ON webhook_endpoints FOR EACH ROW EXECUTE FUNCTION webhook_endpoints_limit();

-- Views
-- -----

CREATE VIEW attempt_events AS
 SELECT attempt_transitions.merchant_id,
    attempt_transitions.id,
    attempt_transitions.attempt_id,
    attempt_transitions.from_status,
    attempt_transitions.to_status,
    attempt_transitions.source,
    attempt_transitions.detail,
    attempt_transitions.created_at
   FROM attempt_transitions;

CREATE VIEW events AS
 SELECT merchant_events.id,
    merchant_events.seq,
    merchant_events.merchant_id,
    merchant_events.type,
    merchant_events.resource_id,
    merchant_events.order_id,
    merchant_events.snapshot,
    merchant_events.request,
    merchant_events.created_at
   FROM merchant_events;

CREATE VIEW refund_events AS
 SELECT refund_transitions.merchant_id,
    refund_transitions.id,
    refund_transitions.refund_id,
    refund_transitions.from_status,
    refund_transitions.to_status,
    refund_transitions.source,
    refund_transitions.detail,
    refund_transitions.created_at
   FROM refund_transitions;

CREATE VIEW webhook_events AS
 SELECT provider_webhooks.id,
    provider_webhooks.provider,
    provider_webhooks.provider_event_id,
    provider_webhooks.event_type,
    provider_webhooks.outcome,
    provider_webhooks.detail,
    provider_webhooks.merchant_id,
    provider_webhooks.attempt_id,
    provider_webhooks.payload,
    provider_webhooks.provider_created_at,
    provider_webhooks.received_at,
    provider_webhooks.deliveries,
    provider_webhooks.payload_kept
   FROM provider_webhooks;

-- Functions: the triggers' bodies and the statements' helpers
-- -----------------------------------------------------------

CREATE OR REPLACE FUNCTION public.api_keys_life()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.secret_sha256 <> OLD.secret_sha256 OR NEW.role <> OLD.role
       OR NEW.support_role IS DISTINCT FROM OLD.support_role
       OR NEW.merchant_id IS DISTINCT FROM OLD.merchant_id
       OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'api key %: its secret, role, support role, merchant and creation never change', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'api_keys_identity_fixed',
                  HINT = 'for another role, make a new key (payorch keys create --support --role ...) and revoke this one';
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        RAISE EXCEPTION 'api key % is revoked for good; make a new key', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'api_keys_revoked_for_good';
    END IF;
    IF NEW.revoked_at IS DISTINCT FROM OLD.revoked_at
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
        NEW.life_changed_at := clock_timestamp();
        NEW.life_changed_xid := pg_current_xact_id();
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.dispute_actions_end_with_the_dispute()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    WITH ended AS (
        UPDATE dispute_actions a SET
            status = CASE WHEN led THEN 'succeeded' ELSE 'failed' END,
            failure_code = CASE WHEN led THEN NULL ELSE 'dispute_moved' END,
            failure_message = CASE WHEN led THEN NULL ELSE format(
                'the dispute moved to %s before this answer''s outcome was known', NEW.status) END
        FROM (SELECT p.merchant_id, p.id,
                     (p.kind = 'evidence' AND NEW.status IN ('under_review',
                          'warning_under_review', 'won', 'lost'))
                     OR (p.kind = 'accept' AND NEW.status IN ('lost', 'warning_closed')) AS led
              FROM dispute_actions p
              WHERE p.merchant_id = NEW.merchant_id AND p.dispute_id = NEW.id
                AND p.status = 'pending') judged
        WHERE a.merchant_id = judged.merchant_id AND a.id = judged.id AND a.status = 'pending'
        RETURNING a.merchant_id, a.id, a.idempotency_key)
    UPDATE idempotency_keys k SET state = 'completed', locked_until = NULL,
        recovery_point = 'finished', response_status = 200, unresolved = false,
        updated_at = now()
    FROM ended e
    WHERE k.merchant_id = e.merchant_id AND k.key = e.idempotency_key
      AND k.resource_type = 'dispute_action' AND k.resource_id = e.id
      AND k.state = 'in_flight';
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.dispute_actions_guard_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF (NEW.merchant_id, NEW.id, NEW.dispute_id, NEW.kind, NEW.provider, NEW.provider_dispute_id,
        NEW.provider_idempotency_key, NEW.evidence, NEW.idempotency_key, NEW.created_at)
       IS DISTINCT FROM
       (OLD.merchant_id, OLD.id, OLD.dispute_id, OLD.kind, OLD.provider, OLD.provider_dispute_id,
        OLD.provider_idempotency_key, OLD.evidence, OLD.idempotency_key, OLD.created_at) THEN
        RAISE EXCEPTION 'dispute action % may change only its status', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_immutable';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'dispute action % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_final';
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.dispute_actions_of_an_open_dispute()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    d disputes;
BEGIN
    IF NEW.status <> 'pending' THEN
        RAISE EXCEPTION 'a dispute action starts pending, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_start_pending';
    END IF;
    SELECT * INTO d FROM disputes
        WHERE merchant_id = NEW.merchant_id AND id = NEW.dispute_id FOR NO KEY UPDATE;
    IF NOT FOUND OR d.status NOT IN ('needs_response', 'warning_needs_response') THEN
        RAISE EXCEPTION 'dispute % is % and takes no answer', NEW.dispute_id, d.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_dispute_answerable';
    END IF;
    -- An accepted inquiry keeps its status until the provider tells what came of it (see the
    -- accept's answer in src/payments/disputes/keyed/act.rs): accepted, it takes nothing more.
    PERFORM 1 FROM dispute_actions a
        WHERE a.merchant_id = NEW.merchant_id AND a.dispute_id = NEW.dispute_id
          AND a.kind = 'accept' AND a.status = 'succeeded';
    IF FOUND THEN
        RAISE EXCEPTION 'dispute % was accepted and takes no answer', NEW.dispute_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'dispute_actions_dispute_answerable';
    END IF;
    NEW.provider := d.provider;
    NEW.provider_dispute_id := d.provider_dispute_id;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.dispute_holds(status dispute_status)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT status IN ('needs_response', 'under_review', 'lost')
$function$;

CREATE OR REPLACE FUNCTION public.dispute_stage_rank(stage dispute_stage)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT CASE stage WHEN 'inquiry' THEN 0 WHEN 'chargeback' THEN 1
                      WHEN 'second_chargeback' THEN 2 WHEN 'pre_arbitration' THEN 3
                      WHEN 'arbitration' THEN 4 END
$function$;

CREATE OR REPLACE FUNCTION public.disputes_emit_event()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM events_emit(NEW.merchant_id,
        CASE WHEN TG_OP = 'INSERT' THEN 'dispute.created'
             WHEN NEW.status IN ('won', 'lost', 'warning_closed')
                  AND NEW.status IS DISTINCT FROM OLD.status THEN 'dispute.closed'
             ELSE 'dispute.updated' END,
        CASE WHEN TG_OP = 'INSERT' THEN NEW.id
             ELSE md5(NEW.id::text || ':' || NEW.status || ':' || NEW.stage)::uuid END,
        NEW.order_id, jsonb_build_object('dispute', to_jsonb(NEW)));
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.disputes_guard_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id
       OR NEW.attempt_id <> OLD.attempt_id OR NEW.order_id <> OLD.order_id
       OR NEW.provider <> OLD.provider OR NEW.provider_dispute_id <> OLD.provider_dispute_id
       OR NEW.provider_payment_id <> OLD.provider_payment_id
       OR NEW.currency <> OLD.currency OR NEW.opened_at <> OLD.opened_at THEN
        RAISE EXCEPTION 'dispute % may change only its status, stage and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_immutable';
    END IF;
    IF dispute_stage_rank(NEW.stage) < dispute_stage_rank(OLD.stage) THEN
        RAISE EXCEPTION 'dispute % cannot go back from stage % to %', OLD.id, OLD.stage, NEW.stage
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_status_transition';
    END IF;
    IF (NEW.status, NEW.stage) IS DISTINCT FROM (OLD.status, OLD.stage) AND NOT (
        (NEW.status = OLD.status AND OLD.status <> 'warning_closed'
            AND dispute_stage_rank(NEW.stage) > dispute_stage_rank(OLD.stage)) OR
        (OLD.status = 'warning_needs_response' AND NEW.status IN ('warning_under_review',
            'warning_closed', 'needs_response', 'under_review', 'won', 'lost')) OR
        (OLD.status = 'warning_under_review' AND NEW.status IN ('warning_closed',
            'needs_response', 'under_review', 'won', 'lost')) OR
        (OLD.status = 'needs_response' AND NEW.status IN ('under_review', 'won', 'lost')) OR
        (OLD.status = 'under_review' AND NEW.status IN ('won', 'lost')) OR
        (OLD.status = 'won' AND NEW.status = 'lost' AND OLD.stage <> 'arbitration'
            AND NEW.stage IN ('second_chargeback', 'arbitration')) OR
        (OLD.status = 'lost' AND NEW.status = 'won' AND OLD.stage <> 'arbitration'
            AND NEW.stage IN ('pre_arbitration', 'arbitration'))
    ) THEN
        RAISE EXCEPTION 'dispute % cannot move from % (%) to % (%)',
            OLD.id, OLD.status, OLD.stage, NEW.status, NEW.stage
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_status_transition';
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('won', 'lost', 'warning_closed') AND NEW.status IS DISTINCT FROM OLD.status THEN
        NEW.closed_at := now();
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.disputes_hold_amount()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    was_held bigint := 0;
    now_held bigint := 0;
BEGIN
    IF TG_OP = 'UPDATE' AND dispute_holds(OLD.status) THEN
        was_held := OLD.amount;
    END IF;
    IF dispute_holds(NEW.status) THEN
        now_held := NEW.amount;
    END IF;
    IF was_held <> now_held THEN
        UPDATE payment_attempts SET dispute_held = dispute_held - was_held + now_held
            WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id;
    END IF;
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.disputes_of_a_payment()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM 1 FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id
          AND order_id = NEW.order_id AND provider = NEW.provider AND currency = NEW.currency;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % is not a payment of order % at % in %',
            NEW.attempt_id, NEW.order_id, NEW.provider, NEW.currency
            USING ERRCODE = 'check_violation', CONSTRAINT = 'disputes_of_a_payment';
    END IF;
    NEW.closed_at := CASE WHEN NEW.status IN ('won', 'lost', 'warning_closed') THEN now() END;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.disputes_overlap_flag()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    was_held bigint := 0;
    now_held bigint := 0;
    captured bigint;
    refunds bigint;
    disputes bigint;
BEGIN
    IF TG_OP = 'UPDATE' AND dispute_holds(OLD.status) THEN
        was_held := OLD.amount;
    END IF;
    IF dispute_holds(NEW.status) THEN
        now_held := NEW.amount;
    END IF;
    IF was_held = now_held THEN
        RETURN NEW;
    END IF;
    SELECT COALESCE(amount_captured, amount), refund_held, dispute_held
        INTO captured, refunds, disputes FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id
        FOR NO KEY UPDATE;
    -- A late approval payorch undid by a refund (migration 000026) gave the payer the money
    -- back too, though the failed attempt holds no refund: a chargeback of that charge
    -- returns it twice all the same. Being refunded counts as well: its refund was sent.
    refunds := refunds + COALESCE((
        SELECT sum(l.amount) FROM late_approvals l
        WHERE l.merchant_id = NEW.merchant_id AND l.attempt_id = NEW.attempt_id
          AND l.approved_as = 'succeeded' AND l.status IN ('undoing', 'refunded')), 0);
    IF now_held > 0 THEN
        -- `disputes` is what the payment's disputes hold before this change, this one's old
        -- hold among them.
        NEW.refunded_before := refunds;
        NEW.overlap := greatest(0, refunds + disputes - was_held + now_held - captured);
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.events_emit(merchant uuid, kind event_type, resource uuid, of_order uuid, snapshot jsonb)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION public.history_create_ahead(table_name text, months integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET lock_timeout TO '2s'
 SET "TimeZone" TO 'UTC'
AS $function$
DECLARE
    t record;
    first timestamptz := date_trunc('month', now(), 'UTC');
    m timestamptz;
    part text;
    made integer := 0;
BEGIN
    -- 0x68697374 ("hist"): the keeper's class of advisory locks. Taken by another replica's
    -- keeper: it is making or dropping months now, and the next round looks again.
    IF NOT pg_try_advisory_xact_lock(1751741300, 0) THEN
        RETURN 0;
    END IF;
    SELECT name, key_kind, legacy_until INTO t FROM history_tables WHERE name = table_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no history table %', table_name;
    END IF;
    BEGIN
        -- From last month (a provider may date a webhook a moment before it arrives), or
        -- the legacy partition's end if later: a month past is made again only when missing
        -- at its end (000032 run late, a keeper stopped), never one long dropped.
        FOR m IN SELECT generate_series(greatest(t.legacy_until, first - interval '1 month'),
                     first + make_interval(months => least(greatest(months, 0), 24)),
                     interval '1 month') LOOP
            CONTINUE WHEN m < t.legacy_until;
            part := t.name || '_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
            CONTINUE WHEN to_regclass(format('public.%I', part)) IS NOT NULL;
            IF t.key_kind = 'event_id' THEN
                EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    part, t.name, history_uuid_at(m), history_uuid_at(m + interval '1 month'));
            ELSIF t.name = 'provider_webhooks' THEN
                -- Made beside the table, given the rows the DEFAULT partition holds of its
                -- month, then attached: the attach finds none of them left there.
                EXECUTE format('CREATE TABLE %I (LIKE provider_webhooks INCLUDING DEFAULTS
                    INCLUDING CONSTRAINTS)', part);
                EXECUTE format('WITH moved AS (DELETE FROM provider_webhooks_outside
                    WHERE provider_created_at >= %L AND provider_created_at < %L RETURNING *)
                    INSERT INTO %I SELECT * FROM moved', m, m + interval '1 month', part);
                EXECUTE format('ALTER TABLE provider_webhooks ATTACH PARTITION %I
                    FOR VALUES FROM (%L) TO (%L)', part, m, m + interval '1 month');
            ELSE
                EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    part, t.name, m, m + interval '1 month');
            END IF;
            IF t.name = 'event_deliveries' THEN
                EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (event_id)
                    REFERENCES %I (id) ON DELETE CASCADE', part, part || '_event_fkey',
                    'merchant_events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'));
            ELSIF t.name = 'delivery_attempts' THEN
                EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (event_id, endpoint_id)
                    REFERENCES %I (event_id, endpoint_id) ON DELETE CASCADE', part,
                    part || '_delivery_fkey',
                    'event_deliveries_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'));
            END IF;
            made := made + 1;
        END LOOP;
    END;
    RETURN made;
END
$function$;

CREATE OR REPLACE FUNCTION public.history_drop_expired(family text, keep interval)
 RETURNS TABLE(partition_name text, dropped boolean, reason text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
 SET lock_timeout TO '100ms'
 SET "TimeZone" TO 'UTC'
AS $function$
DECLARE
    cutoff timestamptz := now() - keep;
    p record;
    suffix text;
    open boolean;
BEGIN
    IF family NOT IN ('events', 'provider_webhooks') THEN
        RAISE EXCEPTION 'no history family %', family;
    END IF;
    -- Taken by another replica's keeper (the same lock as history_create_ahead's): it is
    -- at work now, and this one has nothing to do this round.
    IF NOT pg_try_advisory_xact_lock(1751741300, 0) THEN
        RETURN;
    END IF;
    FOR p IN SELECT * FROM history_partitions() h
             WHERE h.table_name = CASE family WHEN 'events' THEN 'merchant_events'
                                              ELSE 'provider_webhooks' END
               AND h.until_at <= cutoff AND h.until_at < date_trunc('month', now(), 'UTC')
             ORDER BY h.until_at LOOP
        suffix := substr(p.partition_name, length(p.table_name) + 1);
        partition_name := p.partition_name;
        BEGIN
            -- The payments the month's rows are about: an event is about an order's payment,
            -- refund or the order itself (the order's attempts); a webhook about its attempt.
            -- Open, or final for less than the retention, with their refunds and holds.
            EXECUTE format($q$SELECT EXISTS (
                SELECT 1 FROM %I x JOIN payment_attempts a ON a.merchant_id = x.merchant_id
                    AND %s
                WHERE a.finished_at IS NULL OR a.finished_at >= $1
                   OR EXISTS (SELECT 1 FROM refunds r WHERE r.merchant_id = a.merchant_id
                              AND r.payment_id = a.id
                              AND (r.finished_at IS NULL OR r.finished_at >= $1))
                   OR EXISTS (SELECT 1 FROM hold_operations o
                              WHERE o.merchant_id = a.merchant_id AND o.payment_id = a.id
                              AND (o.finished_at IS NULL OR o.finished_at >= $1)))$q$,
                p.partition_name,
                CASE family WHEN 'events' THEN 'a.order_id = x.order_id'
                            ELSE 'a.id = x.attempt_id' END) INTO open USING cutoff;
            IF NOT open THEN
                IF family = 'events' THEN
                    -- The three parents in the order their writers insert (an event, then
                    -- its deliveries, then their attempts); then the referencing months
                    -- first: their foreign keys name this one's events.
                    LOCK TABLE merchant_events, event_deliveries, delivery_attempts
                        IN ACCESS EXCLUSIVE MODE;
                    EXECUTE format('DROP TABLE %I', 'delivery_attempts' || suffix);
                    EXECUTE format('DROP TABLE %I', 'event_deliveries' || suffix);
                END IF;
                EXECUTE format('DROP TABLE %I', p.partition_name);
            END IF;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            dropped := false; reason := 'busy';
            RETURN NEXT;
            -- Its tables are held: a later month would wait on the same ones.
            EXIT;
        END;
        IF open THEN
            dropped := false; reason := 'open payment';
            RETURN NEXT;
        ELSE
            dropped := true; reason := NULL;
            RETURN NEXT;
            -- One month a transaction: the keeper calls again for the next.
            RETURN;
        END IF;
    END LOOP;
    IF family = 'provider_webhooks' THEN
        -- The webhooks dated outside the months, by the row: past `keep` since they came,
        -- their payment final as long (or about no payment of ours). Rows held by another
        -- transaction wait for the next round.
        BEGIN
            DELETE FROM provider_webhooks_outside w
            WHERE w.received_at < cutoff
              AND (w.attempt_id IS NULL OR (
                  EXISTS (SELECT 1 FROM payment_attempts a
                          WHERE a.merchant_id = w.merchant_id AND a.id = w.attempt_id
                            AND a.finished_at < cutoff)
                  AND NOT EXISTS (SELECT 1 FROM refunds r
                          WHERE r.merchant_id = w.merchant_id AND r.payment_id = w.attempt_id
                            AND (r.finished_at IS NULL OR r.finished_at >= cutoff))
                  AND NOT EXISTS (SELECT 1 FROM hold_operations o
                          WHERE o.merchant_id = w.merchant_id AND o.payment_id = w.attempt_id
                            AND (o.finished_at IS NULL OR o.finished_at >= cutoff))));
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;
        END;
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION public.history_partitions()
 RETURNS TABLE(table_name text, partition_name text, from_at timestamp with time zone, until_at timestamp with time zone)
 LANGUAGE sql
 STABLE
 SET "TimeZone" TO 'UTC'
AS $function$
    SELECT h.name, c.relname::text,
           CASE WHEN c.relname = h.name || '_legacy' THEN NULL
                ELSE to_date(right(c.relname, 7), 'YYYY_MM')::timestamp AT TIME ZONE 'UTC' END,
           CASE WHEN c.relname = h.name || '_legacy' THEN h.legacy_until
                ELSE (to_date(right(c.relname, 7), 'YYYY_MM')::timestamp AT TIME ZONE 'UTC')
                     + interval '1 month' END
    FROM history_tables h
    JOIN pg_class p ON p.relname = h.name AND p.relnamespace = 'public'::regnamespace
    JOIN pg_inherits i ON i.inhparent = p.oid
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
    ORDER BY h.name, 4
$function$;

CREATE OR REPLACE FUNCTION public.history_uuid_at(at timestamp with time zone)
 RETURNS uuid
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0')
            || '00000000000000000000')::uuid
$function$;

CREATE OR REPLACE FUNCTION public.hold_operations_check_hold()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    held payment_attempts;
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a hold operation starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_start_created';
    END IF;
    SELECT * INTO held FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT (held.status = 'authorized'
                         OR (NEW.kind = 'void' AND held.status = 'pending')) THEN
        RAISE EXCEPTION 'payment attempt % is % and holds nothing to %', NEW.payment_id,
                COALESCE(held.status, 'missing'), NEW.kind
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_payment_held';
    END IF;
    IF NEW.kind = 'capture' THEN
        IF held.capture_method <> 'manual' THEN
            RAISE EXCEPTION 'payment attempt % is captured automatically', NEW.payment_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_payment_held';
        END IF;
        NEW.amount := COALESCE(NEW.amount, held.amount);
        IF NEW.amount > held.amount THEN
            RAISE EXCEPTION 'payment attempt % authorized %, not %', NEW.payment_id, held.amount, NEW.amount
                USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_capture_within_hold';
        END IF;
    END IF;
    NEW.order_id := held.order_id;
    NEW.currency := held.currency;
    NEW.provider := held.provider;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.hold_operations_guard_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF OLD.status IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'hold operation % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_final';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'created' AND NEW.status IN ('pending', 'succeeded', 'failed')) OR
        (OLD.status = 'pending' AND NEW.status IN ('succeeded', 'failed'))
    ) THEN
        RAISE EXCEPTION 'hold operation % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id OR NEW.payment_id <> OLD.payment_id
       OR NEW.order_id <> OLD.order_id OR NEW.kind <> OLD.kind
       OR NEW.amount IS DISTINCT FROM OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.provider <> OLD.provider
       OR NEW.provider_idempotency_key <> OLD.provider_idempotency_key
       OR NEW.source <> OLD.source OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'hold operation % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_operations_immutable';
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('succeeded', 'failed') THEN
        NEW.finished_at := now();
        NEW.next_check_at := NULL;
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.idempotency_key_made_money_move(k idempotency_keys)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT coalesce(k.resource_type IN ('payment_attempt', 'refund', 'hold_operation',
        'dispute_action'), false)
$function$;

CREATE OR REPLACE FUNCTION public.idempotency_key_work_is_open(k idempotency_keys)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT k.state = 'in_flight' OR k.unresolved OR CASE k.resource_type
        WHEN 'payment_attempt' THEN EXISTS (
            SELECT 1 FROM payment_attempts a
            WHERE a.merchant_id = k.merchant_id AND a.id = k.resource_id
              AND a.status IN ('created', 'pending', 'authorized'))
        WHEN 'refund' THEN EXISTS (
            SELECT 1 FROM refunds r
            WHERE r.merchant_id = k.merchant_id AND r.id = k.resource_id
              AND r.status IN ('created', 'pending'))
        WHEN 'hold_operation' THEN EXISTS (
            SELECT 1 FROM hold_operations o
            WHERE o.merchant_id = k.merchant_id AND o.id = k.resource_id
              AND o.status IN ('created', 'pending'))
        WHEN 'dispute_action' THEN EXISTS (
            SELECT 1 FROM dispute_actions d
            WHERE d.merchant_id = k.merchant_id AND d.id = k.resource_id
              AND d.status = 'pending')
        ELSE false END
$function$;

CREATE OR REPLACE FUNCTION public.idempotency_keys_guard_life()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF idempotency_key_work_is_open(OLD) THEN
        RAISE EXCEPTION 'idempotency key % of merchant % cannot be % while the work it made is open',
                OLD.key, OLD.merchant_id, CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'expired' END
            USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_open_work_kept';
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF idempotency_key_made_money_move(OLD) AND (OLD.state <> 'expired' OR OLD.expires_at > now()) THEN
            RAISE EXCEPTION 'idempotency key % of merchant % made a payment or refund: it is retired (expired) and deleted only at the end of its horizon',
                    OLD.key, OLD.merchant_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_retired_before_deleted';
        END IF;
        RETURN OLD;
    END IF;
    -- An update that retires a key, or touches a retired one.
    IF OLD.state = 'expired' THEN
        RAISE EXCEPTION 'idempotency key % of merchant % is expired: it is never reused, only deleted',
                OLD.key, OLD.merchant_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_expired_is_final';
    END IF;
    IF OLD.state <> 'completed' OR NOT idempotency_key_made_money_move(OLD)
       OR NEW.merchant_id <> OLD.merchant_id OR NEW.key <> OLD.key
       OR NEW.resource_type IS DISTINCT FROM OLD.resource_type
       OR NEW.resource_id IS DISTINCT FROM OLD.resource_id THEN
        RAISE EXCEPTION 'idempotency key % of merchant % cannot be retired: only a completed key that made a payment or refund is, and it keeps naming what it made',
                OLD.key, OLD.merchant_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'idempotency_keys_retired_keeps_resource';
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.late_approvals_emit_event()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM events_emit(NEW.merchant_id,
        CASE NEW.status WHEN 'undoing' THEN 'late_approval.detected'
                        ELSE 'late_approval.' || NEW.status END,
        NEW.id, NEW.order_id, jsonb_build_object('late_approval', to_jsonb(NEW)));
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.late_approvals_guard_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF OLD.status <> 'undoing' THEN
        RAISE EXCEPTION 'late approval % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_final';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id
       OR NEW.attempt_id <> OLD.attempt_id OR NEW.order_id <> OLD.order_id
       OR NEW.provider <> OLD.provider OR NEW.provider_payment_id <> OLD.provider_payment_id
       OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.approved_as <> OLD.approved_as OR NEW.source <> OLD.source
       OR NEW.detected_at <> OLD.detected_at THEN
        RAISE EXCEPTION 'late approval % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_immutable';
    END IF;
    IF NEW.status <> 'undoing' THEN
        NEW.undone_at := now();
        NEW.next_check_at := NULL;
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.late_approvals_of_a_failure()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM 1 FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.attempt_id AND status = 'failed'
          AND order_id = NEW.order_id AND provider = NEW.provider
          AND amount = NEW.amount AND currency = NEW.currency;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % is not a failed attempt of order % at % for % %',
            NEW.attempt_id, NEW.order_id, NEW.provider, NEW.amount, NEW.currency
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_of_a_failure';
    END IF;
    IF NEW.status <> 'undoing' THEN
        RAISE EXCEPTION 'a late approval starts undoing, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'late_approvals_start_undoing';
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.merchant_events_once()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- 0x6f6e6365 ("once"): the class of these advisory locks (two-int form, apart from the
    -- bigint keys of the migration lock and the others).
    PERFORM pg_advisory_xact_lock(1869508453,
        hashtext(NEW.merchant_id::text || '/' || NEW.resource_id::text || '/' || NEW.type));
    IF EXISTS (SELECT 1 FROM merchant_events e WHERE e.merchant_id = NEW.merchant_id
               AND e.resource_id = NEW.resource_id AND e.type = NEW.type) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "merchant_events_once"'
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'merchant_events_once',
                  TABLE = 'merchant_events',
                  DETAIL = format('Key (merchant_id, resource_id, type)=(%s, %s, %s) already exists.',
                                  NEW.merchant_id, NEW.resource_id, NEW.type);
    END IF;
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION public.orders_checkout_demo_is_fixed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'order % of merchant %: checkout_demo is set when the order is made and never changed',
            OLD.id, OLD.merchant_id
        USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_checkout_demo_fixed';
END;
$function$;

CREATE OR REPLACE FUNCTION public.orders_emit_event()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'order.' || NEW.status, NEW.id, NEW.id,
        jsonb_build_object('order', to_jsonb(NEW), 'payments', COALESCE((
            SELECT jsonb_agg(to_jsonb(a) ORDER BY a.created_at DESC) FROM payment_attempts a
            WHERE a.merchant_id = NEW.merchant_id AND a.order_id = NEW.id), '[]')));
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.orders_guard_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'awaiting_payment' AND NEW.status IN ('processing', 'canceled')) OR
        (OLD.status = 'processing' AND NEW.status IN ('authorized', 'paid', 'awaiting_payment')) OR
        (OLD.status = 'authorized' AND NEW.status IN ('paid', 'awaiting_payment')) OR
        (OLD.status = 'paid' AND NEW.status IN ('partially_refunded', 'refunded')) OR
        (OLD.status = 'partially_refunded' AND NEW.status = 'refunded')
    ) THEN
        RAISE EXCEPTION 'order % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id
       OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency THEN
        RAISE EXCEPTION 'order % is immutable but for its status', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_immutable';
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.payment_attempts_claim_order()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a payment attempt starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_start_created';
    END IF;
    UPDATE orders SET status = 'processing'
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id AND status = 'awaiting_payment'
        RETURNING amount, currency INTO NEW.amount, NEW.currency;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order % is not awaiting payment', NEW.order_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_order_payable';
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.payment_attempts_emit_action()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'payment.requires_action', NEW.id, NEW.order_id,
        jsonb_build_object('payment', to_jsonb(NEW), 'refunds', '[]'::jsonb));
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.payment_attempts_emit_event()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'payment.' || NEW.status, NEW.id, NEW.order_id,
        jsonb_build_object('payment', to_jsonb(NEW), 'refunds', COALESCE((
            SELECT jsonb_agg(to_jsonb(r) ORDER BY r.created_at) FROM refunds r
            WHERE r.merchant_id = NEW.merchant_id AND r.payment_id = NEW.id), '[]')));
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.payment_attempts_guard_sending()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.sending_until < OLD.sending_until THEN
        RAISE EXCEPTION 'payment attempt %: sending_until only moves forward', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_sending_forward';
    END IF;
    IF NEW.status = 'failed' AND NEW.failure_code = 'provider_no_record'
       AND OLD.status <> 'failed' AND OLD.sending_until >= now() THEN
        RAISE EXCEPTION 'payment attempt % may still be on its way to the provider: no verdict of no record', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_no_record_after_sending';
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.payment_attempts_guard_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    rest payment_attempts;
BEGIN
    IF NEW.dispute_held IS DISTINCT FROM OLD.dispute_held THEN
        rest := NEW;
        rest.dispute_held := OLD.dispute_held;
        IF pg_trigger_depth() < 2 OR rest IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'the disputes of payment attempt % hold its dispute_held; nothing else sets it', OLD.id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_dispute_held_by_disputes';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.refund_held IS DISTINCT FROM OLD.refund_held THEN
        rest := NEW;
        rest.refund_held := OLD.refund_held;
        IF pg_trigger_depth() < 2 OR OLD.status <> 'succeeded' OR rest IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'the refunds of payment attempt % hold its refund_held; nothing else sets it', OLD.id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_refund_held_by_refunds';
        END IF;
        RETURN NEW;
    END IF;
    IF OLD.status IN ('succeeded', 'failed', 'canceled') THEN
        RAISE EXCEPTION 'payment attempt % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_final';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'created' AND NEW.status IN ('pending', 'authorized', 'succeeded', 'failed', 'canceled')) OR
        (OLD.status = 'pending' AND NEW.status IN ('authorized', 'succeeded', 'failed', 'canceled')) OR
        (OLD.status = 'authorized' AND NEW.status IN ('succeeded', 'canceled'))
    ) THEN
        RAISE EXCEPTION 'payment attempt % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_status_transition';
    END IF;
    IF NEW.status = 'authorized' AND NEW.capture_method <> 'manual' THEN
        RAISE EXCEPTION 'payment attempt % is captured automatically and holds nothing', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id OR NEW.order_id <> OLD.order_id
       OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.payment_method <> OLD.payment_method OR NEW.provider <> OLD.provider
       OR NEW.provider_idempotency_key <> OLD.provider_idempotency_key
       OR NEW.capture_method <> OLD.capture_method
       OR NEW.return_url IS DISTINCT FROM OLD.return_url
       OR NEW.created_at <> OLD.created_at
       OR (OLD.provider_payment_id IS NOT NULL
           AND NEW.provider_payment_id IS DISTINCT FROM OLD.provider_payment_id)
       OR (NEW.amount_captured IS DISTINCT FROM OLD.amount_captured
           AND NOT (OLD.status = 'authorized' AND NEW.status = 'succeeded')) THEN
        RAISE EXCEPTION 'payment attempt % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_immutable';
    END IF;
    IF OLD.status = 'authorized' AND NEW.status = 'succeeded' AND NEW.amount_captured IS NULL THEN
        NEW.amount_captured := COALESCE((
            SELECT o.amount FROM hold_operations o
            WHERE o.merchant_id = OLD.merchant_id AND o.payment_id = OLD.id
              AND o.kind = 'capture' AND o.status <> 'failed'), OLD.amount);
    END IF;
    -- A release payorch asked for says why, whoever tells of it first (the provider's webhook
    -- often arrives before the void's own answer).
    IF NEW.status = 'canceled' THEN
        NEW.cancellation_reason := COALESCE((
            SELECT o.reason FROM hold_operations o
            WHERE o.merchant_id = OLD.merchant_id AND o.payment_id = OLD.id
              AND o.kind = 'void' AND o.status <> 'failed'), NEW.cancellation_reason);
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('succeeded', 'failed', 'canceled') THEN
        NEW.finished_at := now();
        NEW.next_check_at := NULL;
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.payment_attempts_retry_follows_failure()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM 1 FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.retry_of
          AND order_id = NEW.order_id AND status = 'failed';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % retries %, which is not a failed attempt of its order',
            NEW.id, NEW.retry_of
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_retry_follows_failure';
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.payment_attempts_settle_order()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE orders
        SET status = CASE NEW.status WHEN 'succeeded' THEN 'paid'
                                     WHEN 'authorized' THEN 'authorized'
                                     ELSE 'awaiting_payment' END
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id
          AND status IN ('processing', 'authorized');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order % of payment attempt % is not processing', NEW.order_id, NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payment_attempts_order_processing';
    END IF;
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.provider_webhooks_once()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- 0x77686b73 ("whks"): the class of these advisory locks (two-int form, apart from the
    -- bigint keys of the migration lock and the others, and the events' "once").
    PERFORM pg_advisory_xact_lock(2003332979,
        hashtext(NEW.provider || '/' || NEW.provider_event_id));
    IF EXISTS (SELECT 1 FROM provider_webhooks w WHERE w.provider = NEW.provider
               AND w.provider_event_id = NEW.provider_event_id AND w.id <> NEW.id) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION public.refunds_emit_event()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM events_emit(NEW.merchant_id, 'refund.' || NEW.status, NEW.id, NEW.order_id,
        jsonb_build_object('refund', to_jsonb(NEW)));
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.refunds_guard_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF OLD.status IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'refund % is % and final', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_final';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'created' AND NEW.status IN ('pending', 'succeeded', 'failed')) OR
        (OLD.status = 'pending' AND NEW.status IN ('succeeded', 'failed'))
    ) THEN
        RAISE EXCEPTION 'refund % cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_status_transition';
    END IF;
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.id <> OLD.id OR NEW.payment_id <> OLD.payment_id
       OR NEW.order_id <> OLD.order_id OR NEW.amount <> OLD.amount OR NEW.currency <> OLD.currency
       OR NEW.provider <> OLD.provider
       OR NEW.provider_idempotency_key <> OLD.provider_idempotency_key
       OR NEW.created_at <> OLD.created_at
       OR (OLD.provider_refund_id IS NOT NULL
           AND NEW.provider_refund_id IS DISTINCT FROM OLD.provider_refund_id) THEN
        RAISE EXCEPTION 'refund % may change only its status and what the provider said', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_immutable';
    END IF;
    NEW.updated_at := now();
    IF NEW.status IN ('succeeded', 'failed') THEN
        NEW.finished_at := now();
        NEW.next_check_at := NULL;
    END IF;
    IF NEW.status = 'failed' THEN
        UPDATE payment_attempts SET refund_held = refund_held - OLD.amount
            WHERE merchant_id = OLD.merchant_id AND id = OLD.payment_id;
    END IF;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.refunds_hold_amount()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    left_to_refund bigint;
BEGIN
    IF NEW.status <> 'created' THEN
        RAISE EXCEPTION 'a refund starts as created, not %', NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_start_created';
    END IF;
    SELECT COALESCE(amount_captured, amount) - refund_held - dispute_held INTO left_to_refund
        FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id AND status = 'succeeded'
        FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment attempt % is not succeeded', NEW.payment_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_payment_refundable';
    END IF;
    IF NEW.amount IS NULL AND left_to_refund > 0 THEN
        NEW.amount := left_to_refund;
    END IF;
    IF NEW.amount IS NULL OR NEW.amount > left_to_refund THEN
        RAISE EXCEPTION 'payment attempt % has % left to refund', NEW.payment_id, greatest(left_to_refund, 0)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'refunds_within_payment';
    END IF;
    UPDATE payment_attempts SET refund_held = refund_held + NEW.amount
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id
        RETURNING currency, order_id INTO NEW.currency, NEW.order_id;
    RETURN NEW;
END;
$function$;

CREATE OR REPLACE FUNCTION public.refunds_settle_order()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    refunded bigint;
    paid bigint;
BEGIN
    SELECT COALESCE(sum(amount), 0) INTO refunded FROM refunds
        WHERE merchant_id = NEW.merchant_id AND payment_id = NEW.payment_id AND status = 'succeeded';
    SELECT COALESCE(amount_captured, amount) INTO paid FROM payment_attempts
        WHERE merchant_id = NEW.merchant_id AND id = NEW.payment_id;
    UPDATE orders
        SET status = CASE WHEN refunded >= paid THEN 'refunded' ELSE 'partially_refunded' END
        WHERE merchant_id = NEW.merchant_id AND id = NEW.order_id
          AND status IN ('paid', 'partially_refunded');
    RETURN NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION public.support_actions_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'support_actions is append-only: % refused', TG_OP
        USING ERRCODE = 'check_violation', CONSTRAINT = 'support_actions_append_only';
END;
$function$;

CREATE OR REPLACE FUNCTION public.uuid_v7()
 RETURNS uuid
 LANGUAGE sql
AS $function$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$function$;

CREATE OR REPLACE FUNCTION public.webhook_endpoints_limit()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM 1 FROM merchants WHERE id = NEW.merchant_id FOR NO KEY UPDATE;
    IF (SELECT count(*) FROM webhook_endpoints
        WHERE merchant_id = NEW.merchant_id AND deleted_at IS NULL) >= 16 THEN
        RAISE EXCEPTION 'merchant % has 16 webhook endpoints already', NEW.merchant_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_limit';
    END IF;
    RETURN NEW;
END;
$function$;
