DROP TRIGGER provider_webhooks_once ON provider_webhooks;
DROP FUNCTION provider_webhooks_once();
