"""schemathesis hooks for payorch (see run.sh).

Every generated request gets a fresh Idempotency-Key, as a real client's new request would, so
that generated POSTs are judged on their bodies rather than refused as key reuse. Each answer's
status is counted per operation and written to $PAYORCH_ST_COUNTS when the run ends, so run.sh
can tell whether valid POSTs reached 201.
"""

import atexit
import json
import os
import uuid
from collections import defaultdict

import schemathesis

COUNTS = defaultdict(lambda: defaultdict(int))


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
