SELECT current_setting('TimeZone') AS time_zone, current_setting('statement_timeout') AS statement_timeout
