WITH RECURSIVE named(provider) AS (
    (SELECT provider FROM payment_attempts ORDER BY provider LIMIT 1)
    UNION ALL
    SELECT (SELECT a.provider FROM payment_attempts a WHERE a.provider > named.provider
            ORDER BY a.provider LIMIT 1)
    FROM named WHERE named.provider IS NOT NULL)
SELECT provider FROM named WHERE provider IS NOT NULL
