-- Settlement reconciliation (docs/operations/reconciliation.md): payorch reads each provider's
-- own record of money moved (Stripe's balance transactions, Adyen's settlement details
-- report), keeps it, and compares it with its attempts, refunds and disputes. Every
-- difference is a finding for a human, with its evidence.
--
-- New tables only: nothing here waits on a lock of a busy table.
SET LOCAL lock_timeout = '5s';

-- What a provider's entry moved: a charge's money in, a refund's out, a dispute's withdrawal
-- and its reinstatement, or anything else the record holds (fees, payouts, corrections),
-- kept but not compared.
CREATE DOMAIN settlement_entry_kind AS text
    CONSTRAINT settlement_entry_kind_known CHECK (VALUE IN
        ('charge', 'refund', 'dispute_withdrawal', 'dispute_reinstatement', 'other'));

-- What a difference between the provider's record and payorch's is
-- (docs/operations/reconciliation.md, "The findings").
CREATE DOMAIN settlement_finding_kind AS text
    CONSTRAINT settlement_finding_kind_known CHECK (VALUE IN
        ('unknown_charge', 'captured_twice', 'amount_mismatch', 'charge_not_booked',
         'refund_not_booked', 'unknown_refund', 'unexplained_dispute'));

-- The provider's entries as read: one row per entry, so a page or a batch read again
-- inserts nothing.
CREATE TABLE settlement_entries (
    provider            provider_name         NOT NULL,
    -- Stripe: the balance transaction's `txn_…`; Adyen: the batch and the line's
    -- modification reference and type (a report line has no id of its own).
    provider_entry_id   text                  NOT NULL,
    kind                settlement_entry_kind NOT NULL,
    -- The payment the money moved for (Stripe `pi_…`, Adyen the payment's pspReference);
    -- NULL for an entry of no payment (a fee, a payout).
    provider_payment_id text,
    -- The charge's, refund's or dispute's own id at the provider (`ch_…`, `re_…`, `du_…`,
    -- Adyen's modification reference).
    provider_source_id  text,
    -- Signed minor units, as the merchant's balance saw it: a charge positive, a refund or
    -- a withdrawal negative.
    amount              bigint                NOT NULL,
    currency            currency_code         NOT NULL,
    -- When the entry entered the provider's record, the time stretches go by: Stripe the
    -- transaction's `created`; Adyen the close of the batch it was settled in.
    booked_at           timestamptz           NOT NULL,
    -- When the provider says the money moved (Adyen's Creation Date), kept as evidence: a
    -- line settled late is dated long before its batch.
    occurred_at         timestamptz           NOT NULL,
    -- payorch's attempt or refund id when the provider carries it (metadata, a reference).
    reference           text,
    -- Adyen's batch number; NULL for Stripe.
    batch               bigint,
    read_at             timestamptz           NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, provider_entry_id)
);

CREATE INDEX settlement_entries_payment
    ON settlement_entries (provider, provider_payment_id);
CREATE INDEX settlement_entries_source
    ON settlement_entries (provider, provider_source_id);
CREATE INDEX settlement_entries_booked
    ON settlement_entries (provider, booked_at);

-- How far each provider's record was read, and compared. `position` is the adapter's own
-- (Stripe: the `created` second read up to, exclusive; Adyen: the last batch read);
-- `read_through`: the provider's record is whole up to then; `checked_through`: entries
-- booked and payorch's records finished up to then were compared (at most `read_through`
-- less the grace).
CREATE TABLE settlement_cursors (
    provider        provider_name NOT NULL PRIMARY KEY,
    position        text          NOT NULL,
    read_through    timestamptz   NOT NULL,
    checked_through timestamptz   NOT NULL,
    updated_at      timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT settlement_cursors_checked_after_read CHECK (checked_through <= read_through)
);

-- Every difference found, for a human: what was expected, what was found, and the entries
-- and rows it was found from.
CREATE TABLE settlement_findings (
    id                  uuid                    NOT NULL PRIMARY KEY,
    provider            provider_name           NOT NULL,
    kind                settlement_finding_kind NOT NULL,
    -- What the finding is about, one open finding each: the provider's payment id, or a
    -- refund's (payorch's id for refund_not_booked, the provider's for unknown_refund).
    subject             text                    NOT NULL,
    provider_payment_id text,
    -- payorch's rows, when it has them.
    merchant_id         uuid,
    attempt_id          uuid,
    refund_id           uuid,
    -- Minor units: what payorch's records say should have moved, and what the provider
    -- booked (a sum of its entries); NULL where one side has nothing.
    expected            bigint,
    found               bigint,
    currency            currency_code,
    evidence            jsonb                   NOT NULL,
    found_at            timestamptz             NOT NULL DEFAULT now(),
    resolved_at         timestamptz,
    -- Who or what closed it, and why.
    resolution          text,
    CONSTRAINT settlement_findings_resolved_has_resolution
        CHECK ((resolved_at IS NULL) = (resolution IS NULL))
);

-- One open finding per subject: a re-read, or a second replica comparing the same record,
-- adds nothing.
CREATE UNIQUE INDEX settlement_findings_open_once
    ON settlement_findings (provider, kind, subject) WHERE resolved_at IS NULL;
CREATE INDEX settlement_findings_open
    ON settlement_findings (found_at) WHERE resolved_at IS NULL;
CREATE INDEX settlement_findings_merchant
    ON settlement_findings (merchant_id, found_at) WHERE merchant_id IS NOT NULL;
