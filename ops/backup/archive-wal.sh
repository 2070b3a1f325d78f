#!/bin/sh
# PostgreSQL's archive_command for payorch's database (docs/operations/backup.md): copies one
# finished WAL segment into the archive, durably, and never overwrites one. Installed as
# /usr/local/sbin/payorch-archive-wal; run by the server, as `postgres`.
#
# Usage: archive-wal.sh ARCHIVE_DIR PATH NAME  (archive_command: ... ARCHIVE_DIR %p %f)
# A non-zero exit makes PostgreSQL keep the segment and try again; it never drops WAL that
# was not archived.
set -eu
archive=$1
source=$2
name=$3
target=$archive/$name

if [ -f "$target" ]; then
    # Archived already: PostgreSQL crashed between the copy and noting it, and asks again.
    # The same bytes are a success; other bytes are another server writing into this
    # archive (a restored copy still pointing here?) and must not replace what is there.
    if cmp -s "$source" "$target"; then
        exit 0
    fi
    echo "archive-wal: $target exists with other contents; not overwriting it" >&2
    exit 1
fi

# Copied under a temporary name of this run's own, flushed, then linked under the segment's
# name: a segment in the archive under its own name is always whole, even after a crash of
# this machine, and `ln` fails where a file of that name appeared in the meantime (`mv`
# would replace it), which is then compared as above.
tmp=$archive/.$name.$$.partial
trap 'rm -f "$tmp"' EXIT
cp "$source" "$tmp"
sync "$tmp"
if ! ln "$tmp" "$target" 2>/dev/null; then
    if [ -f "$target" ] && cmp -s "$source" "$target"; then
        exit 0
    fi
    echo "archive-wal: could not archive $name as $target" >&2
    exit 1
fi
sync "$archive"
