-- Nothing to undo: a validated CHECK goes with 000031's down.sql.
SELECT 1;
