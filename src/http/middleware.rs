//! Cross-cutting request handling: request ids, the body size guard, the root tracing span.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, ResponseError};
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RequestId, RootSpanBuilder};

use crate::http::errors::ApiError;
use crate::http::BODY_LIMIT;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Returns the request id that [`tracing_actix_web::TracingLogger`] gave the request.
pub async fn request_id_header(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let request_id = req.extensions().get::<RequestId>().copied();
    let mut response = next.call(req).await?;
    if let Some(id) = request_id {
        if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
            response.headers_mut().insert(REQUEST_ID, value);
        }
    }
    Ok(response)
}

/// Refuses a declared body over the limit before anything reads it, whatever the route.
/// Bodies without a length (chunked) meet the same limit in the JSON and payload extractors.
pub async fn body_limit(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > BODY_LIMIT as u64) {
        let response = ApiError::PayloadTooLarge { limit: BODY_LIMIT }.error_response();
        return Ok(req.into_response(response).map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

/// The root span of every request, with the fields later layers fill in.
pub struct PayorchRootSpan;

impl RootSpanBuilder for PayorchRootSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        tracing_actix_web::root_span!(
            request,
            merchant = tracing::field::Empty,
            idempotency_key = tracing::field::Empty,
            idempotency_outcome = tracing::field::Empty,
        )
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        DefaultRootSpanBuilder::on_request_end(span, outcome);
    }
}
