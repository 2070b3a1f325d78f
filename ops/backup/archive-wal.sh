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

# Copied under a temporary name, flushed, then renamed: a segment in the archive under its
# own name is always whole, even after a crash of this machine.
cp "$source" "$archive/.$name.partial"
sync "$archive/.$name.partial"
mv "$archive/.$name.partial" "$target"
sync "$archive"
