#!/bin/sh
# Point-in-time recovery of payorch's database (docs/operations/backup.md): a new data
# folder from a base backup, set to replay the archived WAL up to TARGET_TIME and then open
# for writes. Run it as `postgres`, with the server stopped; then start PostgreSQL on the
# new folder and wait with wait-recovered.sh.
#
# Usage: restore-pitr.sh BASE_BACKUP ARCHIVE_DIR DATA_DIR TARGET_TIME
#   BASE_BACKUP  a folder base-backup.sh made, older than TARGET_TIME
#   ARCHIVE_DIR  the folder archive-wal.sh copies WAL into
#   DATA_DIR     the new data folder: missing or empty (never the one being replaced)
#   TARGET_TIME  e.g. '2026-11-27 14:05:00+00': the last transaction replayed is the last
#                one committed at or before it; or `latest`: all the archive holds (a lost
#                server, rather than a mistake to undo)
set -eu
backup=$1
archive=$2
data=$3
target=$4

fail() { echo "restore-pitr: $*" >&2; exit 1; }
# Both go into postgresql.auto.conf between single quotes.
case "$archive$target" in *"'"*) fail "a ' in the archive's path or the target cannot be written to postgresql.conf" ;; esac
[ -f "$backup/backup_label" ] || fail "$backup is no base backup (no backup_label)"
if [ -e "$data" ] && [ -n "$(ls -A "$data")" ]; then
    fail "$data is not empty: restore into a new folder, and keep the old one until this works"
fi

mkdir -p "$data"
chmod 700 "$data"
cp -a "$backup/." "$data/"

# Replay from the archive up to the target, then promote: a new timeline starts, and the
# WAL written after the target on the old one is left in the archive, unused.
echo "restore_command = 'cp \"$archive/%f\" \"%p\"'" >>"$data/postgresql.auto.conf"
if [ "$target" != latest ]; then
    cat >>"$data/postgresql.auto.conf" <<CONF
recovery_target_time = '$target'
recovery_target_action = 'promote'
CONF
fi
touch "$data/recovery.signal"
echo "restore-pitr: $data replays $archive up to $target once PostgreSQL starts on it"
