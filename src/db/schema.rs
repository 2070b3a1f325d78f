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
    }
}

diesel::joinable!(api_keys -> merchants (merchant_id));
diesel::allow_tables_to_appear_in_same_query!(merchants, api_keys);
