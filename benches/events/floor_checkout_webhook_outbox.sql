\set m random(1, 1000)
BEGIN;
INSERT INTO ik(merchant_id, key, fp, status, expires_at) VALUES (:m, gen_random_uuid()::text, '\x00', 'in_progress', now() + interval '1 day') RETURNING key AS k \gset
WITH o AS (INSERT INTO ord VALUES (gen_random_uuid(), :m, 1000, 'usd', 'processing') RETURNING id)
INSERT INTO att(id, order_id, status, pkey) SELECT gen_random_uuid(), id, 'created', gen_random_uuid()::text FROM o RETURNING id AS a \gset
INSERT INTO ev(att_id, from_s, to_s) VALUES (':a'::uuid, null, 'created');
COMMIT;
BEGIN;
UPDATE att SET status='succeeded', updated_at=now() WHERE id = ':a'::uuid AND status IN ('created','pending');
UPDATE ord SET status='paid' WHERE id = (SELECT order_id FROM att WHERE id = ':a'::uuid);
UPDATE ik SET status='completed', resp_code=201, resp_body='{"id":"x","status":"succeeded"}' WHERE merchant_id=:m AND key=':k';
INSERT INTO ev(att_id, from_s, to_s) VALUES (':a'::uuid, 'created', 'succeeded');
INSERT INTO calls(att_id, op, http_status, outcome) VALUES (':a'::uuid, 'charge', 200, 'succeeded');
WITH e AS (INSERT INTO obx_event (id, merchant_id, type, resource_id, order_id, snapshot, request)
    SELECT gen_random_uuid(), :m, t.type, t.resource, o.order_id, t.snapshot, '{"id":"r","idempotency_key":"k"}'
    FROM (SELECT order_id FROM att WHERE id = ':a'::uuid) o,
    LATERAL (VALUES ('payment.succeeded', ':a'::uuid, '{"payment":{"id":"x","status":"succeeded","amount":1000,"currency":"usd"},"refunds":[]}'::jsonb),
                    ('order.paid', o.order_id, '{"order":{"id":"x","status":"paid","amount":1000,"currency":"usd"},"payments":[]}'::jsonb)) t(type, resource, snapshot)
    RETURNING id)
INSERT INTO obx_delivery (event_id, endpoint_id) SELECT id, '00000000-0000-0000-0000-000000000001' FROM e;
COMMIT;
BEGIN;
INSERT INTO wh(provider, event_id, att_id, kind, payload, outcome) VALUES ('stripe', 'evt_' || md5(':a'), ':a'::uuid, 'payment_intent.succeeded', '{"id":"evt","type":"payment_intent.succeeded","data":{"object":{"id":"pi","amount":1000,"currency":"usd","status":"succeeded"}}}', 'already') ON CONFLICT DO NOTHING;
UPDATE att SET updated_at=updated_at WHERE id = ':a'::uuid AND status IN ('created','pending');
COMMIT;
