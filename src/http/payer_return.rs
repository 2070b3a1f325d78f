//! `GET /v1/payments/{id}/return`: where a provider sends the payer back after a 3-D Secure
//! challenge (docs/guides/three-d-secure.md, "3-D Secure"), so that payorch finishes the payment (Adyen's
//! `/payments/details`) before the merchant's page shows anything. A browser comes here, so
//! it takes no API key: it only ever makes payorch ask the provider, never believes the
//! query, and asks only about an attempt waiting for its payer, whose unguessable id the
//! payer's own redirect carries. Then the payer goes on to the merchant's `return_url`.
//! Returns are limited per address, and a payment's provider is asked only every few seconds
//! (docs/PRODUCTION.md, "Limits and the addresses payorch believes").

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use reqwest::Url;

use super::assets::made_page;
use super::errors::ApiError;
use super::payments::parse_payment_id;
use super::AppState;
use crate::payments::attempts::{payer_return, PaymentAttempt};
use crate::payments::status::AttemptStatus;

/// Where the payer's browser comes back after 3-D Secure
///
/// Not for your server: the provider sends the payer's browser here after a challenge (the URL is
/// in `next_action`). payorch asks the provider what the challenge decided and redirects to your
/// `return_url` with `payment_id` added; without a `return_url` it shows a page with the payment's
/// status. Needs no API key (docs/guides/three-d-secure.md, "3-D Secure").
#[utoipa::path(get, path = "/v1/payments/{id}/return", tag = "payments",
    params(
        ("id" = String, Path, description = "payment attempt id, `pay_…`; the provider adds its own query parameters, which are passed on to it", example = json!(crate::views::examples::PAYMENT)),
    ),
    responses(
        (status = 303, description = "to the merchant's `return_url` with `payment_id` added, once payorch asked the provider what the challenge decided (the payment may still be `pending`: poll it)",
            headers(("Location" = String, description = "the merchant's `return_url` and `payment_id=pay_…`"))),
        (status = 200, description = "a page saying the payment's status, for a payment made without a `return_url`", content_type = "text/html", body = String, example = json!(crate::views::examples::RETURN_PAGE)),
        (status = 400, body = crate::http::errors::Problem, description = "invalid_request: the query string cannot be read"),
        (status = 404, body = crate::http::errors::Problem, description = "no such payment"),
        (status = 429, body = crate::http::errors::Problem, description = "rate_limited: too many returns from this address; retry after `Retry-After` seconds (`RateLimit-Policy` and `RateLimit` say the quota). Within seconds of a payment's second return, payorch answers from what it knows without asking the provider",
            headers(("Retry-After" = u64, description = "seconds"), ("RateLimit-Policy" = String), ("RateLimit" = String))),
        (status = 503, body = crate::http::errors::Problem, description = "unavailable: the database cannot be reached"),
    ))]
pub async fn payer_returned(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_payment_id(&path)?;
    let params = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|err| ApiError::InvalidRequest(format!("the query string does not fit: {err}")))?
        .into_inner();
    let checks = &state.limits.payer_checks;
    let attempt = payer_return::payer_returned(&state.pool, &state.payments, checks, id, &params)
        .await?
        .ok_or(ApiError::NotFound("payment"))?;
    tracing::Span::current().record("order", tracing::field::display(attempt.order_id));
    Ok(match merchant_page(&attempt) {
        Some(url) => HttpResponse::SeeOther()
            .insert_header((header::LOCATION, url.as_str()))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((header::REFERRER_POLICY, "no-referrer"))
            .finish(),
        None => made_page(status_page(&attempt)),
    })
}

/// The merchant's `return_url` with the payment's id added: what the merchant's page needs
/// to ask its server (which asks payorch) how the payment went. Nothing the provider added is
/// passed on.
fn merchant_page(attempt: &PaymentAttempt) -> Option<Url> {
    let mut url = Url::parse(attempt.return_url.as_deref()?).ok()?;
    url.query_pairs_mut()
        .append_pair("payment_id", &attempt.id.to_string());
    Some(url)
}

/// For a payment with no merchant page to go back to: its status, in words.
fn status_page(attempt: &PaymentAttempt) -> String {
    let sentence = match attempt.status {
        AttemptStatus::Succeeded => "Your payment succeeded.",
        AttemptStatus::Authorized => "Your payment is authorized: the money is held.",
        AttemptStatus::Failed => "Your payment was declined. Nothing was charged.",
        AttemptStatus::Canceled => "Your payment was canceled. Nothing was charged.",
        AttemptStatus::Created | AttemptStatus::Pending => {
            "Your payment is being confirmed; the shop will be told the outcome."
        }
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Payment {id}</title></head>\n<body>\n<h1>Payment {id}</h1>\n\
         <p id=\"status\" data-status=\"{status}\">{sentence} You may close this page.</p>\n\
         </body></html>\n",
        id = attempt.id,
        status = attempt.status.as_str(),
    )
}
