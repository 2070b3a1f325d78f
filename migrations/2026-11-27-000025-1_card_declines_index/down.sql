DROP INDEX CONCURRENTLY IF EXISTS payment_attempts_card_declines;
