-- Which orders the anonymous checkout demo made (README, "The checkout page"). The demo's
-- routes take no API key, so they may act only on these: never on an order its merchant made
-- through the API, whose metadata and payment are that merchant's business alone. Set when
-- the order is made and never changed. A constant default: adding the column rewrites nothing.

ALTER TABLE orders ADD COLUMN checkout_demo boolean NOT NULL DEFAULT false;
-- The runtime role's table-wide grant (migration 2026-11-27-000016_runtime_role) covers the
-- new column; granted again by name so the rights do not rest on that alone.
GRANT SELECT, INSERT, UPDATE, DELETE ON orders TO payorch_runtime;

CREATE FUNCTION orders_checkout_demo_is_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'order % of merchant %: checkout_demo is set when the order is made and never changed',
            OLD.id, OLD.merchant_id
        USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_checkout_demo_fixed';
END;
$$;

CREATE TRIGGER orders_checkout_demo_fixed BEFORE UPDATE OF checkout_demo ON orders
    FOR EACH ROW WHEN (OLD.checkout_demo IS DISTINCT FROM NEW.checkout_demo)
    EXECUTE FUNCTION orders_checkout_demo_is_fixed();
