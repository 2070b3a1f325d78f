-- The group role stays: it is the server's, and other databases may grant it rights too.
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    REVOKE USAGE, SELECT ON SEQUENCES FROM payorch_runtime;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    REVOKE SELECT, INSERT, UPDATE, DELETE ON TABLES FROM payorch_runtime;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM payorch_runtime;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM payorch_runtime;
REVOKE USAGE ON SCHEMA public FROM payorch_runtime;
