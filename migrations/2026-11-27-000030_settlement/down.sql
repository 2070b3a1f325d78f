-- Back to 000029: the settlement record and its findings gone.
DROP TABLE settlement_findings;
DROP TABLE settlement_cursors;
DROP TABLE settlement_entries;
DROP DOMAIN settlement_finding_kind;
DROP DOMAIN settlement_entry_kind;
