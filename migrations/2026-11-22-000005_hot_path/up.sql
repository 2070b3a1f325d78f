-- The hot path (README, "Performance"): the per-minute cap of new Idempotency-Keys is counted
-- in memory by each replica, which share their counts here once a second. Each replica
-- writes only its own rows, so no request and no replica waits on another's lock.
CREATE TABLE key_quota_counts (
    merchant_id  uuid    NOT NULL REFERENCES merchants (id),
    -- A random id each `serve` process takes at start.
    replica_id   uuid    NOT NULL,
    -- Minutes since the Unix epoch (wall clock, shared by every replica).
    minute       bigint  NOT NULL,
    opened       bigint  NOT NULL CHECK (opened >= 0),
    PRIMARY KEY (merchant_id, replica_id, minute)
);

-- The key table no longer answers "how many keys did this merchant open in the last
-- minute", so this index only cost a write per new key.
DROP INDEX idempotency_keys_recent;
