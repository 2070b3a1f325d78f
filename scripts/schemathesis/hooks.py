"""schemathesis hooks for payorch (see run.sh).

Every generated request gets a fresh Idempotency-Key, as a real client's new request would, so
that generated POSTs are judged on their bodies rather than refused as key reuse. Each answer's
status is counted per operation and written to $PAYORCH_ST_COUNTS when the run ends, so run.sh
can tell whether valid POSTs reached 201. The check `nothing_leaked` fails an answer that shows a
secret of the server under test ($PAYORCH_ST_SECRETS, comma-separated: its keys, its webhook
secret, its master key) or what only an internal failure would show (a panic, SQL, a backtrace).
"""

import atexit
import json
import os
import uuid
from collections import defaultdict

import schemathesis

COUNTS = defaultdict(lambda: defaultdict(int))
SECRETS = [s for s in os.environ.get("PAYORCH_ST_SECRETS", "").split(",") if s]
# What a problem+json never says but an internal failure would: a Rust panic, the database's
# own words, a backtrace.
INTERNALS = ("panicked at", "SQLSTATE", "diesel::", "tokio_postgres", "stack backtrace", "RUST_BACKTRACE")


@schemathesis.check
def nothing_leaked(ctx, response, case):
    text = response.content.decode("utf-8", "replace")
    for secret in SECRETS:
        if secret in text:
            raise AssertionError(f"a secret of the server (…{secret[-4:]}) shows in the answer")
    # A problem may name what the request held (a bad value of a field): a marker the
    # generated request carried itself is no sign of a failure.
    asked = json.dumps(
        [case.body if isinstance(case.body, (dict, list, str)) else None,
         case.query, case.path_parameters, case.headers],
        ensure_ascii=False, default=str,
    )
    for marker in INTERNALS:
        if marker in text and marker not in asked:
            raise AssertionError(f"the answer shows an internal failure: {marker!r}")


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.method.upper() == "POST":
        if case.headers is None:
            case.headers = {}
        case.headers["Idempotency-Key"] = str(uuid.uuid4())


@schemathesis.hook
def after_call(context, case, response):
    COUNTS[f"{case.method.upper()} {case.path}"][str(response.status_code)] += 1


def _write_counts():
    path = os.environ.get("PAYORCH_ST_COUNTS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(COUNTS) + "\n")


atexit.register(_write_counts)
