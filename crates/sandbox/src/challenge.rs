//! The 3-D Secure challenge page the sandbox serves in the card issuer's place, for both
//! faces (docs/DESIGN.md, "The provider protocol"): `GET /__sandbox/3ds/{id}` shows two
//! buttons, `Complete` (element id `complete`) and `Fail` (`fail`), forms that POST to
//! `…/complete` and `…/fail`. The first of them decides: a completed challenge charges the
//! card as a good card is charged (or only authorises it, for a manual capture), a failed one
//! declines it; each with its webhook or notification. Then the browser goes back to the
//! merchant, `303` to the return URL with Stripe's `payment_intent`,
//! `payment_intent_client_secret` and `redirect_status`, or with Adyen's `redirectResult`;
//! without a return URL, a page says the customer may close it.
//!
//! A second click, or a click after the intent was canceled, moves nothing: the page shows
//! the intent's state. A customer who leaves the page does nothing; the intent waits in
//! `requires_action` until it is canceled.

use actix_web::http::{header, StatusCode};
use actix_web::web;
use actix_web::{HttpResponse, HttpResponseBuilder};

use super::protocol::is_marked_adyen;
use super::redirect_result;
use super::store::{Challenged, Lookup};
use super::Sandbox;
use payorch_wire::stripe::PaymentIntent;

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/__sandbox/3ds/{id}", web::get().to(show))
        .route("/__sandbox/3ds/{id}/complete", web::post().to(complete))
        .route("/__sandbox/3ds/{id}/fail", web::post().to(fail));
}

async fn show(sb: web::Data<Sandbox>, id: web::Path<String>) -> HttpResponse {
    match sb.store.challenge(&id) {
        Lookup::Found(c) if c.intent.status == "requires_action" => challenge_page(&c.intent),
        Lookup::Found(c) => state_page(&c),
        Lookup::Forgotten => gone(&id),
        Lookup::Missing => not_found(&id),
    }
}

async fn complete(sb: web::Data<Sandbox>, id: web::Path<String>) -> HttpResponse {
    decide(&sb, &id, true)
}

async fn fail(sb: web::Data<Sandbox>, id: web::Path<String>) -> HttpResponse {
    decide(&sb, &id, false)
}

/// The customer passed (`passed`) or failed the challenge of intent `id`.
fn decide(sb: &Sandbox, id: &str, passed: bool) -> HttpResponse {
    let challenged = match sb.store.settle_challenge(id, passed) {
        Lookup::Found(c) => c,
        Lookup::Forgotten => return gone(id),
        Lookup::Missing => return not_found(id),
    };
    if !challenged.decided_now {
        return state_page(&challenged);
    }
    let intent = &challenged.intent;
    let kind = match intent.status.as_str() {
        "requires_capture" => "payment_intent.amount_capturable_updated",
        "succeeded" => "payment_intent.succeeded",
        _ => "payment_intent.payment_failed",
    };
    // The customer's doing, not an API request's: Stripe's event names no request.
    sb.announce(kind, intent, None);
    match way_back(&challenged) {
        Some(url) => HttpResponse::SeeOther()
            .insert_header((header::LOCATION, url))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish(),
        None => page(
            StatusCode::OK,
            "Authentication finished",
            &format!(
                "<p>{} You may close this page.</p>",
                outcome_sentence(&challenged)
            ),
        ),
    }
}

/// The return URL with what the merchant's page reads there, once the challenge was decided:
/// Stripe's `payment_intent`, `payment_intent_client_secret` and `redirect_status`, or Adyen's
/// `redirectResult`.
fn way_back(c: &Challenged) -> Option<String> {
    let passed = c.authenticated?;
    let mut url = reqwest::Url::parse(c.return_url.as_deref()?).ok()?;
    let intent = &c.intent;
    let secret = intent.client_secret.clone().unwrap_or_default();
    if is_marked_adyen(&intent.metadata) {
        url.query_pairs_mut()
            .append_pair("redirectResult", &redirect_result::encode(&secret));
    } else {
        let status = if passed { "succeeded" } else { "failed" };
        url.query_pairs_mut()
            .append_pair("payment_intent", &intent.id)
            .append_pair("payment_intent_client_secret", &secret)
            .append_pair("redirect_status", status);
    }
    Some(url.into())
}

fn outcome_sentence(c: &Challenged) -> &'static str {
    match c.authenticated {
        Some(true) => "You completed the authentication.",
        Some(false) => "The authentication failed.",
        None => "",
    }
}

fn challenge_page(intent: &PaymentIntent) -> HttpResponse {
    let id = escape(&intent.id);
    let body = format!(
        "<p>Sandbox bank: confirm the payment of <strong>{amount} {currency}</strong> \
         ({id}).</p>\n\
         <form method=\"post\" action=\"/__sandbox/3ds/{id}/complete\">\
         <button id=\"complete\" type=\"submit\">Complete</button></form>\n\
         <form method=\"post\" action=\"/__sandbox/3ds/{id}/fail\">\
         <button id=\"fail\" type=\"submit\">Fail</button></form>",
        amount = intent.amount,
        currency = escape(&intent.currency.to_ascii_uppercase()),
    );
    page(StatusCode::OK, "3-D Secure challenge", &body)
}

/// The page of an intent whose challenge is over (or was never reached): nothing moves.
fn state_page(c: &Challenged) -> HttpResponse {
    let mut body = format!(
        "<p id=\"state\" data-status=\"{status}\">{sentence} This payment is {status}: \
         nothing more happens here.</p>",
        status = escape(&c.intent.status),
        sentence = outcome_sentence(c),
    );
    match way_back(c) {
        Some(url) => body.push_str(&format!(
            "\n<p><a id=\"return\" href=\"{}\">Back to the shop</a></p>",
            escape(&url)
        )),
        None => body.push_str("\n<p>You may close this page.</p>"),
    }
    page(StatusCode::OK, "Authentication over", &body)
}

fn not_found(id: &str) -> HttpResponse {
    let body = format!("<p>No such payment: {}.</p>", escape(id));
    page(StatusCode::NOT_FOUND, "No such payment", &body)
}

/// docs/operations/running.md, "The sandbox's memory": made here and no longer kept, which is not "never made".
fn gone(id: &str) -> HttpResponse {
    let body = format!(
        "<p>The sandbox no longer keeps payment {} (--keep-intents).</p>",
        escape(id)
    );
    page(StatusCode::GONE, "Payment forgotten", &body)
}

/// A whole page, with no external assets.
fn page(status: StatusCode, title: &str, body: &str) -> HttpResponse {
    HttpResponseBuilder::new(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n{body}\n</body></html>\n"
        ))
}

/// `text` safe in HTML text and in a quoted attribute.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_outside_cannot_become_markup() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
