ALTER TABLE webhook_events DROP COLUMN deliveries;
DROP DOMAIN delivery_count;
