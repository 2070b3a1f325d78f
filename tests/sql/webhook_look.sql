WITH owner AS MATERIALIZED (
    SELECT a.id, to_jsonb(a) AS row FROM payment_attempts a
    WHERE a.provider = $1 AND a.provider_payment_id = $4)
SELECT EXISTS (SELECT 1 FROM provider_webhooks
               WHERE provider = $1 AND provider_event_id = $2) AS recorded,
       coalesce((SELECT to_jsonb(a) FROM payment_attempts a WHERE a.id = $3),
                (SELECT row FROM owner)) AS attempt,
       (SELECT id FROM owner) AS charge_owner
