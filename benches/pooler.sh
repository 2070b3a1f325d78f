#!/usr/bin/env bash
# The cost of a pooler in transaction mode (docs/SCALING.md, "Direct and through a pooler";
# docs/operations/pooler.md): one release binary three times on one PostgreSQL, each on a
# database of its own:
#   direct, prepared    --db-pooler none: each statement prepared once per connection;
#   direct, unnamed     --db-pooler transaction straight to PostgreSQL: the unnamed statements'
#                       own cost, without a pooler;
#   pgbouncer, unnamed  --db-pooler transaction through PgBouncer in transaction mode.
# `wrk` runs alternate between the three, so all see the same background load. Prints per run:
# requests per second, latency, and the CPU time per request of PostgreSQL (the backends on
# that variant's database, from /proc) and of PgBouncer.
#
#   benches/pooler.sh [target/release/payorch]
#
# Environment: PGURL (a superuser's URL without a database, default
# postgres://postgres:postgres@127.0.0.1:5432; the Debian cluster, as root, with password
# auth on 127.0.0.1), D (seconds per run, default 10), ROUNDS (default 2), POOL (PgBouncer's
# default_pool_size, default 16: the pool size of one replica). Needs wrk, jq, curl, psql,
# pgbouncer; run as root (PgBouncer runs as `postgres`).
set -euo pipefail
bin=$(realpath "${1:-target/release/payorch}")
here=$(dirname "$(realpath "$0")")
PGURL=${PGURL:-postgres://postgres:postgres@127.0.0.1:5432}
D=${D:-10}; ROUNDS=${ROUNDS:-2}; POOL=${POOL:-16}
tick=$(getconf CLK_TCK)
for tool in wrk jq curl psql pgbouncer; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || { echo "missing: $tool" >&2; exit 1; }
done
pgbouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
hostport=${PGURL#*@}; pghost=${hostport%:*}; pgport=${hostport##*:}
creds=${PGURL#*://}; creds=${creds%@*}; pguser=${creds%:*}; pgpass=${creds#*:}
work=$(mktemp -d); chmod 755 "$work"
pids=()
cleanup() { kill -INT "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for db in payorch_prepared payorch_unnamed payorch_pooled; do
  PGOPTIONS="-c client_min_messages=warning" psql -qX "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
done
bport=16432
cat > "$work/pgbouncer.ini" <<INI
[databases]
payorch_pooled = host=$pghost port=$pgport dbname=payorch_pooled user=$pguser password=$pgpass
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $work/users.txt
pool_mode = transaction
default_pool_size = $POOL
max_client_conn = 1000
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid
INI
echo "\"$pguser\" \"\"" > "$work/users.txt"
if [[ $(id -u) == 0 ]]; then chown -R postgres "$work"; as=(-u postgres); else as=(); fi
"$pgbouncer" "${as[@]}" "$work/pgbouncer.ini" >/dev/null 2>&1 &
pids+=($!)
serve() { # name port database_url [env...]
  local name=$1 port=$2 url=$3; shift 3
  mkdir -p "$work/$name"
  env DATABASE_URL="$url" "$@" "$bin" serve --data-dir "$work/$name" --bind "127.0.0.1:$port" \
    --max-new-keys-per-minute 100000000 >"$work/$name.log" 2>&1 &
  pids+=($!)
}
serve prepared 18201 "$PGURL/payorch_prepared"
serve unnamed 18202 "$PGURL/payorch_unnamed" PAYORCH_DB_POOLER=transaction \
  PAYORCH_MIGRATION_DATABASE_URL="$PGURL/payorch_unnamed"
serve pooled 18203 "postgres://$pguser@127.0.0.1:$bport/payorch_pooled?sslmode=disable" \
  PAYORCH_DB_POOLER=transaction PAYORCH_MIGRATION_DATABASE_URL="$PGURL/payorch_pooled"
for port in 18201 18202 18203; do
  for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.3; done
done
key() { jq -r .api_key "$work/$1/credentials.json"; }
# CPU ticks of the backends on database $1 (their process title names it) and of PgBouncer.
pg_ticks() {
  local sum=0 p title
  for p in /proc/[0-9]*; do
    { title=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
    [[ $title == postgres:*" $1 "* ]] || continue
    sum=$((sum + $(awk '{print $14+$15}' "$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$sum"
}
bouncer_ticks() { awk '{print $14+$15}' "/proc/$(cat "$work/pgbouncer.pid")/stat"; }
run() { # label port key database c path body
  local label=$1 port=$2 key=$3 db=$4 c=$5 path=$6 body=$7
  local a0 b0 a1 b1 n
  a0=$(pg_ticks "$db"); b0=$(bouncer_ticks)
  WRK_PATH=$path WRK_BODY=$body WRK_AUTH=$key \
    wrk -t2 -c"$c" -d"${D}s" --latency -s "$here/fresh_keys.lua" "http://127.0.0.1:$port" >"$work/w" 2>&1
  a1=$(pg_ticks "$db"); b1=$(bouncer_ticks)
  n=$(awk '/requests in/{print $1}' "$work/w")
  printf "%-28s c=%-3s %9s req/s  p50 %-8s p99 %-8s non2xx %-3s PostgreSQL %s ms/req  PgBouncer %s ms/req\n" \
    "$label" "$c" "$(awk '/Requests\/sec/{print $2}' "$work/w")" \
    "$(awk '$1=="50%"{print $2}' "$work/w")" "$(awk '$1=="99%"{print $2}' "$work/w")" \
    "$(awk '/Non-2xx/{print $5}' "$work/w" | grep . || echo 0)" \
    "$(awk -v t=$((a1 - a0)) -v n="$n" -v hz="$tick" 'BEGIN{printf "%.2f", t*1000/hz/n}')" \
    "$(awk -v t=$((b1 - b0)) -v n="$n" -v hz="$tick" 'BEGIN{printf "%.3f", t*1000/hz/n}')"
}
checkout='{"amount":100,"currency":"usd","payment_method":"pm_card_visa"}'
order='{"amount":100,"currency":"usd"}'
for _ in $(seq 1 "$ROUNDS"); do
  for c in 16 64; do
    for what in checkout order; do
      if [[ $what == checkout ]]; then path=/v1/checkout body=$checkout; else path=/v1/orders body=$order; fi
      run "$what direct, prepared" 18201 "$(key prepared)" payorch_prepared "$c" "$path" "$body"
      run "$what direct, unnamed" 18202 "$(key unnamed)" payorch_unnamed "$c" "$path" "$body"
      run "$what pgbouncer, unnamed" 18203 "$(key pooled)" payorch_pooled "$c" "$path" "$body"
    done
  done
done
psql -tAX "$PGURL/postgres" -c "SELECT 'server sessions: ' || string_agg(datname || ' ' || n, ', ') FROM (SELECT datname, count(*) n FROM pg_stat_activity WHERE datname LIKE 'payorch_%' GROUP BY 1 ORDER BY 1) s"
