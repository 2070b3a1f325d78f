SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS exists
