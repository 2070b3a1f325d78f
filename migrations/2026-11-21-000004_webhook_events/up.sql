-- Provider webhook events, one row per provider event however often it is delivered.
-- Looked up by the provider's event id before the merchant is known, so the table is keyed
-- by provider event, not by merchant; merchant_id and attempt_id say which attempt (if any)
-- the event was about.

CREATE TABLE webhook_events (
    id                 uuid        PRIMARY KEY,
    provider           text        NOT NULL,
    provider_event_id  text        NOT NULL CHECK (length(provider_event_id) BETWEEN 1 AND 255),
    event_type         text        NOT NULL,
    -- What the event did: moved the attempt (or told what it already was, while open),
    -- arrived after the attempt had moved on, contradicted its final status, named no
    -- attempt we know, or was of a type payorch does not act on.
    outcome            text        NOT NULL
                       CHECK (outcome IN ('applied', 'stale', 'conflict', 'unknown_attempt', 'ignored')),
    detail             text,
    merchant_id        uuid,
    attempt_id         uuid,
    payload            jsonb       NOT NULL,
    provider_created_at timestamptz,
    received_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_events_provider_event_key UNIQUE (provider, provider_event_id),
    CONSTRAINT webhook_events_attempt_fk FOREIGN KEY (merchant_id, attempt_id)
        REFERENCES payment_attempts (merchant_id, id),
    -- Every outcome but these two is about a known attempt; an unknown one names none.
    CONSTRAINT webhook_events_attempt_known
        CHECK (outcome IN ('unknown_attempt', 'ignored') OR attempt_id IS NOT NULL),
    CONSTRAINT webhook_events_unknown_has_no_attempt
        CHECK (outcome <> 'unknown_attempt' OR attempt_id IS NULL)
);

CREATE INDEX webhook_events_attempt ON webhook_events (merchant_id, attempt_id, received_at)
    WHERE attempt_id IS NOT NULL;
