#!/bin/sh
# Step 2 of an upgrade (docs/operations/upgrades.md): the replicas replaced one at a time, so
# the others serve throughout. Each is restarted by RESTART_COMMAND, which stops it (SIGTERM:
# it stops accepting, answers what it has in hand and exits 0; docs/operations/running.md,
# "Stopping and rolling deploys") and starts the new release; the next is not touched before
# this one answers /health/ready with 200. Behind the reverse proxy of
# docs/operations/tls-proxy.md, a request to a stopping replica goes to another.
#
# Usage: rolling-restart.sh NAME=URL [NAME=URL ...]
#   NAME             given to RESTART_COMMAND as $1: a host name with the default command
#   URL              where that replica answers /health/ready, e.g. http://10.0.0.11:8080
#   RESTART_COMMAND  run by sh with NAME as $1; it must return once the replica is stopped
#                    and started again (default: ssh "$1" sudo systemctl restart payorch;
#                    systemctl waits up to the unit's TimeoutStopSec for the drain)
#   READY_WITHIN_SECS  how long a replica may take to be ready again (default 120)
#   SETTLE_SECS      the wait after a replica is ready before the next is stopped (default 6):
#                    longer than the proxy's fail_timeout (5 s in ops/nginx/payorch.conf), so
#                    the proxy sends to the replica again before it loses the next one
set -eu
restart=${RESTART_COMMAND:-'ssh "$1" sudo systemctl restart payorch'}
within=${READY_WITHIN_SECS:-120}
settle=${SETTLE_SECS:-6}

say() { echo "rolling-restart: $*"; }
fail() { echo "rolling-restart: $*" >&2; exit 1; }
ready() { curl -fsS -o /dev/null --max-time 5 "$1/health/ready" 2>/dev/null; }

[ $# -ge 1 ] || fail "usage: rolling-restart.sh NAME=URL [NAME=URL ...]"
left=$#

for replica in "$@"; do
    name=${replica%%=*}
    url=${replica#*=}
    # The others take this one's clients while it is away: all must be ready first, or the
    # deploy stops here, with this one still serving.
    for other in "$@"; do
        [ "$other" = "$replica" ] && continue
        ready "${other#*=}" || fail "${other%%=*} (${other#*=}) is not ready: not restarting $name"
    done
    say "restarting $name"
    started=$(date +%s)
    sh -c "$restart" rolling-restart "$name" || fail "RESTART_COMMAND failed for $name"
    until ready "$url"; do
        [ $(( $(date +%s) - started )) -lt "$within" ] || fail "$name ($url) not ready within $within s"
        sleep 1
    done
    say "$name ready again after $(( $(date +%s) - started )) s"
    left=$((left - 1))
    [ "$left" -eq 0 ] || sleep "$settle"
done
say "every replica restarted and ready"
