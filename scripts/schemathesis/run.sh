#!/usr/bin/env bash
# Checks payorch against its own OpenAPI document with schemathesis (docs/internals/proofs.md,
# "Beyond `cargo test`"): a live `serve` (debug build, private PostgreSQL, in-process
# sandbox) and the demo merchant's key;
# positive and negative generated requests, each POST with a fresh Idempotency-Key, then the
# support routes as the demo's support key. Fails on any 5xx, any status or content type the
# document does not list, any response that does not match its schema, any answer that shows a
# secret or an internal failure, and if no generated create-order or checkout reached 201.
#
#   scripts/schemathesis/run.sh     (schemathesis on PATH; EXAMPLES per operation, default 60;
#                                    .ci/run installs it in a venv, see there)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/schemathesis
examples=${EXAMPLES:-60}

cargo build --quiet
work=$(mktemp -d)
chmod 755 "$work"
counts="$work/counts.ndjson"
target/debug/payorch serve --data-dir "$work/data" --bind 127.0.0.1:0 --workers 2 \
  --max-new-keys-per-minute 1000000 >"$work/serve.log" 2>&1 &
serve_pid=$!
stop() {
  kill -TERM "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap stop EXIT

creds="$work/data/credentials.json"
for _ in $(seq 1 300); do
  if [ -s "$creds" ]; then
    base=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["base_url"])' "$creds")
    curl -sf "$base/health/ready" >/dev/null 2>&1 && break
  fi
  sleep 0.2
done
base=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["base_url"])' "$creds")
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["api_key"])' "$creds")
support=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["support_key"])' "$creds")
# What no answer may show (hooks.py, nothing_leaked): the demo's keys, its webhook secret and
# its master key (the key of each `id:key` line of the data folder's master_key file).
secrets=$(python3 - "$creds" "$work/data/master_key" <<'PY'
import json, sys
creds = json.load(open(sys.argv[1]))
found = [creds["api_key"], creds["support_key"], creds.get("webhook_secret") or ""]
try:
    for line in open(sys.argv[2], encoding="utf-8"):
        for part in line.replace(",", "\n").split():
            found.append(part.split(":", 1)[-1])
except FileNotFoundError:
    pass
print(",".join(s for s in found if len(s) >= 16))
PY
)
echo "payorch at $base"

checks=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,nothing_leaked
# One worker: with two, hypothesis parses lambda sources (`ast.parse`) on two threads at once,
# and Python 3.11's AST recursion counter is not thread-safe ("SystemError: AST constructor
# recursion depth mismatch"), which crashed a run of the tool, not of payorch.
for mode in positive negative; do
  echo "== schemathesis, $mode"
  PAYORCH_ST_COUNTS="$counts" PAYORCH_ST_SECRETS="$secrets" SCHEMATHESIS_HOOKS=hooks \
    PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" \
    schemathesis run "$base/openapi.json" --url "$base" \
      --header "Authorization: Bearer $key" \
      --mode "$mode" --checks "$checks" --max-examples "$examples" \
      --phases examples,coverage,fuzzing --workers 1 --no-color \
      --generation-database none --seed 20261122
done
# The support staff's routes, as the demo's support key (an operator): their reads, the story
# with its audit, and their writes.
echo "== schemathesis, support routes"
PAYORCH_ST_COUNTS="$counts" PAYORCH_ST_SECRETS="$secrets" SCHEMATHESIS_HOOKS=hooks \
  PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" \
  schemathesis run "$base/openapi.json" --url "$base" \
    --header "Authorization: Bearer $support" \
    --include-path-regex '^/v1/(support|merchants)/' \
    --mode all --checks "$checks" --max-examples "$examples" \
    --phases examples,coverage,fuzzing --workers 1 --no-color \
    --generation-database none --seed 20261127

python3 - "$counts" <<'PY'
import json, sys
totals = {}
for line in open(sys.argv[1], encoding="utf-8"):
    for operation, statuses in json.loads(line).items():
        for status, n in statuses.items():
            totals.setdefault(operation, {}).setdefault(status, 0)
            totals[operation][status] += n
for operation in sorted(totals):
    print(f"{operation:40} {dict(sorted(totals[operation].items()))}")
created = {op: s.get("201", 0) for op, s in totals.items() if op.startswith("POST")}
missing = [op for op in ("POST /v1/orders", "POST /v1/checkout") if created.get(op, 0) == 0]
if missing:
    sys.exit(f"no generated request reached 201 on: {', '.join(missing)}")
print("generated POSTs reached 201:", created)
PY
