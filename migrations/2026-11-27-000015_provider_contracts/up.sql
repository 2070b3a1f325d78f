-- #39: payorch asks providers only what their published contracts answer truthfully
-- (docs/DESIGN.md, "What proves what"). Stripe's search is no longer asked; an attempt
-- whose intent payorch never learnt is looked for in a read-after-write list of the intents
-- made in its send window, logged as `list`. `search` stays for the rows made before.
ALTER DOMAIN provider_operation DROP CONSTRAINT provider_operation_known;
ALTER DOMAIN provider_operation ADD CONSTRAINT provider_operation_known CHECK (VALUE IN
    ('create', 'retrieve', 'search', 'list', 'create_refund', 'retrieve_refund', 'capture',
     'cancel', 'complete_action'));
