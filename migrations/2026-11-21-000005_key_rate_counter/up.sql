-- The --max-new-keys-per-minute cap, counted in O(1): a counter per merchant and minute,
-- bumped in the claim's own transaction (so a refused or rolled-back claim does not count).
-- Spread over a few shard rows so concurrent claims of one merchant rarely wait on each
-- other's row lock. UNLOGGED: a crash forgets at most the current minute's counts.
CREATE UNLOGGED TABLE idempotency_key_rate (
    merchant_id  uuid        NOT NULL,
    minute       timestamptz NOT NULL,
    shard        smallint    NOT NULL CHECK (shard >= 0),
    opened       integer     NOT NULL CHECK (opened > 0),
    PRIMARY KEY (merchant_id, minute, shard)
);

-- The cap used to count recent key rows through this index; nothing reads it now, and every
-- new key paid for its upkeep.
DROP INDEX idempotency_keys_recent;
