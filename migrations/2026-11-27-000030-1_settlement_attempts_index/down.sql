DROP INDEX CONCURRENTLY IF EXISTS payment_attempts_settled;
