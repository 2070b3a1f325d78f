WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
made_order AS (
    UPDATE orders SET metadata = (metadata || $6) - $7
    WHERE merchant_id = $2 AND id = $5 AND EXISTS (SELECT 1 FROM go)
      AND (SELECT count(*) FROM jsonb_object_keys((metadata || $6) - $7)) <= 50
    RETURNING *),
done AS (SELECT id AS resource_id FROM made_order),
recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT $2, $3, $8, $9, $10,
        now() + $11 * interval '1 millisecond',
        $12, $13, done.resource_id, $14, $15,
        now() + $16 * interval '1 millisecond'
    FROM done RETURNING set_config('payorch.request', $17, true))
SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded,
       found.operation, found.fingerprint, found.state, found.locked_until,
       found.response_status, found.resource_type, found.resource_id,
       found.expires_at, found.unresolved,
       (SELECT resource_id FROM done) AS made,
       jsonb_build_object('order', (SELECT to_jsonb(m) FROM made_order m)) AS fresh,
       CASE WHEN found.state <> 'in_flight' OR found.locked_until < now()
            THEN jsonb_build_object('order', (
    SELECT to_jsonb(o) FROM orders o
    WHERE o.merchant_id = $2 AND o.id = found.resource_id)) END AS current
FROM lock LEFT JOIN found ON true
