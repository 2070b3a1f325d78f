"""Stripe's own Python library, unpatched, drives the sandbox's Stripe face.

What this proves: an integrator who points the official `stripe` package from PyPI at the
sandbox (`stripe.api_base`, the library's documented setting) can run Stripe's
PaymentIntents flows against it as against Stripe, and gets from the library what Stripe's
API reference says they get: confirmed and declined creates (the decline raised as
`stripe.error.CardError` with code `card_declined`), a create confirmed later, manual
capture in full and in part, cancels, refunds (created, retrieved and listed by
payment_intent), retrieves and lists of intents with the library's own paging, the same
`idempotency_key` answering the same intent (and another request under it refused as
`IdempotencyError`), a 3-D Secure challenge passed as a browser passes it, and a wrong key
refused as `AuthenticationError`. Every webhook the sandbox sends is verified with
`stripe.Webhook.construct_event`, and the events Stripe documents for these flows must
arrive, each about its own object.

Run by tests/provider_libraries.rs, which starts the sandbox and passes it in the
environment: SANDBOX_URL, SANDBOX_API_KEY, STRIPE_WEBHOOK_SECRET. payorch speaks Stripe API
version 2023-08-16 (`API_VERSION` in src/providers/stripe/mod.rs); stripe 7.0.0 moved the
library's default to 2023-10-16, so .ci/run pins stripe 6.7.0, the last 6.x, whose default
is exactly 2023-08-16 (set here all the same, as payorch sets it).
"""

import sys
import uuid
from importlib.metadata import version

import stripe

from harness import Flows, Receiver, compact, expect, pass_challenge, setting, wait_for

API_VERSION = "2023-08-16"
SANDBOX_URL = setting("SANDBOX_URL")
WEBHOOK_SECRET = setting("STRIPE_WEBHOOK_SECRET")

stripe.api_key = setting("SANDBOX_API_KEY")
stripe.api_base = SANDBOX_URL
stripe.api_version = API_VERSION
# A failed request must fail here, not be retried by the library behind the check's back.
stripe.max_network_retries = 0

# (type, id of data.object) for every event verified, and what did not verify.
events = []
bad_deliveries = []
# (type, object id) that Stripe sends for what the flows did; checked once they are done.
expected_events = []


def receive(path, headers, body):
    """The merchant's webhook endpoint: Stripe's documented verification, then 2xx."""
    if not path.startswith("/stripe/webhooks"):
        return 404, "text/plain", b"no such endpoint"
    signature = headers.get("Stripe-Signature")
    try:
        event = stripe.Webhook.construct_event(body, signature, WEBHOOK_SECRET)
    except (ValueError, stripe.error.SignatureVerificationError) as error:
        bad_deliveries.append(f"{error}: {signature} {body[:300]!r}")
        return 400, "text/plain", b"signature not verified"
    # The same delivery under another secret must not verify: the check above is not vacuous.
    try:
        stripe.Webhook.construct_event(body, signature, "whsec_not_the_sandbox_secret")
        bad_deliveries.append(f"verified under a wrong secret too: {event.id}")
    except stripe.error.SignatureVerificationError:
        pass
    events.append((event.type, event.data.object.id))
    return 200, "application/json", b'{"received": true}'


receiver = Receiver(receive)
RETURN_URL = f"{receiver.url}/return/stripe"


def create(payment_method, **params):
    """A confirmed create as a server-side integration makes it. With automatic payment
    methods on by default since 2023-08-16, Stripe asks for a `return_url` when it confirms
    (in case the method redirects), so one is always given."""
    params.setdefault("amount", 1999)
    params.setdefault("currency", "eur")
    return stripe.PaymentIntent.create(
        payment_method=payment_method, confirm=True, return_url=RETURN_URL, **params
    )


def confirmed_create_succeeds():
    intent = create("pm_card_visa", metadata={"flow": "confirmed_create"})
    expect(intent.status == "succeeded", f"status {intent.status}: {compact(intent)}")
    expect(intent.object == "payment_intent", f"object {intent.object}")
    expect(intent.amount == 1999 and intent.currency == "eur", compact(intent))
    expect(intent.amount_received == 1999, f"amount_received {intent.amount_received}")
    expect(intent.metadata["flow"] == "confirmed_create", f"metadata {intent.metadata}")
    expected_events.append(("payment_intent.succeeded", intent.id))
    return intent


def declined(payment_method, decline_code):
    try:
        create(payment_method)
    except stripe.error.CardError as error:
        expect(error.http_status == 402, f"HTTP {error.http_status}")
        expect(error.code == "card_declined", f"code {error.code}")
        body = error.json_body["error"]
        expect(body.get("decline_code") == decline_code, f"decline_code: {compact(body)}")
        intent = body.get("payment_intent") or {}
        expect(
            intent.get("status") == "requires_payment_method",
            f"the error's payment_intent: {compact(intent)}",
        )
        expected_events.append(("payment_intent.payment_failed", intent["id"]))
        return
    raise AssertionError(f"{payment_method} was not refused with a CardError")


def created_then_confirmed():
    intent = stripe.PaymentIntent.create(amount=1500, currency="eur")
    expect(intent.status == "requires_payment_method", f"status {intent.status}")
    confirmed = stripe.PaymentIntent.confirm(
        intent.id, payment_method="pm_card_mastercard", return_url=RETURN_URL
    )
    expect(confirmed.id == intent.id, f"confirmed {confirmed.id}, made {intent.id}")
    expect(confirmed.status == "succeeded", f"status {confirmed.status}: {compact(confirmed)}")
    expect(confirmed.amount_received == 1500, f"amount_received {confirmed.amount_received}")
    expected_events.append(("payment_intent.succeeded", intent.id))


def hold(amount):
    """A card authorised for `amount` and held: `capture_method=manual`."""
    intent = create("pm_card_visa", amount=amount, capture_method="manual")
    expect(intent.status == "requires_capture", f"status {intent.status}: {compact(intent)}")
    expect(intent.amount_capturable == amount, f"amount_capturable {intent.amount_capturable}")
    expect(intent.amount_received == 0, f"amount_received {intent.amount_received}")
    expected_events.append(("payment_intent.amount_capturable_updated", intent.id))
    return intent


def captured_in_full():
    intent = hold(2000)
    captured = stripe.PaymentIntent.capture(intent.id)
    expect(captured.status == "succeeded", f"status {captured.status}: {compact(captured)}")
    expect(captured.amount_received == 2000, f"amount_received {captured.amount_received}")
    expect(captured.amount_capturable == 0, f"amount_capturable {captured.amount_capturable}")
    expected_events.append(("payment_intent.succeeded", intent.id))


def captured_in_part():
    intent = hold(2000)
    captured = intent.capture(amount_to_capture=1500)
    expect(captured.status == "succeeded", f"status {captured.status}: {compact(captured)}")
    expect(captured.amount_received == 1500, f"amount_received {captured.amount_received}")
    expect(captured.amount == 2000, f"amount {captured.amount}")
    expected_events.append(("payment_intent.succeeded", intent.id))


def hold_canceled():
    intent = hold(2500)
    canceled = stripe.PaymentIntent.cancel(intent.id, cancellation_reason="requested_by_customer")
    expect(canceled.status == "canceled", f"status {canceled.status}: {compact(canceled)}")
    expect(
        canceled.cancellation_reason == "requested_by_customer",
        f"cancellation_reason {canceled.cancellation_reason}",
    )
    expect(canceled.canceled_at, f"canceled_at {canceled.canceled_at}")
    expected_events.append(("payment_intent.canceled", intent.id))
    # A canceled intent cannot be captured: Stripe's payment_intent_unexpected_state.
    try:
        stripe.PaymentIntent.capture(intent.id)
    except stripe.error.InvalidRequestError as error:
        expect(error.code == "payment_intent_unexpected_state", f"code {error.code}")
        return
    raise AssertionError("a canceled intent was captured")


def unconfirmed_canceled():
    intent = stripe.PaymentIntent.create(amount=700, currency="eur")
    canceled = intent.cancel()
    expect(canceled.status == "canceled", f"status {canceled.status}: {compact(canceled)}")
    expected_events.append(("payment_intent.canceled", intent.id))


def refunds():
    intent = create("pm_card_visa")
    first = stripe.Refund.create(payment_intent=intent.id, amount=500)
    expect(first.object == "refund", f"object {first.object}")
    expect(first.amount == 500 and first.payment_intent == intent.id, compact(first))
    expect(first.status in ("pending", "succeeded"), f"status {first.status}")

    def settled_refund():
        refund = stripe.Refund.retrieve(first.id)
        return refund if refund.status == "succeeded" else None

    settled = wait_for(f"refund {first.id} succeeded", settled_refund)
    expect(settled.id == first.id and settled.amount == 500, compact(settled))
    rest = stripe.Refund.create(payment_intent=intent.id)
    expect(rest.amount == 1499, f"the rest refunded: {rest.amount}")
    listed = stripe.Refund.list(payment_intent=intent.id)
    expect(listed.object == "list", f"object {listed.object}")
    ids = [refund.id for refund in listed.auto_paging_iter()]
    expect(sorted(ids) == sorted([first.id, rest.id]), f"listed {ids}")
    expect(
        all(refund.payment_intent == intent.id for refund in listed.data),
        f"a refund of another intent listed: {compact(listed)}",
    )
    try:
        stripe.Refund.create(payment_intent=intent.id, amount=1)
    except stripe.error.InvalidRequestError as error:
        expect(error.code == "charge_already_refunded", f"code {error.code}")
    else:
        raise AssertionError("a third refund of a fully refunded payment was made")
    expected_events.append(("refund.created", first.id))
    expected_events.append(("refund.created", rest.id))


def retrieve_and_list():
    made = [create("pm_card_visa", amount=100 + n).id for n in range(3)]
    for intent_id in made:
        retrieved = stripe.PaymentIntent.retrieve(intent_id)
        expect(retrieved.id == intent_id, f"retrieved {retrieved.id} for {intent_id}")
        expect(retrieved.status == "succeeded", f"status {retrieved.status}")
        expected_events.append(("payment_intent.succeeded", intent_id))
    newest = stripe.PaymentIntent.list(limit=3)
    expect(newest.object == "list" and len(newest.data) == 3, compact(newest))
    expect([i.id for i in newest.data] == made[::-1], f"newest first: {newest.data}, {made}")
    # The library pages with starting_after until has_more is false.
    paged = [i.id for i in stripe.PaymentIntent.list(limit=2).auto_paging_iter()]
    expect(len(paged) == len(set(paged)), f"an intent listed twice: {paged}")
    expect(set(made) <= set(paged), f"{made} not all in {paged}")
    try:
        stripe.PaymentIntent.retrieve("pi_doesnotexist000000000000")
    except stripe.error.InvalidRequestError as error:
        expect(error.http_status == 404, f"HTTP {error.http_status}")
        expect(error.code == "resource_missing", f"code {error.code}")
        return
    raise AssertionError("an unknown intent was retrieved")


def same_key_same_intent():
    key = f"provider-libraries-{uuid.uuid4()}"
    first = create("pm_card_visa", amount=4200, idempotency_key=key)
    again = create("pm_card_visa", amount=4200, idempotency_key=key)
    expect(again.id == first.id, f"the same key made {first.id} and {again.id}")
    expect(again.status == first.status == "succeeded", f"{first.status}, {again.status}")
    expected_events.append(("payment_intent.succeeded", first.id))
    try:
        create("pm_card_visa", amount=4300, idempotency_key=key)
    except stripe.error.IdempotencyError as error:
        expect(error.http_status == 400, f"HTTP {error.http_status}")
        return
    raise AssertionError("the same key with other parameters was not refused")


def three_d_secure():
    intent = create("pm_card_threeDSecure2Required", amount=3100)
    expect(intent.status == "requires_action", f"status {intent.status}: {compact(intent)}")
    action = intent.next_action
    expect(action and action.type == "redirect_to_url", f"next_action {compact(action)}")
    page = action.redirect_to_url.url
    expected_events.append(("payment_intent.succeeded", intent.id))
    status, ended_at = pass_challenge(page)
    expect(status == 200, f"the challenge page answered {status}")
    expect(ended_at.startswith(RETURN_URL), f"the browser ended at {ended_at}")
    query = receiver.returned("/return/stripe?")
    expect(query, "the shopper never came back to the return_url")
    expect(query.get("payment_intent") == [intent.id], f"back with {query}")
    expect(query.get("redirect_status") == ["succeeded"], f"back with {query}")
    done = stripe.PaymentIntent.retrieve(intent.id)
    expect(done.status == "succeeded", f"status {done.status} after the challenge")


def wrong_key_refused():
    try:
        stripe.PaymentIntent.list(limit=1, api_key="sk_test_not_the_sandbox_key")
    except stripe.error.AuthenticationError as error:
        expect(error.http_status == 401, f"HTTP {error.http_status}")
        return
    raise AssertionError("a wrong API key was let in")


def webhooks_arrived():
    def missing():
        return [e for e in expected_events if e not in events]

    try:
        wait_for("every expected event", lambda: not missing() or bad_deliveries)
    finally:
        expect(not bad_deliveries, f"deliveries that did not verify: {bad_deliveries}")
        expect(not missing(), f"events never delivered: {missing()}; delivered: {events}")
    return f"{len(events)} events verified, the {len(expected_events)} expected among them"


def main():
    receiver.wait_until_pointed_at()
    expect(stripe.api_version == API_VERSION, f"api_version {stripe.api_version}")
    flows = Flows(f"stripe {version('stripe')}")
    flows.run("create with confirm=true succeeds", confirmed_create_succeeds)
    flows.run(
        "pm_card_chargeDeclined raises CardError card_declined",
        declined,
        "pm_card_chargeDeclined",
        "generic_decline",
    )
    flows.run(
        "pm_card_chargeDeclinedInsufficientFunds raises CardError insufficient_funds",
        declined,
        "pm_card_chargeDeclinedInsufficientFunds",
        "insufficient_funds",
    )
    flows.run("create, then confirm", created_then_confirmed)
    flows.run("manual capture, captured in full", captured_in_full)
    flows.run("manual capture, captured in part", captured_in_part)
    flows.run("manual capture, canceled", hold_canceled)
    flows.run("unconfirmed intent canceled", unconfirmed_canceled)
    flows.run("refunds created, retrieved, listed by payment_intent", refunds)
    flows.run("intents retrieved and listed", retrieve_and_list)
    flows.run("the same idempotency_key gives the same intent", same_key_same_intent)
    flows.run("3-D Secure challenge passed", three_d_secure)
    flows.run("a wrong API key raises AuthenticationError", wrong_key_refused)
    flows.run("webhooks verified by stripe.Webhook.construct_event", webhooks_arrived)
    receiver.close()
    return flows.finish()


if __name__ == "__main__":
    sys.exit(main())
