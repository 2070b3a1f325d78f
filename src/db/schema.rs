// The tables as diesel sees them; kept by hand in step with `migrations/`.

diesel::table! {
    merchants (id) {
        id -> Uuid,
        name -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Uuid,
        secret_sha256 -> Bytea,
        role -> Text,
        merchant_id -> Nullable<Uuid>,
        name -> Text,
        created_at -> Timestamptz,
        revoked_at -> Nullable<Timestamptz>,
        support_role -> Nullable<Text>,
        expires_at -> Nullable<Timestamptz>,
        last_used_at -> Nullable<Timestamptz>,
        rotated_from -> Nullable<Uuid>,
        life_changed_at -> Nullable<Timestamptz>,
        // life_changed_xid (xid8) is left out: diesel has no xid8 type, and only the key
        // poll reads it, in its own SQL (accounts::sync).
    }
}

diesel::table! {
    support_actions (id) {
        id -> Uuid,
        key_id -> Uuid,
        key_name -> Text,
        support_role -> Text,
        action -> Text,
        target_kind -> Text,
        target_id -> Uuid,
        merchant_id -> Uuid,
        order_id -> Nullable<Uuid>,
        before -> Nullable<Jsonb>,
        after -> Nullable<Jsonb>,
        answers -> Nullable<Uuid>,
        at -> Timestamptz,
    }
}

diesel::joinable!(api_keys -> merchants (merchant_id));

diesel::table! {
    orders (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Uuid,
        amount -> Int8,
        currency -> Text,
        status -> Text,
        merchant_reference -> Nullable<Text>,
        description -> Nullable<Text>,
        metadata -> Jsonb,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        checkout_demo -> Bool,
    }
}

diesel::table! {
    idempotency_keys (merchant_id, key) {
        merchant_id -> Uuid,
        key -> Text,
        operation -> Text,
        fingerprint -> Bytea,
        state -> Text,
        locked_until -> Nullable<Timestamptz>,
        recovery_point -> Text,
        resource_type -> Nullable<Text>,
        resource_id -> Nullable<Uuid>,
        response_status -> Nullable<Int2>,
        response_body -> Nullable<Jsonb>,
        unresolved -> Bool,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    payment_attempts (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Uuid,
        order_id -> Uuid,
        status -> Text,
        amount -> Int8,
        currency -> Text,
        payment_method -> Text,
        provider -> Text,
        provider_idempotency_key -> Text,
        provider_payment_id -> Nullable<Text>,
        failure_code -> Nullable<Text>,
        failure_message -> Nullable<Text>,
        idempotency_key -> Nullable<Text>,
        next_check_at -> Nullable<Timestamptz>,
        checks -> Int4,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
        refund_held -> Int8,
        sending_until -> Timestamptz,
        capture_method -> Text,
        amount_captured -> Nullable<Int8>,
        next_action -> Nullable<Jsonb>,
        return_url -> Nullable<Text>,
        authorized_until -> Nullable<Timestamptz>,
        cancellation_reason -> Nullable<Text>,
        failure_class -> Nullable<Text>,
        provider_failure_code -> Nullable<Text>,
        retry_of -> Nullable<Uuid>,
        retry_reason -> Nullable<Text>,
        three_d_secure -> Text,
        dispute_held -> Int8,
    }
}

diesel::table! {
    merchant_routing (merchant_id) {
        merchant_id -> Uuid,
        providers -> Array<Text>,
        currencies -> Jsonb,
        updated_at -> Timestamptz,
        updated_by -> Text,
        retry_soft_declines -> Bool,
        retry_after_three_d_secure -> Bool,
        max_attempts -> Int2,
        strategy -> Text,
    }
}

diesel::table! {
    attempt_transitions (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Int8,
        attempt_id -> Uuid,
        from_status -> Nullable<Text>,
        to_status -> Text,
        source -> Text,
        detail -> Nullable<Text>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    provider_calls (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Int8,
        attempt_id -> Uuid,
        operation -> Text,
        source -> Text,
        outcome -> Text,
        http_status -> Nullable<Int2>,
        latency_ms -> Int4,
        detail -> Nullable<Text>,
        created_at -> Timestamptz,
        refund_id -> Nullable<Uuid>,
        hold_operation_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    hold_operations (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Uuid,
        payment_id -> Uuid,
        order_id -> Uuid,
        kind -> Text,
        status -> Text,
        amount -> Nullable<Int8>,
        currency -> Text,
        provider -> Text,
        provider_idempotency_key -> Text,
        failure_code -> Nullable<Text>,
        failure_message -> Nullable<Text>,
        source -> Text,
        reason -> Nullable<Text>,
        idempotency_key -> Nullable<Text>,
        next_check_at -> Nullable<Timestamptz>,
        checks -> Int4,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    refunds (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Uuid,
        payment_id -> Uuid,
        order_id -> Uuid,
        status -> Text,
        amount -> Int8,
        currency -> Text,
        reason -> Nullable<Text>,
        provider -> Text,
        provider_idempotency_key -> Text,
        provider_refund_id -> Nullable<Text>,
        failure_code -> Nullable<Text>,
        failure_message -> Nullable<Text>,
        idempotency_key -> Nullable<Text>,
        next_check_at -> Nullable<Timestamptz>,
        checks -> Int4,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    refund_transitions (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Int8,
        refund_id -> Uuid,
        from_status -> Nullable<Text>,
        to_status -> Text,
        source -> Text,
        detail -> Nullable<Text>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    provider_webhooks (id) {
        id -> Uuid,
        provider -> Text,
        provider_event_id -> Text,
        event_type -> Text,
        outcome -> Text,
        detail -> Nullable<Text>,
        merchant_id -> Nullable<Uuid>,
        attempt_id -> Nullable<Uuid>,
        payload -> Jsonb,
        provider_created_at -> Nullable<Timestamptz>,
        received_at -> Timestamptz,
        deliveries -> Integer,
        payload_kept -> Bool,
    }
}

diesel::joinable!(orders -> merchants (merchant_id));
diesel::joinable!(idempotency_keys -> merchants (merchant_id));
diesel::allow_tables_to_appear_in_same_query!(
    merchants,
    api_keys,
    orders,
    idempotency_keys,
    payment_attempts,
    attempt_transitions,
    provider_calls,
    refunds,
    refund_transitions,
    provider_webhooks,
    hold_operations
);

diesel::table! {
    merchant_events (id) {
        id -> Uuid,
        seq -> Int8,
        merchant_id -> Uuid,
        #[sql_name = "type"]
        event_type -> Text,
        resource_id -> Uuid,
        order_id -> Uuid,
        snapshot -> Jsonb,
        request -> Nullable<Jsonb>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_endpoints (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Uuid,
        url -> Text,
        description -> Nullable<Text>,
        enabled_events -> Array<Text>,
        secret -> Text,
        previous_secret -> Nullable<Text>,
        previous_secret_until -> Nullable<Timestamptz>,
        status -> Text,
        disabled_reason -> Nullable<Text>,
        failing_since -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        deleted_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    event_deliveries (event_id, endpoint_id) {
        event_id -> Uuid,
        endpoint_id -> Uuid,
        merchant_id -> Uuid,
        state -> Text,
        attempts -> Int4,
        next_attempt_at -> Timestamptz,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    delivery_attempts (id) {
        id -> Int8,
        event_id -> Uuid,
        endpoint_id -> Uuid,
        attempted_at -> Timestamptz,
        http_status -> Nullable<Int2>,
        latency_ms -> Int4,
        error -> Nullable<Text>,
    }
}

diesel::joinable!(event_deliveries -> merchant_events (event_id));
diesel::allow_tables_to_appear_in_same_query!(
    merchant_events,
    webhook_endpoints,
    event_deliveries,
    delivery_attempts
);

diesel::table! {
    late_approvals (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Uuid,
        attempt_id -> Uuid,
        order_id -> Uuid,
        provider -> Text,
        provider_payment_id -> Text,
        amount -> Int8,
        currency -> Text,
        approved_as -> Text,
        source -> Text,
        status -> Text,
        detail -> Nullable<Text>,
        provider_undo_id -> Nullable<Text>,
        next_check_at -> Nullable<Timestamptz>,
        checks -> Int4,
        detected_at -> Timestamptz,
        undone_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    disputes (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Uuid,
        attempt_id -> Uuid,
        order_id -> Uuid,
        provider -> Text,
        provider_dispute_id -> Text,
        provider_payment_id -> Text,
        status -> Text,
        stage -> Text,
        amount -> Int8,
        currency -> Text,
        reason -> Text,
        provider_reason -> Text,
        evidence_due_by -> Nullable<Timestamptz>,
        refunded_before -> Int8,
        overlap -> Int8,
        provider_updated_at -> Timestamptz,
        evidence_submitted_at -> Nullable<Timestamptz>,
        opened_at -> Timestamptz,
        updated_at -> Timestamptz,
        closed_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    dispute_transitions (merchant_id, id) {
        merchant_id -> Uuid,
        id -> Int8,
        dispute_id -> Uuid,
        from_status -> Nullable<Text>,
        to_status -> Text,
        stage -> Text,
        source -> Text,
        detail -> Nullable<Text>,
        created_at -> Timestamptz,
    }
}

diesel::allow_tables_to_appear_in_same_query!(disputes, dispute_transitions, payment_attempts);
