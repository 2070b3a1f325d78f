DROP TRIGGER orders_checkout_demo_fixed ON orders;
DROP FUNCTION orders_checkout_demo_is_fixed();
ALTER TABLE orders DROP COLUMN checkout_demo;
