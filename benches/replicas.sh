#!/usr/bin/env bash
# Replicas on one database (docs/SCALING.md, "CPU per checkout", "Replicas on one database"): for
# R in REPLICAS, R `payorch serve` processes share one private PostgreSQL cluster (the first
# starts it, the others connect to its socket), each with its own in-process sandbox; `wrk` sends checkouts
# under fresh keys to all of them at once, C connections in all, for D seconds after a warm-up.
# Prints per R: checkouts per second in all, and the CPU time per checkout of the serves and
# of PostgreSQL (every process of the cluster, including the ones that exited meanwhile,
# from the postmaster's own and its reaped children's times in /proc).
#
#   benches/replicas.sh [target/release/payorch]
#
# Environment: REPLICAS (default "1 2 3"), C (default 32), D (default 30), WARM (default 5),
# PORT_BASE (the replicas listen on PORT_BASE+1.., default 18100).
# Needs wrk, jq, curl.
set -euo pipefail
bin=$(realpath "${1:-target/release/payorch}")
here=$(dirname "$(realpath "$0")")
replicas=${REPLICAS:-1 2 3}
conns=${C:-32}
duration=${D:-30}
warm=${WARM:-5}
PORT_BASE=${PORT_BASE:-18100}
tick=$(getconf CLK_TCK)
for tool in wrk jq curl; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done

work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# CPU ticks of a process (utime + stime), and with `all` those of its reaped children too.
ticks() {
  awk -v all="${2:-}" '{ sub(/^.*\) /, ""); t = $12 + $13; if (all) t += $14 + $15; print t }' "/proc/$1/stat" 2>/dev/null || echo 0
}
postgres_ticks() {
  local pm total
  pm=$(head -1 "$pgdata/postmaster.pid")
  total=$(ticks "$pm" all)
  for p in $(pgrep -P "$pm"); do total=$((total + $(ticks "$p"))); done
  echo "$total"
}
serve_ticks() {
  local total=0
  for p in "${pids[@]}"; do total=$((total + $(ticks "$p"))); done
  echo "$total"
}
inserted() {
  psql -X -At -h "$pgdata/../socket" -U payorch -d payorch \
    -c "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'payment_attempts'"
}

printf '%8s %12s %16s %16s\n' replicas "checkouts/s" "serve ms/ckout" "postgres ms/ckout"
for r in $replicas; do
  pids=()
  urls=()
  # The first replica starts the private cluster; the others reach it through its socket,
  # each with a data dir (and an in-process sandbox) of its own and the first one's API key.
  for i in $(seq 1 "$r"); do
    port=$((PORT_BASE + i))
    if [ "$i" = 1 ]; then
      env -u DATABASE_URL "$bin" serve --data-dir "$work/data-$r-1" --bind "127.0.0.1:$port" \
        --max-new-keys-per-minute 100000000 >"$work/serve-$r-1.log" 2>&1 &
    else
      DATABASE_URL="host=$pgdata/../socket user=payorch dbname=payorch" \
        "$bin" serve --data-dir "$work/data-$r-$i" --bind "127.0.0.1:$port" \
        --max-new-keys-per-minute 100000000 >"$work/serve-$r-$i.log" 2>&1 &
    fi
    pids+=($!)
    for _ in $(seq 1 200); do
      curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null 2>&1 && break
      kill -0 "${pids[-1]}" 2>/dev/null || { cat "$work/serve-$r-$i.log" >&2; exit 1; }
      sleep 0.5
    done
    if [ "$i" = 1 ]; then
      api_key=$(jq -r .api_key "$work/data-$r-1/credentials.json")
      conf=$(find "$work/data-$r-1" "${TMPDIR:-/tmp}" -maxdepth 4 -path "*/data/postgresql.conf" \
        -newer "$work/serve-$r-1.log" 2>/dev/null | head -1)
      [ -n "$conf" ] || conf=$(find "$work/data-$r-1" -path "*/data/postgresql.conf" | head -1)
      pgdata=$(dirname "$conf")
    fi
    urls+=("http://127.0.0.1:$port")
  done
  run_wrk() {
    local seconds=$1 i=0
    local wrk_pids=()
    for entry in "${urls[@]}"; do
      i=$((i + 1))
      CHECKOUT_API_KEY=$api_key wrk -t1 -c$((conns / r)) -d"${seconds}s" \
        -s "$here/checkout_fresh_keys.lua" "$entry" >"$work/wrk-$r-$i" 2>&1 &
      wrk_pids+=($!)
    done
    wait "${wrk_pids[@]}"
  }
  run_wrk "$warm"
  n0=$(inserted)
  s0=$(serve_ticks)
  p0=$(postgres_ticks)
  run_wrk "$duration"
  n1=$(inserted)
  s1=$(serve_ticks)
  p1=$(postgres_ticks)
  n=$((n1 - n0))
  printf '%8d %12.0f %16.2f %16.2f\n' "$r" "$(echo "$n / $duration" | bc -l)" \
    "$(echo "($s1 - $s0) * 1000 / $tick / $n" | bc -l)" \
    "$(echo "($p1 - $p0) * 1000 / $tick / $n" | bc -l)"
  grep -h "Non-2xx" "$work"/wrk-"$r"-* || true
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
done
