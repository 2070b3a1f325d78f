//! Cross-cutting request handling: request ids, the body guard (size and time), the root
//! tracing span.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::web::{self, BytesMut};
use actix_web::{Error, HttpMessage, ResponseError};
use futures_util::StreamExt;
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RequestId, RootSpanBuilder};

use crate::http::card_data::contains_card_number;
use crate::http::client_address::client_of;
use crate::http::connections::ClientLimits;
use crate::http::errors::ApiError;
use crate::http::{AppState, BODY_LIMIT};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Returns the request id that [`tracing_actix_web::TracingLogger`] gave the request.
pub async fn request_id_header(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let request_id = req.extensions().get::<RequestId>().copied();
    let mut response = next.call(req).await?;
    let headers = response.headers_mut();
    if let Some(id) = request_id {
        if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
            headers.insert(REQUEST_ID, value);
        }
    }
    // Every answer is what it says it is, and none is kept by a cache along the way unless
    // it says so itself (the pages' assets do): an API answer may hold a secret shown once
    // (an endpoint's signing secret) or a payment's details (issue #40).
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    Ok(response)
}

/// The longest request target (path and query) payorch reads; anything longer is `414`.
/// (actix-web's own limit on a request's head is larger, so such a request reaches this.)
pub const URI_LIMIT: usize = 8 * 1024;

/// Refuses a request whose target is over [`URI_LIMIT`], or whose target (path and query) or
/// `User-Agent` looks like it holds a card number: both are written to every request's log
/// line. Wrapped outside the request logger, so nothing of such a request is logged but this
/// warning, which names the place and never the value.
pub async fn check_request_head(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let target = req.uri().path_and_query().map_or("", |pq| pq.as_str());
    if target.len() > URI_LIMIT {
        let error = ApiError::UriTooLong { limit: URI_LIMIT };
        return Ok(req
            .into_response(error.error_response())
            .map_into_right_body());
    }
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    let field = if contains_card_number(&percent_decoded(target)) {
        Some("request target")
    } else if user_agent.is_some_and(|ua| contains_card_number(&ua)) {
        Some("User-Agent")
    } else {
        None
    };
    if let Some(field) = field {
        tracing::warn!(field, "request refused: card data in the request head");
        let error = ApiError::RawCardDataForbidden {
            field: field.into(),
        };
        return Ok(req
            .into_response(error.error_response())
            .map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

/// `%34%32…` written out, so an encoded card number is seen too.
fn percent_decoded(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('%') {
        return text.into();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned().into()
}

/// Reads the whole request body before the handler runs: at most [`BODY_LIMIT`] bytes (a
/// declared length over it is refused before a byte is read), and within the body timeout of
/// the headers, so a client that stalls mid-body cannot hold a connection and its buffers
/// (docs/guides/api.md, "Slow and greedy clients"). The handler then reads the body from memory.
pub async fn read_body_in_time(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let headers = req.headers();
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let chunked = headers.contains_key(header::TRANSFER_ENCODING);
    if declared.is_some_and(|len| len > BODY_LIMIT as u64) {
        let response = ApiError::PayloadTooLarge { limit: BODY_LIMIT }.error_response();
        return Ok(req.into_response(response).map_into_right_body());
    }
    if declared.unwrap_or(0) == 0 && !chunked {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let limit = req
        .app_data::<web::Data<AppState>>()
        .map_or(ClientLimits::default().body_timeout, |state| {
            state.body_timeout
        });
    let mut payload = req.take_payload();
    let read = async {
        let mut body = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|err| {
                ApiError::InvalidRequest(format!("the body could not be read: {err}"))
            })?;
            if body.len() + chunk.len() > BODY_LIMIT {
                return Err(ApiError::PayloadTooLarge { limit: BODY_LIMIT });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    };
    let error = match tokio::time::timeout(limit, read).await {
        Ok(Ok(body)) => {
            req.set_payload(Payload::from(body));
            return Ok(next.call(req).await?.map_into_left_body());
        }
        Ok(Err(error)) => error,
        Err(_) => ApiError::BodyTimeout { limit },
    };
    tracing::warn!(%error, "request body refused");
    Ok(req
        .into_response(error.error_response())
        .map_into_right_body())
}

/// The root span of every request, with the fields later layers fill in: the ids a support
/// person searches by, so one payment's log lines can be followed.
///
/// The fields of tracing-actix-web's own root span, but for the client's address, host and
/// scheme: its builder takes them from `Forwarded` / `X-Forwarded-*` whoever sent them, so
/// anyone could write what the log says of them; here they are what the trusted proxies
/// say, or the peer's own ([`client_of`]).
pub struct PayorchRootSpan;

impl RootSpanBuilder for PayorchRootSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let client = client_of(request.request());
        let method = request.method().as_str();
        let route = request.match_pattern();
        let route = route.as_deref().unwrap_or("default");
        let user_agent = request
            .headers()
            .get(header::USER_AGENT)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let request_id = request
            .extensions()
            .get::<RequestId>()
            .map(|id| id.to_string())
            .unwrap_or_default();
        tracing::info_span!(
            "HTTP request",
            http.method = %method,
            http.route = %route,
            http.flavor = ?request.version(),
            http.scheme = %client.scheme,
            http.host = %client.host,
            http.client_ip = %client.ip.map(|ip| ip.to_string()).unwrap_or_default(),
            http.user_agent = %user_agent,
            http.target = %request.uri().path_and_query().map_or("", |p| p.as_str()),
            http.status_code = tracing::field::Empty,
            otel.name = %format_args!("{method} {route}"),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            request_id = %request_id,
            exception.message = tracing::field::Empty,
            exception.details = tracing::field::Empty,
            merchant = tracing::field::Empty,
            idempotency_key = tracing::field::Empty,
            idempotency_outcome = tracing::field::Empty,
            order = tracing::field::Empty,
            payment = tracing::field::Empty,
            refund = tracing::field::Empty,
        )
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        DefaultRootSpanBuilder::on_request_end(span, outcome);
    }
}
