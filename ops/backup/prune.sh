#!/bin/sh
# Keeps the newest KEEP base backups and the archived WAL they need, and deletes the rest
# (docs/operations/backup.md, "Keeping backups"): a restore needs a base backup older than
# its target and every WAL segment from that backup's start on, so the archive is cut at the
# oldest kept backup's first segment, never later. Run it as `postgres` after base-backup.sh.
#
# Usage: prune.sh BACKUP_ROOT ARCHIVE_DIR KEEP
set -eu
root=$1
archive=$2
keep=$3

fail() { echo "prune: $*" >&2; exit 1; }
[ "$keep" -ge 1 ] || fail "KEEP must be 1 or more"

# base-<UTC time> sorts by time; newest last. Only folders with the manifest base-backup.sh
# verified count (a folder copied in by hand without one is never trusted as a backup).
backups=$(for b in "$root"/base-*; do [ -f "$b/backup_manifest" ] && echo "$b"; done | sort)
count=$(echo "$backups" | grep -c . || true)
[ "$count" -gt 0 ] || fail "no base backup under $root: nothing would be restorable"
if [ "$count" -le "$keep" ]; then
    echo "prune: $count base backups, keeping all"
    exit 0
fi
oldest_kept=$(echo "$backups" | tail -n "$keep" | head -n 1)
# backup_label: "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)".
first_segment=$(sed -n 's/^START WAL LOCATION: .* (file \([0-9A-F]*\))$/\1/p' "$oldest_kept/backup_label")
[ -n "$first_segment" ] || fail "no START WAL LOCATION in $oldest_kept/backup_label"

echo "$backups" | head -n "$((count - keep))" | while read -r old; do
    echo "prune: deleting $old"
    rm -rf "$old"
done
# Every segment (of any timeline) before the oldest kept backup's first one.
pg_archivecleanup "$archive" "$first_segment"
echo "prune: kept $keep base backups from $(basename "$oldest_kept") on, and the WAL from $first_segment on"
