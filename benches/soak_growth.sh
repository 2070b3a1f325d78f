#!/usr/bin/env bash
# Growth soak (docs/SCALING.md, "As the tables grow"): `payorch serve` on its private PostgreSQL
# cluster and the in-process sandbox takes N checkouts from `wrk`, each under a random UUIDv4
# Idempotency-Key, and every EVERY seconds the script writes one line: seconds, attempts so
# far, checkouts per second over the last interval, the database's size, and the resident
# memory (proportional set size) of serve and of all PostgreSQL processes. The point is how the cost of a checkout
# grows with the tables, so it runs one merchant far past what a test ever holds.
#
#   benches/soak_growth.sh [target/release/payorch] [checkouts] [default|tuned]
#
# `default` is the private cluster exactly as `serve` makes it. `tuned` appends the settings
# of docs/SCALING.md, "PostgreSQL settings" (TUNED below) to its postgresql.conf before the start.
# Environment: C (connections, default 32), EVERY (seconds, default 15), KEEP=1 keeps the
# folder. Needs wrk, jq, curl, psql.
set -euo pipefail
bin=$(realpath "${1:-target/release/payorch}")
checkouts=${2:-1000000}
mode=${3:-default}
conns=${C:-32}
every=${EVERY:-15}
threads=2
TUNED="
shared_buffers = 2GB
effective_cache_size = 12GB
maintenance_work_mem = 512MB
wal_buffers = 64MB
max_wal_size = 8GB
min_wal_size = 1GB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
random_page_cost = 1.1
autovacuum_vacuum_scale_factor = 0.02
autovacuum_analyze_scale_factor = 0.02
autovacuum_vacuum_insert_scale_factor = 0.05
"
for tool in wrk jq curl psql; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done
case $mode in default | tuned) ;; *) echo "mode: default or tuned" >&2; exit 2 ;; esac

work=$(mktemp -d)
chmod 755 "$work"
serve_pid=
wrk_pid=
cleanup() {
  [ -z "$wrk_pid" ] || kill -INT "$wrk_pid" 2>/dev/null || true
  [ -z "$serve_pid" ] || kill -INT "$serve_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  if [ "${KEEP:-}" = 1 ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# `migrate` makes the cluster (and stops it again), so its settings can be changed first.
env -u DATABASE_URL "$bin" migrate --data-dir "$work/data" >"$work/migrate.log" 2>&1
# The cluster lives under the data dir, or in the temp dir when its owner cannot reach that.
conf=$(find "$work/data" "${TMPDIR:-/tmp}" -maxdepth 4 -path "*/data/postgresql.conf" \
  -newer "$work/migrate.log" 2>/dev/null | head -1)
[ -n "$conf" ] || conf=$(find "$work/data" -path "*/data/postgresql.conf" | head -1)
pgdata=$(dirname "$conf")
if [ "$mode" = tuned ]; then
  printf '\n# soak_growth.sh: tuned\n%s' "$TUNED" >>"$conf"
fi

# A random v4 UUID per request: keys spread over the whole index, as real clients' do.
cat >"$work/soak.lua" <<'LUA'
local body = '{"amount":100,"currency":"usd","payment_method":"pm_card_visa"}'
local auth = os.getenv("CHECKOUT_API_KEY")
local share = tonumber(os.getenv("SOAK_SHARE"))
local threads, answered = 0, 0
function setup(thread) threads = threads + 1; thread:set("n", threads) end
function init(args)
  local f = io.open("/dev/urandom", "rb"); local r = f:read(4); f:close()
  local seed = 0
  for i = 1, 4 do seed = seed * 256 + r:byte(i) end
  math.randomseed(seed + n)
end
local function uuid4()
  return (string.gsub("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", "[xy]", function(c)
    local v = (c == "x") and math.random(0, 15) or math.random(8, 11)
    return string.format("%x", v)
  end))
end
request = function()
  return wrk.format("POST", "/v1/checkout", {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. auth,
    ["Idempotency-Key"] = uuid4(),
  }, body)
end
response = function(status, headers, body)
  answered = answered + 1
  if answered == share then
    io.open(os.getenv("SOAK_DONE") .. "/" .. n, "w"):close()
    wrk.thread:stop()
  end
end
LUA

env -u DATABASE_URL "$bin" serve --data-dir "$work/data" --bind 127.0.0.1:0 \
  --max-new-keys-per-minute 100000000 >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 200); do
  [ -s "$work/data/credentials.json" ] && curl -sf "$(jq -r .base_url "$work/data/credentials.json")/health/ready" \
    >/dev/null 2>&1 && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.5
done
base_url=$(jq -r .base_url "$work/data/credentials.json")
api_key=$(jq -r .api_key "$work/data/credentials.json")
socket=$pgdata/../socket
db() { psql -X -At -h "$socket" -U payorch -d payorch -c "$1"; }
echo "mode $mode; settings: shared_buffers $(db 'SHOW shared_buffers'), max_wal_size $(db 'SHOW max_wal_size')"

# Proportional set sizes, so that PostgreSQL's shared buffers count once, not per process.
pss_kb() {
  local total=0 kb
  for p in "$@"; do
    kb=$(awk '$1 == "Pss:" {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
    total=$((total + ${kb:-0}))
  done
  echo "$total"
}
postgres_pids() {
  local pm
  pm=$(head -1 "$pgdata/postmaster.pid")
  # shellcheck disable=SC2046 # one pid per word, on purpose
  echo "$pm" $(pgrep -P "$pm")
}
inserted() { db "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'payment_attempts'"; }

mkdir "$work/done"
CHECKOUT_API_KEY=$api_key SOAK_SHARE=$((checkouts / threads)) SOAK_DONE=$work/done \
  wrk -t"$threads" -c"$conns" -d24h --latency -s "$work/soak.lua" "$base_url" >"$work/wrk" 2>&1 &
wrk_pid=$!
start=$(date +%s)
last_t=$start
last_n=$(inserted)
printf '%7s %10s %9s %9s %10s %10s\n' seconds attempts "ckout/s" "db_MB" "serve_MB" "pg_MB"
while [ "$(find "$work/done" -type f | wc -l)" -lt "$threads" ]; do
  kill -0 "$wrk_pid" 2>/dev/null || break
  kill -0 "$serve_pid" 2>/dev/null || { echo "serve died:" >&2; tail -20 "$work/serve.log" >&2; exit 1; }
  sleep "$every"
  now=$(date +%s)
  n=$(inserted)
  # shellcheck disable=SC2046 # one pid per word, on purpose
  pg_kb=$(pss_kb $(postgres_pids))
  printf '%7d %10d %9.0f %9d %10d %10d\n' "$((now - start))" "$n" \
    "$(echo "($n - $last_n) / ($now - $last_t)" | bc -l)" \
    "$(db 'SELECT pg_database_size(current_database()) / 1048576')" \
    "$(($(pss_kb "$serve_pid") / 1024))" "$((pg_kb / 1024))"
  last_t=$now
  last_n=$n
done
kill -INT "$wrk_pid" 2>/dev/null || true
wait "$wrk_pid" || true
wrk_pid=
grep -E 'requests in|Requests/sec|Non-2xx|Socket errors|^ +(50|99)%' "$work/wrk" || true
echo "attempts: $(db 'SELECT count(*) FROM payment_attempts'); database: $(db "SELECT pg_size_pretty(pg_database_size(current_database()))")"
db "SELECT relname, pg_size_pretty(pg_total_relation_size(relid)) FROM pg_stat_user_tables ORDER BY pg_total_relation_size(relid) DESC LIMIT 8"
