#!/bin/sh
# After restore-pitr.sh and starting PostgreSQL: waits until the replay is done and the
# database is open for writes, then says up to when it holds (docs/operations/backup.md).
# The server from libpq's variables (PGHOST, PGPORT, PGUSER, …).
#
# Usage: wait-recovered.sh [WITHIN_SECS]   (default 600)
set -eu
within=${1:-600}
started=$(date +%s)
until [ "$(psql -X -A -t -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]; do
    if [ $(( $(date +%s) - started )) -ge "$within" ]; then
        # A target past the archive's last WAL stops the server ("recovery ended before
        # configured recovery target was reached"): its log says which.
        echo "wait-recovered: still recovering, or stopped, after $within s: read PostgreSQL's log" >&2
        exit 1
    fi
    sleep 1
done
psql -X -A -t -c "SELECT 'wait-recovered: open for writes; last transaction replayed at ' || coalesce(pg_last_xact_replay_timestamp()::text, 'unknown')"
