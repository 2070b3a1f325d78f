#!/usr/bin/env python3
"""Regenerate the providers' published contracts payorch is checked against
(fixtures/contracts/README.md): the part of each upstream OpenAPI document that payorch's
adapters and its sandbox use, the operations below and the transitive closure of every
component they reference, nothing else.

    python3 scripts/contracts/vendor.py \
        --stripe spec3.yaml \
        --adyen-checkout CheckoutService-v71.json \
        --adyen-webhooks Webhooks-v1.json \
        --adyen-disputes DisputeService-v30.json

Each argument is optional (only the documents given are rewritten); the files are the
upstream ones, at the commits fixtures/contracts/README.md names:

- Stripe: openapi/spec3.yaml of github.com/stripe/openapi (it must say API version
  2023-08-16, the version payorch pins with `Stripe-Version`). A `.json` file is read as
  JSON; a YAML file needs PyYAML (`pip install pyyaml`; its C loader, when built, reads the
  4 MB document in about two seconds, the pure-Python one in about a minute).
- Adyen: json/CheckoutService-v71.json, json/Webhooks-v1.json and
  json/DisputeService-v30.json of github.com/Adyen/adyen-openapi.

The output goes to fixtures/contracts/ beside this script's repository (or --out DIR):
stripe/spec3.json, adyen/CheckoutService-v71.json, adyen/Webhooks-v1.json,
adyen/DisputeService-v30.json. What is kept:

- `paths` (or, for the webhooks document, `webhooks`): only the operations named in
  OPERATIONS below, each whole (parameters, request body, every response);
- `components`: every component of any kind (schemas, parameters, examples, headers, …)
  reachable by a local `$ref` from those operations or from the extra root schemas, in the
  upstream order; `securitySchemes` whole;
- every other top-level member (`openapi`, `info`, `servers`, `security`, `tags`) as it is,
  and `info.x-payorch-subset` saying what was kept and from where;
- the `description` text of component schemas is dropped: it is documentation, not
  contract, and it is over half the bytes (Stripe's closure is 0.7 MB with it). Property
  *named* `description` (Stripe's `payment_intent.description`) is a schema, and kept.

Nothing else is changed, so a validator reading the subset reads the upstream contract.
"""
import argparse
import json
import os
import sys

STRIPE_URL = "https://github.com/stripe/openapi"
STRIPE_COMMIT = "63a674638635c68de26b9f3add13e58198f4df44"
STRIPE_API_VERSION = "2023-08-16"
ADYEN_URL = "https://github.com/Adyen/adyen-openapi"
ADYEN_COMMIT = "aa014f0cbdb58ff5c44a2ff9d5fe734642210aff"

# What payorch's Stripe adapter and the sandbox's Stripe face call (docs/DESIGN.md, "The
# provider protocol"), and the objects its webhooks carry.
STRIPE_OPERATIONS = [
    ("post", "/v1/payment_intents"),
    ("get", "/v1/payment_intents"),
    ("get", "/v1/payment_intents/search"),
    ("get", "/v1/payment_intents/{intent}"),
    ("post", "/v1/payment_intents/{intent}/confirm"),
    ("post", "/v1/payment_intents/{intent}/capture"),
    ("post", "/v1/payment_intents/{intent}/cancel"),
    ("post", "/v1/refunds"),
    ("get", "/v1/refunds"),
    ("get", "/v1/refunds/{refund}"),
    # Disputes: read (the webhooks carry the same object), answered with evidence, accepted
    # (Stripe calls accepting "close").
    ("get", "/v1/disputes"),
    ("get", "/v1/disputes/{dispute}"),
    ("post", "/v1/disputes/{dispute}"),
    ("post", "/v1/disputes/{dispute}/close"),
    # The provider's own record of money moved, read by the settlement reconciliation.
    ("get", "/v1/balance_transactions"),
]
STRIPE_SCHEMAS = ["event", "payment_intent", "refund", "error", "dispute", "balance_transaction"]

# Checkout API v71: payments, the payer's return, and the modifications of a payment.
ADYEN_CHECKOUT_OPERATIONS = [
    ("post", "/payments"),
    ("post", "/payments/details"),
    ("post", "/payments/{paymentPspReference}/captures"),
    ("post", "/payments/{paymentPspReference}/cancels"),
    ("post", "/cancels"),
    ("post", "/payments/{paymentPspReference}/refunds"),
    ("post", "/payments/{paymentPspReference}/reversals"),
]
ADYEN_CHECKOUT_SCHEMAS = []

# Standard notification webhooks: the event codes payorch acts on (docs/DESIGN.md, "The
# provider protocol"), each its own webhook with its own request schema, and the generic
# NotificationRequest.
ADYEN_WEBHOOKS = [
    ("post", "/AUTHORISATION"),
    ("post", "/CAPTURE"),
    ("post", "/CAPTURE_FAILED"),
    ("post", "/CANCELLATION"),
    ("post", "/TECHNICAL_CANCEL"),
    ("post", "/REFUND"),
    ("post", "/REFUND_FAILED"),
    # Disputes, from the first word of a chargeback to pre-arbitration (docs/DESIGN.md, "The
    # provider protocol"): each folds into one payorch dispute.
    ("post", "/NOTIFICATION_OF_CHARGEBACK"),
    ("post", "/REQUEST_FOR_INFORMATION"),
    ("post", "/CHARGEBACK"),
    ("post", "/CHARGEBACK_REVERSED"),
    ("post", "/SECOND_CHARGEBACK"),
    ("post", "/PREARBITRATION_WON"),
    ("post", "/PREARBITRATION_LOST"),
    ("post", "/INFORMATION_SUPPLIED"),
    ("post", "/DISPUTE_DEFENSE_PERIOD_ENDED"),
    ("post", "/ISSUER_RESPONSE_TIMEFRAME_EXPIRED"),
    ("post", "/PREARBITRATION_OPEN"),
    ("post", "/PREARBITRATION_ACCEPTED"),
    ("post", "/PREARBITRATION_DECLINED"),
    ("post", "/PREARBITRATION_ISSUER_WITHDRAWN"),
    ("post", "/SCHEME_ARBITRATION"),
    ("post", "/SCHEME_ARBITRATION_WON"),
    ("post", "/SCHEME_ARBITRATION_LOST"),
]
ADYEN_WEBHOOK_SCHEMAS = ["NotificationRequest"]

# Disputes API v30: answering a dispute (documents, then the defence) and accepting it. The
# applicable defence reasons are read to tell a merchant which codes a dispute accepts.
ADYEN_DISPUTE_OPERATIONS = [
    ("post", "/acceptDispute"),
    ("post", "/defendDispute"),
    ("post", "/retrieveApplicableDefenseReasons"),
    ("post", "/supplyDefenseDocument"),
]
ADYEN_DISPUTE_SCHEMAS = []


def load(path):
    with open(path, encoding="utf-8") as f:
        if path.endswith(".json"):
            return json.load(f)
        try:
            import yaml
        except ImportError:
            sys.exit(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or give the JSON")
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(f, Loader=loader)


def refs(node):
    """Every `$ref` string inside `node`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def component_of(ref):
    """`#/components/<kind>/<name>` -> (kind, name); anything else is refused."""
    parts = ref.split("/")
    if len(parts) != 4 or parts[0] != "#" or parts[1] != "components":
        sys.exit(f"unexpected $ref {ref!r}: only #/components/<kind>/<name> is vendored")
    unescape = lambda s: s.replace("~1", "/").replace("~0", "~")
    return unescape(parts[2]), unescape(parts[3])


def strip_descriptions(node):
    """`node` without string `description`s (a dict `description` is a property's schema)."""
    if isinstance(node, dict):
        return {
            k: strip_descriptions(v)
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [strip_descriptions(v) for v in node]
    return node


def subset(doc, operations, schemas, source):
    where = "webhooks" if doc.get("webhooks") and not doc.get("paths") else "paths"
    kept_paths = {}
    roots = []
    for method, path in operations:
        try:
            operation = doc[where][path][method]
        except KeyError:
            sys.exit(f"{method.upper()} {path} is not in the document's {where}")
        item = kept_paths.setdefault(path, {})
        # Path-level members (shared parameters) come along with any of its operations.
        for key, value in doc[where][path].items():
            if key not in ("get", "put", "post", "delete", "patch", "head", "options", "trace"):
                item[key] = value
                roots.append(value)
        item[method] = operation
        roots.append(operation)
    # Keep the upstream order of paths.
    kept_paths = {p: kept_paths[p] for p in doc[where] if p in kept_paths}

    components = doc.get("components", {})
    todo = [r for root in roots for r in refs(root)]
    todo += [f"#/components/schemas/{name}" for name in schemas]
    wanted = set()
    while todo:
        key = component_of(todo.pop())
        if key in wanted:
            continue
        kind, name = key
        if name not in components.get(kind, {}):
            sys.exit(f"dangling $ref to {kind}/{name}")
        wanted.add(key)
        todo.extend(refs(components[kind][name]))

    out_components = {}
    for kind, members in components.items():
        if kind == "securitySchemes":
            out_components[kind] = members
            continue
        kept = {n: v for n, v in members.items() if (kind, n) in wanted}
        if kind == "schemas":
            kept = {n: strip_descriptions(v) for n, v in kept.items()}
        if kept:
            out_components[kind] = kept

    out = {}
    for key, value in doc.items():
        if key == where:
            out[key] = kept_paths
        elif key == "components":
            out[key] = out_components
        elif key in ("paths", "webhooks"):
            continue
        else:
            out[key] = value
    out["info"] = dict(out.get("info", {}))
    out["info"]["x-payorch-subset"] = {
        "source": source,
        "operations": [f"{m.upper()} {p}" for m, p in operations],
        "root_schemas": schemas,
        "components_kept": {k: len(v) for k, v in out_components.items()},
        "schema_descriptions": "dropped",
    }
    return out


def write(doc, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        # One member a line, no indentation: diffable, and a third of the size indented.
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{path}: {os.path.getsize(path)} bytes")


def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stripe", help="upstream openapi/spec3.yaml (or .json)")
    parser.add_argument("--adyen-checkout", help="upstream json/CheckoutService-v71.json")
    parser.add_argument("--adyen-webhooks", help="upstream json/Webhooks-v1.json")
    parser.add_argument("--adyen-disputes", help="upstream json/DisputeService-v30.json")
    parser.add_argument("--out", default=os.path.join(repo, "fixtures", "contracts"))
    args = parser.parse_args()
    if not (args.stripe or args.adyen_checkout or args.adyen_webhooks or args.adyen_disputes):
        parser.error("give at least one upstream document")

    if args.stripe:
        doc = load(args.stripe)
        version = doc.get("info", {}).get("version")
        if version != STRIPE_API_VERSION:
            sys.exit(f"{args.stripe} is API version {version}, payorch pins {STRIPE_API_VERSION}")
        source = f"{STRIPE_URL} openapi/spec3.yaml at {STRIPE_COMMIT}"
        write(
            subset(doc, STRIPE_OPERATIONS, STRIPE_SCHEMAS, source),
            os.path.join(args.out, "stripe", "spec3.json"),
        )
    if args.adyen_checkout:
        doc = load(args.adyen_checkout)
        source = f"{ADYEN_URL} json/CheckoutService-v71.json at {ADYEN_COMMIT}"
        write(
            subset(doc, ADYEN_CHECKOUT_OPERATIONS, ADYEN_CHECKOUT_SCHEMAS, source),
            os.path.join(args.out, "adyen", "CheckoutService-v71.json"),
        )
    if args.adyen_webhooks:
        doc = load(args.adyen_webhooks)
        source = f"{ADYEN_URL} json/Webhooks-v1.json at {ADYEN_COMMIT}"
        write(
            subset(doc, ADYEN_WEBHOOKS, ADYEN_WEBHOOK_SCHEMAS, source),
            os.path.join(args.out, "adyen", "Webhooks-v1.json"),
        )
    if args.adyen_disputes:
        doc = load(args.adyen_disputes)
        source = f"{ADYEN_URL} json/DisputeService-v30.json at {ADYEN_COMMIT}"
        write(
            subset(doc, ADYEN_DISPUTE_OPERATIONS, ADYEN_DISPUTE_SCHEMAS, source),
            os.path.join(args.out, "adyen", "DisputeService-v30.json"),
        )


if __name__ == "__main__":
    main()
