-- The service runs as a role that owns nothing (docs/PRODUCTION.md, section 2): it reads and
-- writes rows, and nothing else. The tables, their triggers and constraints belong to the
-- owner that runs the migrations; only an owner or a superuser may disable a trigger, alter
-- a table or set session_replication_role = replica, the three ways around an invariant.
--
-- `payorch_runtime` is a group role (NOLOGIN): an operator's login role is made a member of
-- it (`GRANT payorch_runtime TO payorch_app`), so passwords and rotations stay the operator's.
-- It is created here when the owner may create roles; otherwise it must exist beforehand.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'payorch_runtime') THEN
        IF NOT (SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user) THEN
            -- The SQL is in the message too: `payorch migrate` and `serve` print the message,
            -- not the hint (docs/PRODUCTION.md, section 2, "Before upgrading").
            RAISE EXCEPTION 'the group role payorch_runtime does not exist and % may not create it: as an administrator of the server, run CREATE ROLE payorch_runtime NOLOGIN; GRANT payorch_runtime TO payorch_app; (payorch_app: the login role of DATABASE_URL) then migrate again', current_user
                USING HINT = 'as an administrator: CREATE ROLE payorch_runtime NOLOGIN; GRANT payorch_runtime TO payorch_app; (payorch_app: the login role of DATABASE_URL)';
        END IF;
        BEGIN
            CREATE ROLE payorch_runtime NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            -- Another database of the same server migrating at the same moment made it.
            NULL;
        END;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO payorch_runtime;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO payorch_runtime;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO payorch_runtime;
-- Tables and sequences later migrations create, as the same owner, are granted alike.
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO payorch_runtime;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO payorch_runtime;

-- Which migrations ran is the owner's to write; the service only reads it (readiness).
REVOKE INSERT, UPDATE, DELETE ON __diesel_schema_migrations FROM payorch_runtime;
