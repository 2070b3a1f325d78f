SELECT partition_name, dropped, reason FROM history_drop_expired($1, $2)
