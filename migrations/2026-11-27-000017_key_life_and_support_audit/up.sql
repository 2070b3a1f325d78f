-- Keys with a life, support roles, and the audit of what support staff change (README,
-- "Commands" and "Support"; docs/PRODUCTION.md, section 3).

-- A support key is read-only (`read`) or may act (`operate`: void, reconcile, redeliver,
-- routing); a merchant key has no support role.
ALTER TABLE api_keys
    ADD COLUMN support_role    text CHECK (support_role IN ('read', 'operate')),
    -- When a rotated key stops working; an expired key is refused exactly as a revoked one.
    ADD COLUMN expires_at      timestamptz,
    -- Written at most about once a minute per key per replica, off the request path.
    ADD COLUMN last_used_at    timestamptz,
    -- The key this one replaced by a rotation.
    ADD COLUMN rotated_from    uuid REFERENCES api_keys (id),
    -- Set by `api_keys_life` whenever `revoked_at` or `expires_at` changes: when (for people)
    -- and by which transaction (for the replicas' poll, which evicts a key it remembers;
    -- README, "Authentication"). The poll goes by the transaction, not the time: a time is
    -- stamped before the commit, which may come much later, and the poll would have passed it.
    ADD COLUMN life_changed_at timestamptz,
    ADD COLUMN life_changed_xid xid8;

-- Support keys made before roles could do everything: they keep doing it, so that an upgrade
-- breaks nobody. A key made from now on is read-only unless it is given `operate`.
UPDATE api_keys SET support_role = 'operate' WHERE role = 'support';

ALTER TABLE api_keys ADD CONSTRAINT api_keys_support_role
    CHECK ((role = 'support') = (support_role IS NOT NULL));

-- The replicas' poll: keys whose life was changed by a transaction at or after a snapshot's
-- xmin, a few only.
CREATE INDEX api_keys_life_changed_xid ON api_keys (life_changed_xid)
    WHERE life_changed_xid IS NOT NULL;

-- A key's secret, role, support role and merchant never change, a revocation is for good, and
-- any change of its life is stamped for the replicas' poll, also when made by hand in SQL.
-- The support role is part of the identity: replicas remember a key's caller, role included,
-- and learn only of changes to its life, so another role is another key (made, and the old
-- one revoked).
CREATE FUNCTION api_keys_life() RETURNS trigger LANGUAGE plpgsql AS $$
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
$$;

CREATE TRIGGER api_keys_life BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_life();

-- Every write a support key made: who (the key, its name and role at the time), what, to
-- which resource, the state before and after, and when. Append-only.
--
-- A redelivery or a routing change is one row, written in the transaction that makes it. A
-- provider-driven action (a reconcile, a void) cannot share a transaction with the provider,
-- so it is two rows: the ask, `after` = {"outcome": "asked"}, written before anything is done
-- (if it cannot be written, nothing is done), and the outcome, naming the ask in `answers`,
-- once the action has answered. An ask with no outcome is an action whose process stopped
-- before it could say what happened: the story shows it as "asked, outcome unknown".
CREATE TABLE support_actions (
    id           uuid        PRIMARY KEY,
    key_id       uuid        NOT NULL REFERENCES api_keys (id),
    key_name     text        NOT NULL CHECK (length(key_name) BETWEEN 1 AND 200),
    support_role text        NOT NULL CHECK (support_role IN ('read', 'operate')),
    action       text        NOT NULL CHECK (action IN
        ('reconcile_payment', 'void_payment', 'reconcile_refund', 'redeliver_event',
         'change_routing')),
    target_kind  text        NOT NULL CHECK (target_kind IN ('payment', 'refund', 'event', 'merchant')),
    target_id    uuid        NOT NULL,
    merchant_id  uuid        NOT NULL REFERENCES merchants (id),
    -- The order the target belongs to, so the payment's story finds the action; none for
    -- a merchant's routing.
    order_id     uuid,
    before       jsonb,
    after        jsonb,
    answers      uuid,
    at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT support_actions_target CHECK ((target_kind = 'merchant') = (order_id IS NULL)),
    CONSTRAINT support_actions_action_target CHECK (
        CASE action
            WHEN 'reconcile_payment' THEN target_kind = 'payment'
            WHEN 'void_payment' THEN target_kind = 'payment'
            WHEN 'reconcile_refund' THEN target_kind = 'refund'
            WHEN 'redeliver_event' THEN target_kind = 'event'
            WHEN 'change_routing' THEN target_kind = 'merchant'
        END),
    -- A provider-driven action's row is its ask or an outcome naming the ask; any other
    -- action's row is neither.
    CONSTRAINT support_actions_asked_first CHECK (
        CASE WHEN action IN ('reconcile_payment', 'void_payment', 'reconcile_refund')
            THEN (after IS NOT DISTINCT FROM '{"outcome": "asked"}') = (answers IS NULL)
            ELSE answers IS NULL AND after IS DISTINCT FROM '{"outcome": "asked"}'
        END),
    -- An outcome answers one ask of the same key, action and target, and an ask has at most
    -- one outcome.
    CONSTRAINT support_actions_one_outcome UNIQUE (answers),
    CONSTRAINT support_actions_askable UNIQUE (id, key_id, action, target_id),
    CONSTRAINT support_actions_answers FOREIGN KEY (answers, key_id, action, target_id)
        REFERENCES support_actions (id, key_id, action, target_id)
);

CREATE INDEX support_actions_order ON support_actions (merchant_id, order_id, at)
    WHERE order_id IS NOT NULL;
CREATE INDEX support_actions_key ON support_actions (key_id, at);

-- The audit is kept as written: no row is changed or removed, not even by payorch itself.
CREATE FUNCTION support_actions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'support_actions is append-only: % refused', TG_OP
        USING ERRCODE = 'check_violation', CONSTRAINT = 'support_actions_append_only';
END;
$$;

CREATE TRIGGER support_actions_append_only BEFORE UPDATE OR DELETE ON support_actions
    FOR EACH ROW EXECUTE FUNCTION support_actions_append_only();
CREATE TRIGGER support_actions_no_truncate BEFORE TRUNCATE ON support_actions
    FOR EACH STATEMENT EXECUTE FUNCTION support_actions_append_only();

-- And the service's own role may only add to it (docs/PRODUCTION.md, section 2). Granted
-- here, not left to migration 16's default privileges, which hold only for tables made by the
-- role that ran it: migrated by another owner, support writes would fail after their action.
GRANT SELECT, INSERT ON support_actions TO payorch_runtime;
REVOKE UPDATE, DELETE, TRUNCATE ON support_actions FROM payorch_runtime;
