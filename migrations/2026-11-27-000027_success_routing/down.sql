ALTER TABLE merchant_routing DROP COLUMN strategy;
