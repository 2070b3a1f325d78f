UPDATE provider_webhooks w SET payload = k.payload, payload_kept = true
FROM unnest($1::uuid[], $2::jsonb[]) AS k(id, payload) WHERE w.id = k.id
