SELECT (now.xmin::text)::bigint AS xmin, k.secret_sha256 AS hash,
       (k.life_changed_xid::text)::bigint AS xid
FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) AS now
LEFT JOIN api_keys AS k
  ON k.life_changed_xid >= COALESCE(($1::text)::xid8, now.xmin)
