-- How often each provider event was delivered (README, "Support"): the first delivery is
-- recorded with what it did, and every later copy adds one here and changes nothing else.
CREATE DOMAIN delivery_count AS integer
    CONSTRAINT delivery_count_positive CHECK (VALUE >= 1);
ALTER TABLE webhook_events ADD COLUMN deliveries delivery_count NOT NULL DEFAULT 1;
