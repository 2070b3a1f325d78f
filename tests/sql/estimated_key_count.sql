SELECT coalesce(n_live_tup, 0)::bigint AS rows FROM pg_stat_user_tables
WHERE relname = 'idempotency_keys'
