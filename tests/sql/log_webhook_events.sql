INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome,
    detail, merchant_id, attempt_id, payload, provider_created_at, payload_kept)
SELECT *, true FROM unnest($1::uuid[], $2::text[], $3::text[],
    $4::text[], $5::text[], $6::text[], $7::uuid[],
    $8::uuid[], $9::jsonb[], $10::timestamptz[])
ON CONFLICT (provider, provider_event_id, provider_created_at) DO NOTHING
RETURNING id
