#!/bin/sh
# Step 1 of an upgrade (docs/operations/upgrades.md): the new release's migrations, once, as
# the tables' owner, before any replica runs the new release. Run it with the new binary on
# one host; the replicas of the old release keep serving meanwhile (every migration is
# written so that they can: docs/operations/upgrades.md, "Expand, then contract").
#
# Usage: migrate.sh [ENV_FILE] [PAYORCH]
#   ENV_FILE  the service's configuration, read as serve reads it (default
#             /etc/payorch/payorch.env): DATABASE_URL(_FILE) and
#             PAYORCH_MIGRATION_DATABASE_URL(_FILE), the owner's
#   PAYORCH   the new release's binary (default /usr/bin/payorch)
set -eu
env_file=${1:-/etc/payorch/payorch.env}
payorch=${2:-/usr/bin/payorch}

# The file's variables, exported as systemd's EnvironmentFile= gives them to serve.
set -a
. "$env_file"
set +a

"$payorch" --version
# Applies what is pending under payorch's advisory lock, so a replica starting meanwhile
# waits rather than migrating too; a migration that fails rolls back and stops here, before
# any replica was replaced.
"$payorch" migrate
echo "migrate.sh: migrations applied; now replace the replicas (rolling-restart.sh)"
