WITH RECURSIVE pairs AS (
    (SELECT provider, currency FROM payment_attempts
     WHERE (status IN ('succeeded', 'authorized') OR (status = 'failed' AND (failure_class = 'soft' OR failure_code = 'provider_unavailable')))
     ORDER BY provider, currency LIMIT 1)
    UNION ALL
    SELECT next.provider, next.currency FROM pairs
    CROSS JOIN LATERAL (
        SELECT provider, currency FROM payment_attempts
        WHERE (status IN ('succeeded', 'authorized') OR (status = 'failed' AND (failure_class = 'soft' OR failure_code = 'provider_unavailable'))) AND (provider, currency) > (pairs.provider, pairs.currency)
        ORDER BY provider, currency LIMIT 1) AS next
)
SELECT pairs.provider::text AS provider, pairs.currency::text AS currency,
    last.status::text AS status, last.failure_class, last.failure_code::text AS failure_code,
    last.created_at
FROM pairs
CROSS JOIN LATERAL (
    SELECT status, failure_class, failure_code, created_at FROM payment_attempts
    WHERE (status IN ('succeeded', 'authorized') OR (status = 'failed' AND (failure_class = 'soft' OR failure_code = 'provider_unavailable'))) AND provider = pairs.provider AND currency = pairs.currency
      AND created_at > now() - interval '1 hour'
    ORDER BY created_at DESC LIMIT $1) AS last
ORDER BY 1, 2, last.created_at DESC
