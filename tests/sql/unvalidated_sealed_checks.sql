SELECT conname::text AS conname FROM pg_constraint
WHERE conrelid = 'webhook_endpoints'::regclass AND conname = ANY($1)
  AND NOT convalidated
