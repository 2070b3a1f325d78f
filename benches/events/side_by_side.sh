#!/usr/bin/env bash
# Merchant events' cost (docs/BENCHMARKS.md, "Merchant events (#30)"): the checkout floor with and
# without the outbox's inserts, then payorch's checkout with one webhook endpoint subscribed
# to every event type, delivering to the example receiver (examples/webhook_receiver.rs) on
# its own database, and how many deliveries a second the workers make meanwhile and after.
#
#   cargo build --release --bin payorch --example webhook_receiver
#   benches/events/side_by_side.sh target/release/payorch target/release/examples/webhook_receiver
#   (RECEIVERS="null example" by default: see run_with below)
#
# One PostgreSQL for all of it: the Debian cluster on 127.0.0.1:5432 (started here, its
# postgres user given the password postgres), as the project's side-by-side runs use. The
# floors are that side-by-side's `floor checkout+webhook SQL` (floor_checkout_webhook.sql,
# copied unchanged) and the same with the outbox's inserts added to its second transaction:
# two events (payment.succeeded, order.paid) and one delivery row each
# (floor_checkout_webhook_outbox.sql; the tables are at the end of floor_schema.sql). The
# floor does not send the deliveries; payorch does, on the same machine, during the load.
# Needs wrk, pgbench, psql, jq, curl; run as root. D=seconds per run (default 10).
set -u
payorch="$(realpath "${1:?usage: side_by_side.sh PAYORCH_BIN RECEIVER_BIN}")"
receiver="$(realpath "${2:?usage: side_by_side.sh PAYORCH_BIN RECEIVER_BIN}")"
here="$(cd "$(dirname "$0")" && pwd)"
D=${D:-10}
for t in wrk pgbench psql jq curl node bc; do command -v $t >/dev/null || { echo "missing: $t"; exit 1; }; done
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  v=$(ls /usr/lib/postgresql | sort -n | tail -1)
  pg_lsclusters -h | grep -q . || pg_createcluster "$v" main >/dev/null
  pg_ctlcluster "$v" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
fi
su postgres -c "psql -qXc \"alter user postgres password 'postgres'\"" >/dev/null
out=$(mktemp -d); chmod 755 "$out"
cp "$here"/*.sql "$out/"; chmod 644 "$out"/*.sql
admin=postgres://postgres:postgres@127.0.0.1:5432
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  wait 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
sql() { psql -qAtX "$admin/$1" -c "$2"; }

if [ "${FLOORS:-1}" = 1 ]; then
echo "== floor: pgbench"
su postgres -c "psql -qX -f $out/floor_schema.sql postgres" >/dev/null 2>&1
for f in floor_checkout_webhook floor_checkout_webhook_outbox; do
  label="floor checkout+webhook SQL"; [ $f = floor_checkout_webhook_outbox ] && label="floor checkout+webhook+outbox SQL"
  for c in 16 64; do
    su postgres -c "pgbench -n -c $c -j 2 -T $D -f $out/$f.sql postgres" 2>&1 \
      | awk -v c=$c -v l="$label" '/^tps/{printf "%-36s c=%-3s %10.0f tps\n", l, c, $3}'
  done
done
fi

# payorch with one endpoint subscribed to every event type, delivering to RECEIVER: `example`
# (examples/webhook_receiver.rs: verifies, and applies each event in a transaction of its own
# database, as a merchant would) or `null` (null_receiver.js: answers 204 at once, so the
# figures are payorch's own side of a delivery).
run_with() {
  local kind=$1 port=8091
  echo "== payorch, one endpoint subscribed to every event type, receiver: $kind"
  sql postgres "drop database if exists payorch" && sql postgres "create database payorch"
  rm -rf "$out/data"; mkdir -p "$out/data"
  DATABASE_URL=$admin/payorch "$payorch" serve --data-dir "$out/data" --bind 127.0.0.1:8090 \
    --max-new-keys-per-minute 100000000 --allow-http-webhooks >"$out/serve.log" 2>&1 &
  local serve=$!; pids+=($serve)
  for _ in $(seq 1 100); do curl -sf 127.0.0.1:8090/health/ready >/dev/null && break; sleep 0.3; done
  KEY=$(jq -r .api_key "$out/data/credentials.json")
  local path=/webhooks/payorch; [ "$kind" = null ] && path=/
  secret=$(curl -s -XPOST 127.0.0.1:8090/v1/webhook_endpoints -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -H "Idempotency-Key: bench-endpoint-$kind" \
    -d "{\"url\":\"http://127.0.0.1:$port$path\",\"enabled_events\":[\"*\"]}" | jq -r .secret)
  [ -n "$secret" ] && [ "$secret" != null ] || { echo "no endpoint registered"; exit 1; }
  if [ "$kind" = null ]; then
    node "$here/null_receiver.js" $port >"$out/receiver.log" 2>&1 &
  else
    sql postgres "drop database if exists receiver" && sql postgres "create database receiver"
    RECEIVER_DATABASE_URL=$admin/receiver WEBHOOK_SECRET=$secret "$receiver" --listen 127.0.0.1:$port \
      >"$out/receiver.log" 2>&1 &
  fi
  local rpid=$!; pids+=($rpid)
  for _ in $(seq 1 50); do curl -s -o /dev/null 127.0.0.1:$port/ && break; sleep 0.2; done

  for c in 16 64; do
    before=$(delivered); t0=$(date +%s.%N)
    CHECKOUT_API_KEY=$KEY wrk -t2 -c"$c" -d"${D}s" --latency -s "$here/../checkout_fresh_keys.lua" \
      http://127.0.0.1:8090 >"$out/w" 2>&1
    t1=$(date +%s.%N); during=$(( $(delivered) - before ))
    pending=$(sql payorch "select count(*) from event_deliveries where state = 'pending'")
    rps=$(awk '/Requests\/sec/{print $2}' "$out/w"); p99=$(awk '$1=="99%"{print $2}' "$out/w")
    non=$(awk '/Non-2xx/{print $5}' "$out/w")
    printf "%-36s c=%-3s %10s req/s  p99 %-8s non2xx %s\n" "payorch checkout, 1 endpoint" "$c" "$rps" "$p99" "${non:-0}"
    printf "%-36s c=%-3s %10.0f deliveries/s during the load; %s pending at its end\n" \
      "  deliveries" "$c" "$(echo "$during / ($t1 - $t0)" | bc -l)" "$pending"
    # The backlog drained: the workers alone, with nothing else to do.
    t0=$(date +%s.%N)
    while [ "$(sql payorch "select count(*) from event_deliveries where state = 'pending'")" != 0 ]; do sleep 0.2; done
    t1=$(date +%s.%N)
    [ "$pending" -gt 0 ] && printf "%-36s c=%-3s %10.0f deliveries/s draining the %s left\n" \
      "  backlog" "$c" "$(echo "$pending / ($t1 - $t0)" | bc -l)" "$pending"
  done
  echo "deliveries: $(delivered) succeeded, $(sql payorch "select count(*) from event_deliveries where state <> 'succeeded'") not"
  kill -INT $serve $rpid 2>/dev/null; wait $serve $rpid 2>/dev/null
}
delivered() { sql payorch "select count(*) from event_deliveries where state = 'succeeded'"; }
for kind in ${RECEIVERS:-null example}; do run_with "$kind"; done
