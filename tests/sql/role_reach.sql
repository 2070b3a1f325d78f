SELECT current_user::text AS role,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
       EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public'
               AND tablename = 'payment_attempts'
               AND pg_has_role(current_user, tableowner, 'MEMBER')) AS owns_tables
