//! `POST /v71/payments/details` on the Adyen face (docs/DESIGN.md, "The provider protocol"):
//! once the shopper is back from the challenge page (`challenge`) with a `redirectResult`,
//! the payment's outcome, as Adyen's details answer gives it: `Authorised` (held or taken, as
//! the payment asked) or `Refused` with `refusalReason` `3D Not Authenticated`, with the
//! payment's `pspReference` and `merchantReference` (v71's `PaymentDetailsResponse`: "the
//! reference used during the /payments request", by which the merchant finds its attempt:
//! the `redirectResult` itself names nothing the merchant knows). The challenge decided it
//! when the shopper pressed a button, and
//! its `AUTHORISATION` notification went then, so the merchant learns it even from a shopper
//! who never comes back; a `redirectResult` sent again answers the same.

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::json;

use super::adyen::{gone, parse, refusal, refuse_unauthorized, validation};
use super::redirect_result;
use super::store::Lookup;
use super::Sandbox;
use payorch_wire::adyen::PaymentDetailsRequest;
use payorch_wire::stripe::PaymentIntent;

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v71/payments/details", web::post().to(details));
}

async fn details(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let (request, _) = match parse::<PaymentDetailsRequest>(&body, "PaymentDetailsRequest") {
        Ok(parsed) => parsed,
        Err(refused) => return *refused,
    };
    let Some(token) = request.details.redirect_result else {
        return validation(
            "14_002",
            "Required field 'details.redirectResult' is not provided.",
        );
    };
    let invalid = || validation("14_018", "Invalid payload provided");
    let Some((id, client_secret)) = redirect_result::decode(&token) else {
        return invalid();
    };
    let challenged = match sb.store.challenge(&id) {
        Lookup::Found(challenged) => challenged,
        Lookup::Forgotten => {
            return gone(&format!(
                "The sandbox no longer keeps payment {id} (--keep-intents)."
            ))
        }
        Lookup::Missing => return invalid(),
    };
    let intent = &challenged.intent;
    let made_here = super::adyen::is_adyen(intent)
        && intent.client_secret.as_deref() == Some(client_secret.as_str());
    match challenged.authenticated {
        Some(passed) if made_here => HttpResponse::Ok().json(answer(intent, passed)),
        // No challenge page made this: it was never shown a decision.
        _ => invalid(),
    }
}

/// The outcome of the authentication, whatever became of the payment since (captured,
/// canceled): the same answer every time.
fn answer(intent: &PaymentIntent, passed: bool) -> serde_json::Value {
    let mut answer = json!({
        "pspReference": intent.id,
        "merchantReference": intent.metadata.get("attempt_id").cloned().unwrap_or_default(),
        "amount": {"value": intent.amount, "currency": intent.currency.to_ascii_uppercase()},
        "paymentMethod": {"brand": "visa", "type": "scheme"},
        "resultCode": if passed { "Authorised" } else { "Refused" },
    });
    if !passed {
        let refused = refusal(intent);
        answer["refusalReason"] = json!(refused.reason);
        answer["refusalReasonCode"] = json!(refused.code);
    }
    answer
}
