-- Merchants and the secret keys that act for them (or for support staff).

CREATE TABLE merchants (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Looked up before the merchant is known (by the hash of the presented secret), so this
-- table is exempt from the merchant_id-first shape of merchant data.
CREATE TABLE api_keys (
    id             uuid        PRIMARY KEY,
    secret_sha256  bytea       NOT NULL UNIQUE CHECK (octet_length(secret_sha256) = 32),
    role           text        NOT NULL CHECK (role IN ('merchant', 'support')),
    merchant_id    uuid        REFERENCES merchants (id),
    name           text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz,
    -- A merchant key acts for exactly one merchant; a support key for none.
    CONSTRAINT api_keys_role_merchant CHECK ((role = 'merchant') = (merchant_id IS NOT NULL))
);

CREATE INDEX api_keys_merchant_id ON api_keys (merchant_id) WHERE merchant_id IS NOT NULL;
