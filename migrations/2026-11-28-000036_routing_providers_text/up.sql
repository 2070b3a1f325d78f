-- A route's providers as text[], each still checked as a provider_name.
--
-- Behind a pooler in transaction mode payorch sends every statement unnamed
-- (docs/operations/pooler.md), and tokio-postgres must know the type of every column of an
-- answer. PostgreSQL reports a domain's column as its base type, but an array of a domain as
-- the array type itself, which tokio-postgres looks up with a statement it prepares under a
-- name: that name does not exist on the next server session the pooler picks. So no column of
-- payorch's schema is of a type the driver does not know (tests/api/pooler.rs checks it).
-- The table holds a row per merchant at most: rewriting it is a moment's lock.
ALTER TABLE merchant_routing DROP CONSTRAINT merchant_routing_providers;
ALTER TABLE merchant_routing ALTER COLUMN providers TYPE text[] USING providers::text[];
ALTER TABLE merchant_routing ADD CONSTRAINT merchant_routing_providers CHECK (
    cardinality(providers) BETWEEN 1 AND 16
    AND array_position(providers, NULL) IS NULL
    -- The cast checks each name against the domain, as the column's type did.
    AND (providers::provider_name[]) IS NOT NULL
);
