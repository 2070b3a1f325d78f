"""Adyen's own Python library, unpatched, drives the sandbox's Adyen face.

What this proves: an integrator who points the official `Adyen` package from PyPI at the
sandbox (each service's `baseUrl`, the library's documented "Customizing Base URL") can run
Adyen's Checkout API v71 flows against it as against Adyen's test platform, and gets from
the library what Adyen's API reference says they get: `/payments` answered `Authorised`,
`Refused` for a declined card, and `RedirectShopper` for a 3-D Secure card, whose redirect a
script follows as a browser would and whose `redirectResult` `/payments/details` turns into
`Authorised`; a hold (`additionalData.manualCapture`) captured in full and in part,
canceled by its pspReference, and canceled by its merchant reference alone (`/cancels`,
a technical cancel); a refund; the same `Idempotency-Key` answering the same payment; a
wrong API key raised as `AdyenAPIAuthenticationError`. Every notification the sandbox sends
is answered `[accepted]` once each of its items' HMAC signatures verified with the
library's own `Adyen.util.is_valid_hmac_notification`, and the notifications Adyen documents
for these flows must arrive, each about its own payment.

Run by tests/provider_libraries.rs, which starts the sandbox and passes it in the
environment: SANDBOX_URL, SANDBOX_API_KEY, ADYEN_HMAC_KEY. payorch speaks Checkout API v71
(docs/DESIGN.md, "The provider protocol"); .ci/run pins Adyen 15.0.2, the last release
whose Checkout services call v71 (16.0.0 moved them to v72).
"""

import json
import sys
import uuid
from importlib.metadata import version

import Adyen
from Adyen.exceptions import AdyenAPIAuthenticationError
from Adyen.util import is_valid_hmac_notification

from harness import Flows, Receiver, compact, expect, pass_challenge, setting, wait_for

CHECKOUT_VERSION = "v71"
# Where the library sends Checkout requests on Adyen's test platform, version included.
ADYEN_TEST_CHECKOUT = f"https://checkout-test.adyen.com/{CHECKOUT_VERSION}"
SANDBOX_URL = setting("SANDBOX_URL")
API_KEY = setting("SANDBOX_API_KEY")
HMAC_KEY = setting("ADYEN_HMAC_KEY")
MERCHANT = "PayorchLibrariesECOM"
SHOPPER = "shopper-provider-libraries"
# A run's references are its own, whatever the sandbox already holds.
RUN = uuid.uuid4().hex[:8]


def checkout_for(api_key):
    """The library's Checkout service, configured as its README says: the client's API key
    and platform, and each service's `baseUrl` moved from Adyen's host to the sandbox's."""
    adyen = Adyen.Adyen()
    adyen.client.xapikey = api_key
    adyen.client.platform = "test"
    adyen.client.http_timeout = 10
    checkout = adyen.checkout
    for service in (checkout.payments_api, checkout.modifications_api):
        if service.baseUrl != ADYEN_TEST_CHECKOUT:
            sys.exit(f"this Adyen library calls {service.baseUrl}, not Checkout {CHECKOUT_VERSION}")
        service.baseUrl = f"{SANDBOX_URL}/{CHECKOUT_VERSION}"
    return checkout


checkout = checkout_for(API_KEY)

# Every notification item received, and what did not verify.
notifications = []
bad_deliveries = []
# Predicates over an item that must each match one item received, with what they stand for.
expected_notifications = []


def receive(path, headers, body):
    """The merchant's notification endpoint: each item's HMAC verified, as Adyen's docs ask,
    then `[accepted]`, the answer Adyen expects."""
    if not path.startswith("/adyen/notifications"):
        return 404, "text/plain", b"no such endpoint"
    try:
        entries = json.loads(body)["notificationItems"]
        items = [entry["NotificationRequestItem"] for entry in entries]
        for item in items:
            if not is_valid_hmac_notification(item, HMAC_KEY):
                raise ValueError(f"HMAC signature does not verify: {compact(item)}")
            # Under another key it must not verify: the check above is not vacuous.
            if is_valid_hmac_notification(item, "00" * 32):
                raise ValueError(f"HMAC signature verifies under a wrong key: {compact(item)}")
    except (ValueError, KeyError, TypeError) as error:
        bad_deliveries.append(f"{error!r}: {body[:500]!r}")
        return 401, "text/plain", b"not verified"
    notifications.extend(items)
    return 200, "text/plain", b"[accepted]"


receiver = Receiver(receive)


def expect_notification(what, **fields):
    """A notification item with these fields (`success` as Adyen's text) must arrive."""
    expected_notifications.append((what, fields))


def pay(token, reference, amount=1999, idempotency_key=None, **extra):
    """`/payments` with a stored card, the shopper not in session: the fields Adyen's docs
    give for a card-on-file payment."""
    request = {
        "merchantAccount": MERCHANT,
        "amount": {"value": amount, "currency": "EUR"},
        "reference": reference,
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
        "shopperReference": SHOPPER,
        "shopperInteraction": "ContAuth",
        "recurringProcessingModel": "UnscheduledCardOnFile",
    }
    request.update(extra)
    key = idempotency_key or f"{reference}-payment"
    result = checkout.payments_api.payments(request, idempotency_key=key)
    expect(result.status_code == 200, f"HTTP {result.status_code}: {result.message}")
    return result.message


def authorised(answer, reference, amount):
    expect(answer.get("resultCode") == "Authorised", f"answer {compact(answer)}")
    expect(answer.get("pspReference"), f"no pspReference: {compact(answer)}")
    expect(answer.get("merchantReference") == reference, f"answer {compact(answer)}")
    expect(answer.get("amount") == {"value": amount, "currency": "EUR"}, compact(answer))
    expect_notification(
        f"AUTHORISATION true of {reference}",
        eventCode="AUTHORISATION",
        success="true",
        pspReference=answer["pspReference"],
        merchantReference=reference,
    )
    return answer["pspReference"]


def payment_authorised():
    reference = f"authorised-{RUN}"
    authorised(pay("pm_card_visa", reference), reference, 1999)


def payment_refused():
    reference = f"refused-{RUN}"
    answer = pay("pm_card_chargeDeclined", reference)
    expect(answer.get("resultCode") == "Refused", f"answer {compact(answer)}")
    expect(answer.get("refusalReason"), f"no refusalReason: {compact(answer)}")
    expect(answer.get("pspReference"), f"no pspReference: {compact(answer)}")
    expect_notification(
        f"AUTHORISATION false of {reference}",
        eventCode="AUTHORISATION",
        success="false",
        pspReference=answer["pspReference"],
    )


def hold(reference, amount):
    """A card authorised and held for a later capture: Adyen's manual capture per payment."""
    answer = pay("pm_card_visa", reference, amount, additionalData={"manualCapture": "true"})
    return authorised(answer, reference, amount)


def modification(answer, psp, reference, what):
    """What Adyen answers a modification: `201 received`, before it is made."""
    expect(answer.get("status") == "received", f"{what}: {compact(answer)}")
    expect(answer.get("paymentPspReference") == psp, f"{what}: {compact(answer)}")
    expect(answer.get("pspReference"), f"{what} has no pspReference: {compact(answer)}")
    expect(answer.get("reference") == reference, f"{what}: {compact(answer)}")
    expect(answer.get("merchantAccount") == MERCHANT, f"{what}: {compact(answer)}")
    return answer["pspReference"]


def captured(amount, held):
    reference = f"capture-{amount}-of-{held}-{RUN}"
    psp = hold(reference, held)
    request = {
        "merchantAccount": MERCHANT,
        "amount": {"value": amount, "currency": "EUR"},
        "reference": f"{reference}-capture",
    }
    result = checkout.modifications_api.capture_authorised_payment(
        request, psp, idempotency_key=f"{reference}-capture"
    )
    expect(result.status_code == 201, f"HTTP {result.status_code}")
    answer = result.message
    capture = modification(answer, psp, f"{reference}-capture", "the capture")
    expect(answer.get("amount") == request["amount"], f"the capture: {compact(answer)}")
    expect_notification(
        f"CAPTURE true of {psp}",
        eventCode="CAPTURE",
        success="true",
        originalReference=psp,
        pspReference=capture,
        amount={"value": amount, "currency": "EUR"},
    )


def canceled_by_psp():
    reference = f"cancel-{RUN}"
    psp = hold(reference, 2500)
    request = {"merchantAccount": MERCHANT, "reference": f"{reference}-cancel"}
    result = checkout.modifications_api.cancel_authorised_payment_by_psp_reference(
        request, psp, idempotency_key=f"{reference}-cancel"
    )
    expect(result.status_code == 201, f"HTTP {result.status_code}")
    cancel = modification(result.message, psp, f"{reference}-cancel", "the cancel")
    expect_notification(
        f"CANCELLATION true of {psp}",
        eventCode="CANCELLATION",
        success="true",
        originalReference=psp,
        pspReference=cancel,
    )


def technical_cancel():
    """The merchant knows its own reference only (an answer lost, a shopper gone to a
    challenge): `/cancels` with `paymentReference`, told as `TECHNICAL_CANCEL`."""
    reference = f"technical-cancel-{RUN}"
    psp = hold(reference, 2600)
    request = {
        "merchantAccount": MERCHANT,
        "paymentReference": reference,
        "reference": f"{reference}-cancel",
    }
    result = checkout.modifications_api.cancel_authorised_payment(
        request, idempotency_key=f"{reference}-cancel"
    )
    expect(result.status_code == 201, f"HTTP {result.status_code}")
    answer = result.message
    expect(answer.get("status") == "received", f"the cancel: {compact(answer)}")
    expect(answer.get("paymentReference") == reference, f"the cancel: {compact(answer)}")
    expect(answer.get("pspReference"), f"the cancel has no pspReference: {compact(answer)}")
    expect_notification(
        f"TECHNICAL_CANCEL true of {reference}",
        eventCode="TECHNICAL_CANCEL",
        success="true",
        originalReference=psp,
        pspReference=answer["pspReference"],
    )


def refunded():
    reference = f"refund-{RUN}"
    psp = authorised(pay("pm_card_visa", reference), reference, 1999)
    request = {
        "merchantAccount": MERCHANT,
        "amount": {"value": 500, "currency": "EUR"},
        "reference": f"{reference}-refund",
    }
    result = checkout.modifications_api.refund_captured_payment(
        request, psp, idempotency_key=f"{reference}-refund"
    )
    expect(result.status_code == 201, f"HTTP {result.status_code}")
    answer = result.message
    refund = modification(answer, psp, f"{reference}-refund", "the refund")
    expect(answer.get("amount") == request["amount"], f"the refund: {compact(answer)}")
    expect_notification(
        f"REFUND true of {psp}",
        eventCode="REFUND",
        success="true",
        originalReference=psp,
        pspReference=refund,
        amount={"value": 500, "currency": "EUR"},
    )


def three_d_secure():
    """The shopper is in session: a redirect to the issuer's challenge, then back to
    `returnUrl` with `redirectResult`, which `/payments/details` completes."""
    reference = f"three-d-secure-{RUN}"
    return_url = f"{receiver.url}/return/adyen/{reference}"
    answer = pay(
        "pm_card_threeDSecure2Required",
        reference,
        3100,
        shopperInteraction="Ecommerce",
        recurringProcessingModel="CardOnFile",
        channel="Web",
        returnUrl=return_url,
        browserInfo={
            "userAgent": "Mozilla/5.0 (X11; Linux x86_64) provider-libraries",
            "acceptHeader": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "language": "en-GB",
            "colorDepth": 24,
            "screenHeight": 1080,
            "screenWidth": 1920,
            "timeZoneOffset": 0,
            "javaEnabled": False,
        },
    )
    expect(answer.get("resultCode") == "RedirectShopper", f"answer {compact(answer)}")
    action = answer.get("action") or {}
    expect(action.get("type") == "redirect", f"action {compact(action)}")
    expect(action.get("method") == "GET", f"a GET redirect the script can follow: {action}")
    expect(action.get("url"), f"action {compact(action)}")
    status, ended_at = pass_challenge(action["url"])
    expect(status == 200, f"the challenge page answered {status}")
    expect(ended_at.startswith(return_url), f"the browser ended at {ended_at}")
    query = receiver.returned(f"/return/adyen/{reference}?")
    expect(query and query.get("redirectResult"), f"back at returnUrl with {query}")
    details = checkout.payments_api.payments_details(
        {"details": {"redirectResult": query["redirectResult"][0]}}
    ).message
    psp = authorised(details, reference, 3100)
    again = checkout.payments_api.payments_details(
        {"details": {"redirectResult": query["redirectResult"][0]}}
    ).message
    expect(again.get("pspReference") == psp, f"details again: {compact(again)}")


def same_key_same_payment():
    reference = f"idempotent-{RUN}"
    key = f"provider-libraries-{uuid.uuid4()}"
    first = pay("pm_card_visa", reference, 4200, idempotency_key=key)
    again = pay("pm_card_visa", reference, 4200, idempotency_key=key)
    psp = authorised(first, reference, 4200)
    expect(again.get("pspReference") == psp, f"{compact(first)} then {compact(again)}")
    expect(again.get("resultCode") == "Authorised", f"again {compact(again)}")


def wrong_key_refused():
    try:
        checkout_for("not-the-sandbox-key").payments_api.payments(
            {
                "merchantAccount": MERCHANT,
                "amount": {"value": 100, "currency": "EUR"},
                "reference": f"wrong-key-{RUN}",
                "paymentMethod": {"type": "scheme", "storedPaymentMethodId": "pm_card_visa"},
                "shopperReference": SHOPPER,
                "shopperInteraction": "ContAuth",
                "recurringProcessingModel": "UnscheduledCardOnFile",
            }
        )
    except AdyenAPIAuthenticationError as error:
        expect(error.status_code == 401, f"HTTP {error.status_code}")
        return
    raise AssertionError("a wrong API key was let in")


def matches(item, fields):
    return all(item.get(name) == value for name, value in fields.items())


def notifications_arrived():
    def missing():
        return [
            what
            for what, fields in expected_notifications
            if not any(matches(item, fields) for item in notifications)
        ]

    try:
        wait_for("every expected notification", lambda: not missing() or bad_deliveries)
    finally:
        expect(not bad_deliveries, f"deliveries that did not verify: {bad_deliveries}")
        expect(
            not missing(),
            f"notifications never delivered: {missing()}; delivered: {compact(notifications)}",
        )
        strangers = [i for i in notifications if i.get("merchantAccountCode") != MERCHANT]
        expect(not strangers, f"items for another merchant account: {compact(strangers)}")
    return (
        f"{len(notifications)} items verified, the {len(expected_notifications)} expected "
        "among them"
    )


def main():
    receiver.wait_until_pointed_at()
    flows = Flows(f"Adyen {version('Adyen')}")
    flows.run("/payments Authorised", payment_authorised)
    flows.run("/payments Refused for a declined card", payment_refused)
    flows.run("manual capture, captured in full", captured, 2000, 2000)
    flows.run("manual capture, captured in part", captured, 1500, 2000)
    flows.run("/payments/{psp}/cancels", canceled_by_psp)
    flows.run("/cancels by reference (technical cancel)", technical_cancel)
    flows.run("/payments/{psp}/refunds", refunded)
    flows.run("3-D Secure: RedirectShopper, challenge, /payments/details", three_d_secure)
    flows.run("the same Idempotency-Key gives the same payment", same_key_same_payment)
    flows.run("a wrong API key raises AdyenAPIAuthenticationError", wrong_key_refused)
    flows.run("notifications verified by Adyen.util, answered [accepted]", notifications_arrived)
    receiver.close()
    return flows.finish()


if __name__ == "__main__":
    sys.exit(main())
