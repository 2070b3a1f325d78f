WITH deleted AS (
    UPDATE webhook_endpoints SET deleted_at = now(), updated_at = now()
    WHERE merchant_id = $1 AND id = $2 AND deleted_at IS NULL
    RETURNING *),
canceled AS (
    UPDATE event_deliveries d SET state = 'canceled', updated_at = now()
    FROM deleted
    WHERE d.merchant_id = deleted.merchant_id AND d.endpoint_id = deleted.id
      AND d.state = 'pending'
    RETURNING d.event_id)
SELECT to_jsonb(deleted) - 'secret' - 'previous_secret' AS endpoint FROM deleted
