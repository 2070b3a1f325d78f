#!/usr/bin/env bash
# Memory soak: `payorch serve` on embedded defaults (its private PostgreSQL cluster in a fresh
# data dir, the in-process sandbox provider) takes N checkouts, each under a fresh
# Idempotency-Key, from `wrk`; serve's resident memory is sampled every few seconds. Prints
# the samples, the peak (the kernel's VmHWM, which no sample can miss), the RSS once the load
# has ended, and what the sandbox's ledger says it still holds (docs/operations/running.md, "The sandbox's memory").
#
#   nice -n 19 benches/soak_checkout.sh [target/release/payorch] [checkouts]
#
# Environment: C (connections, default 16), EVERY (seconds between samples, default 5),
# SETTLE (seconds after the load before the last sample, default 10), EXTRA (more `serve`
# flags). Needs wrk, jq, curl.
set -euo pipefail
bin=$(realpath "${1:-target/release/payorch}")
here=$(dirname "$(realpath "$0")")
checkouts=${2:-1000000}
conns=${C:-16}
every=${EVERY:-5}
settle=${SETTLE:-10}
threads=2
for tool in wrk jq curl; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done

work=$(mktemp -d)
chmod 755 "$work"
serve_pid=
sampler_pid=
wrk_pid=
cleanup() {
  [ -z "$wrk_pid" ] || kill -INT "$wrk_pid" 2>/dev/null || true
  [ -z "$sampler_pid" ] || kill "$sampler_pid" 2>/dev/null || true
  [ -z "$serve_pid" ] || kill -INT "$serve_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A fresh key per request (checkout_fresh_keys.lua); each thread stops after its share.
{
  cat "$here/checkout_fresh_keys.lua"
  cat <<'LUA'
local answered = 0
local share = tonumber(os.getenv("SOAK_SHARE"))
-- wrk runs for its -d whatever its threads do: a thread done with its share says so in a
-- file, and the script interrupts wrk (which then prints its summary) once all have.
response = function(status, headers, body)
  answered = answered + 1
  if answered == share then
    io.open(os.getenv("SOAK_DONE") .. "/" .. n, "w"):close()
    wrk.thread:stop()
  end
end
LUA
} >"$work/soak.lua"

# Embedded defaults: no DATABASE_URL, no provider flags. Only the new-key quota is lifted, as
# one merchant opens every key here.
# shellcheck disable=SC2086 # EXTRA is flags, split on purpose
env -u DATABASE_URL "$bin" serve --data-dir "$work/data" --bind 127.0.0.1:0 \
  --max-new-keys-per-minute 100000000 ${EXTRA:-} >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 200); do
  [ -s "$work/data/credentials.json" ] && curl -sf "$(jq -r .base_url "$work/data/credentials.json")/health/ready" \
    >/dev/null 2>&1 && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.5
done
base_url=$(jq -r .base_url "$work/data/credentials.json")
sandbox_url=$(jq -r .sandbox_url "$work/data/credentials.json")
api_key=$(jq -r .api_key "$work/data/credentials.json")

rss() { awk -v f="$1" '$1 == f":" {print $2}' "/proc/$serve_pid/status"; }
echo "serve pid $serve_pid at $base_url; RSS at start $(rss VmRSS) kB"
start=$(date +%s)
(
  while kill -0 "$serve_pid" 2>/dev/null; do
    printf '%6ds RSS %7s kB\n' "$(($(date +%s) - start))" "$(rss VmRSS)"
    sleep "$every"
  done
) >"$work/samples" &
sampler_pid=$!

mkdir "$work/done"
CHECKOUT_API_KEY=$api_key SOAK_SHARE=$((checkouts / threads)) SOAK_DONE=$work/done \
  wrk -t"$threads" -c"$conns" -d24h --latency -s "$work/soak.lua" "$base_url" >"$work/wrk" 2>&1 &
wrk_pid=$!
while [ "$(find "$work/done" -type f | wc -l)" -lt "$threads" ]; do
  kill -0 "$wrk_pid" 2>/dev/null || break
  kill -0 "$serve_pid" 2>/dev/null || { echo "serve died:" >&2; tail -20 "$work/serve.log" >&2; exit 1; }
  sleep 1
done
kill -INT "$wrk_pid" 2>/dev/null || true
wait "$wrk_pid" || true
wrk_pid=
load_ended=$(date +%s)
sleep "$settle"
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=

cat "$work/samples"
grep -E 'requests in|Requests/sec|Non-2xx|Socket errors|^ +(50|99)%' "$work/wrk" || true
echo "load: $((load_ended - start)) s; samples every ${every} s"
echo "peak RSS (VmHWM): $(rss VmHWM) kB"
echo "RSS ${settle} s after the load: $(rss VmRSS) kB"
# Read last: a whole ledger is a large answer, and it is not what this measures.
curl -sf "$sandbox_url/__sandbox/ledger" \
  | jq -c '{charges_held: (.data | length), refunds_held: (.refunds | length), window, forgotten}' \
  || echo "ledger: unreadable"
