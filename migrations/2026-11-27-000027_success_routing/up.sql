-- Routing by success (docs/guides/routing.md, "Routing by success"): a merchant's route either
-- tries its providers in the order written (`ordered`, as every route did before) or orders
-- them by their recent approval rate (`success_rate`). A small table: a plain CHECK, and the
-- default keeps every existing routing as it was.
ALTER TABLE merchant_routing
    ADD COLUMN strategy text NOT NULL DEFAULT 'ordered'
        CONSTRAINT merchant_routing_strategy_known CHECK (strategy IN ('ordered', 'success_rate'));
