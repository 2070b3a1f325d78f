#!/usr/bin/env bash
# A/B of checkout cost: two payorch builds (or one build twice, with other flags or schema
# changes on B's side), each serving its own database on one PostgreSQL, loaded in turn
# A B A B … with `wrk` and a fresh Idempotency-Key per request. Each run prints its
# throughput and the machine's busy CPU time per checkout (all processes: PostgreSQL, payorch,
# its sandbox and wrk, read from /proc/stat), which drifts far less between runs on a shared
# machine than throughput does; compare the pairs, then the medians (docs/BENCHMARKS.md).
#
#   benches/ab_checkout.sh target/release/payorch /tmp/other/payorch [rounds] [seconds]
#
# Environment: DATABASE_ADMIN_URL (default postgres://postgres:postgres@127.0.0.1:5432/postgres,
# a role that may create databases), C (connections, default 16), EXTRA_A / EXTRA_B (more
# `serve` flags for one side), SQL_A / SQL_B (a psql file run on one side's database once it
# is migrated: to price a schema change before writing its migration). Needs wrk, psql, jq.
set -euo pipefail
a_bin=$(realpath "${1:?usage: ab_checkout.sh BIN_A BIN_B [rounds] [seconds]}")
b_bin=$(realpath "${2:?usage: ab_checkout.sh BIN_A BIN_B [rounds] [seconds]}")
rounds=${3:-5}
here=$(dirname "$(realpath "$0")")
seconds=${4:-5}
conns=${C:-16}
admin=${DATABASE_ADMIN_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}
base=${admin%/*}
for tool in wrk psql jq; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -qX "$admin" -c "DROP DATABASE IF EXISTS ab_a" -c "DROP DATABASE IF EXISTS ab_b" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME BIN PORT EXTRA_FLAGS SQL_FILE
start() {
  local name=$1 bin=$2 port=$3 extra=$4 sql=$5
  psql -qX "$admin" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS ab_$name" \
    -c "CREATE DATABASE ab_$name" >/dev/null
  mkdir -p "$work/$name"
  # shellcheck disable=SC2086 # EXTRA_* are flags, split on purpose
  DATABASE_URL="$base/ab_$name" "$bin" serve --data-dir "$work/$name" --bind "127.0.0.1:$port" \
    --max-new-keys-per-minute 100000000 $extra >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    curl -sf "127.0.0.1:$port/health/ready" >/dev/null && break
    sleep 0.3
  done
  [ -z "$sql" ] || psql -qX "$base/ab_$name" -f "$sql" >/dev/null
}
start a "$a_bin" 8191 "${EXTRA_A:-}" "${SQL_A:-}"
start b "$b_bin" 8192 "${EXTRA_B:-}" "${SQL_B:-}"

busy_ticks() { head -1 /proc/stat | awk '{print $2 + $3 + $4 + $7 + $8}'; }
ticks_per_second=$(getconf CLK_TCK)

# run NAME PORT: prints "req/s busy-ms-per-request non-2xx"
run() {
  local before after
  before=$(busy_ticks)
  CHECKOUT_API_KEY=$(jq -r .api_key "$work/$1/credentials.json") \
    wrk -t2 -c"$conns" -d"${seconds}s" -s "$here/checkout_fresh_keys.lua" "http://127.0.0.1:$2" \
    >"$work/wrk" 2>&1
  after=$(busy_ticks)
  awk -v busy=$((after - before)) -v hz="$ticks_per_second" '
    /requests in/ { n = $1 } /Requests\/sec/ { rps = $2 } /Non-2xx/ { bad = $5 }
    END { printf "%s %.3f %d\n", rps, busy * 1000 / hz / n, bad }' "$work/wrk"
}

printf '%-6s %10s %10s %6s | %10s %10s %6s | %s\n' round "A req/s" "A ms/req" "A bad" \
  "B req/s" "B ms/req" "B bad" "B/A ms"
for round in $(seq 1 "$rounds"); do
  read -r a_rps a_ms a_bad < <(run a 8191)
  read -r b_rps b_ms b_bad < <(run b 8192)
  printf '%-6s %10s %10s %6s | %10s %10s %6s | %.3f\n' "$round" "$a_rps" "$a_ms" "$a_bad" \
    "$b_rps" "$b_ms" "$b_bad" "$(echo "$b_ms / $a_ms" | bc -l)"
  echo "$a_rps $a_ms $b_rps $b_ms" >>"$work/rounds"
done
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf 'median  A %s req/s %s ms/req | B %s req/s %s ms/req | median B/A ms %.3f\n' \
  "$(cut -d' ' -f1 "$work/rounds" | median)" "$(cut -d' ' -f2 "$work/rounds" | median)" \
  "$(cut -d' ' -f3 "$work/rounds" | median)" "$(cut -d' ' -f4 "$work/rounds" | median)" \
  "$(awk '{print $4 / $2}' "$work/rounds" | median)"
