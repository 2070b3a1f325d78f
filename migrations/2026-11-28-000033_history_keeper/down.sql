-- Back to 000032: the keeper's functions gone (the months it made stay; 000032's down.sql
-- takes them back into single tables).
DROP FUNCTION history_drop_expired(text, interval);
DROP FUNCTION history_create_ahead(text, integer);
DROP FUNCTION history_partitions();
