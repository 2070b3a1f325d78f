DROP TRIGGER support_actions_no_truncate ON support_actions;
DROP TRIGGER support_actions_append_only ON support_actions;
DROP FUNCTION support_actions_append_only();
DROP TABLE support_actions;
DROP TRIGGER api_keys_life ON api_keys;
DROP FUNCTION api_keys_life();
DROP INDEX api_keys_life_changed_xid;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_support_role;
ALTER TABLE api_keys
    DROP COLUMN life_changed_xid,
    DROP COLUMN life_changed_at,
    DROP COLUMN rotated_from,
    DROP COLUMN last_used_at,
    DROP COLUMN expires_at,
    DROP COLUMN support_role;
