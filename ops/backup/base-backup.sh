#!/bin/sh
# A base backup of payorch's database (docs/operations/backup.md): the starting point that
# the archived WAL is replayed onto, to any moment after it. Run it daily, as `postgres` or
# a role with REPLICATION; the server is taken from libpq's variables (PGHOST, PGPORT,
# PGUSER, …), so run it where the database is reachable.
#
# Usage: base-backup.sh BACKUP_ROOT   prints the new backup's folder on its last line
set -eu
root=$1
name=base-$(date -u +%Y%m%dT%H%M%SZ)
folder=$root/$name
# Written under a hidden name and given its own only once verified: a copy cut short, or one
# that does not verify, is never counted as a backup by prune.sh nor taken for one by a
# restore. A hidden folder a killed run left behind is removed by the next run.
partial=$root/.partial-$name
rm -rf "$root"/.partial-base-*

# Plain files (-Fp), with the WAL written during the copy streamed alongside (-X stream), so
# the backup is consistent on its own; a checkpoint now (-c fast), not at the next one. The
# manifest lists every file with its SHA-256.
pg_basebackup --pgdata="$partial" --format=plain --wal-method=stream --checkpoint=fast \
    --manifest-checksums=SHA256 --label="payorch $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# Every file as the manifest has it, and the WAL it needs: a backup that cannot be read back
# is found now, not on the day it is needed.
pg_verifybackup "$partial"
mv "$partial" "$folder"
echo "$folder"
