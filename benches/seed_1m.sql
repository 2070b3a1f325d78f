-- The 1M-row database of docs/BENCHMARKS.md: 1,000,000 paid orders, their succeeded attempts and
-- completed checkout keys, and 2,000,000 timeline rows, for the merchant whose uuid is given as
-- `psql -v mer=<uuid> -f benches/seed_1m.sql` (run as a superuser: the rows are written with
-- triggers off, which `session_replication_role` needs). Spread over the last two days.
-- Ids shaped like payorch's own UUIDv7: time-ordered, a millisecond timestamp first.
CREATE FUNCTION pg_temp.uuid7(ts timestamptz) RETURNS uuid LANGUAGE sql AS $$
  SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0')
          || substr(replace(gen_random_uuid()::text, '-', ''), 13))::uuid $$;
SET session_replication_role = replica;
INSERT INTO orders (merchant_id, id, amount, currency, status, created_at, updated_at)
SELECT :'mer'::uuid, pg_temp.uuid7(t), 1000, 'usd', 'paid', t, t
FROM (SELECT now() - interval '2 days' + n * interval '100 ms' AS t FROM generate_series(1, 1000000) n) s;
INSERT INTO payment_attempts (merchant_id, id, order_id, status, amount, currency, payment_method, provider,
    provider_idempotency_key, provider_payment_id, idempotency_key, next_check_at, created_at, updated_at, finished_at)
SELECT merchant_id, pg_temp.uuid7(created_at), id, 'succeeded', amount, currency, 'pm_card_visa', 'stripe',
    'payorch_seed_' || id, 'pi_seed_' || id, 'seed-' || id, NULL, created_at, created_at, created_at
FROM orders WHERE merchant_id = :'mer'::uuid;
INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source, created_at)
SELECT merchant_id, id, NULL, 'created', 'api', created_at FROM payment_attempts WHERE provider_idempotency_key LIKE 'payorch_seed_%';
INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source, created_at)
SELECT merchant_id, id, 'created', 'succeeded', 'provider_response', created_at FROM payment_attempts WHERE provider_idempotency_key LIKE 'payorch_seed_%';
INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state, recovery_point, resource_type,
    resource_id, response_status, unresolved, created_at, updated_at, expires_at)
SELECT merchant_id, idempotency_key, 'checkout', sha256(idempotency_key::bytea), 'completed', 'finished',
    'payment_attempt', id, 201, false, created_at, created_at, now() + interval '3 days'
FROM payment_attempts WHERE provider_idempotency_key LIKE 'payorch_seed_%';
SET session_replication_role = origin;
VACUUM ANALYZE;
CHECKPOINT;
SELECT (SELECT count(*) FROM orders) AS orders, (SELECT count(*) FROM payment_attempts) AS attempts,
       (SELECT count(*) FROM idempotency_keys) AS keys, (SELECT count(*) FROM attempt_transitions) AS events;
