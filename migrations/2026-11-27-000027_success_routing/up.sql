-- Routing by success (docs/guides/routing.md, "Routing by success"): a merchant's route either
-- tries its providers in the order written (`ordered`, as every route did before) or orders
-- them by their recent approval rate (`success_rate`). A small table: a plain CHECK, and the
-- default keeps every existing routing as it was.
--
-- Wait at most 5 s for the table's lock, as migration 2026-11-27-000024 does: the ALTER stuck
-- behind a long transaction would hold up every routing read queued behind it. A migration
-- that times out changes nothing; `payorch migrate` again applies it.
SET LOCAL lock_timeout = '5s';

ALTER TABLE merchant_routing
    ADD COLUMN strategy text NOT NULL DEFAULT 'ordered'
        CONSTRAINT merchant_routing_strategy_known CHECK (strategy IN ('ordered', 'success_rate'));
