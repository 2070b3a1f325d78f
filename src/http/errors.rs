//! The closed set of problems the API answers with, rendered as RFC 9457
//! `application/problem+json` with a stable machine `code`.

use std::collections::BTreeMap;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::db::pool::PoolError;

/// A problem with one field of the request, for `validation_failed`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct FieldError {
    /// The field, as a JSON pointer into the request body (`/amount`, `/metadata/size`).
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Seconds a client should wait before retrying after a `503`.
const UNAVAILABLE_RETRY_AFTER_SECS: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("missing or unknown API key")]
    Unauthenticated,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("no such {0}")]
    NotFound(&'static str),
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the request has invalid fields")]
    ValidationFailed(Vec<FieldError>),
    #[error("the database is unavailable")]
    Unavailable,
    /// Anything we did not expect: logged with its cause, shown to nobody.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The problem+json body. Extra members (`errors`, resource ids) are flattened in.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub problem_type: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable, machine-readable; branch on this, not on `title` or `detail`.
    pub code: String,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::Unauthenticated => "unauthenticated",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::ValidationFailed(_) => "validation_failed",
            ApiError::Unavailable => "unavailable",
            ApiError::Internal(_) => "internal_error",
        }
    }

    fn title(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "The request is malformed",
            ApiError::Unauthenticated => "Authentication required",
            ApiError::Forbidden(_) => "This key may not do that",
            ApiError::NotFound(_) => "Not found",
            ApiError::PayloadTooLarge { .. } => "Request body too large",
            ApiError::ValidationFailed(_) => "Validation failed",
            ApiError::Unavailable => "Temporarily unavailable",
            ApiError::Internal(_) => "Internal error",
        }
    }

    /// What the caller should do next, in words.
    fn detail(&self) -> String {
        match self {
            ApiError::Unauthenticated => {
                "send `Authorization: Bearer <secret>` with a live merchant or support key".into()
            }
            ApiError::Unavailable => format!(
                "the database cannot be reached; nothing was changed, retry after {UNAVAILABLE_RETRY_AFTER_SECS} s"
            ),
            ApiError::Internal(_) => {
                "an unexpected error happened; it is logged with this response's X-Request-Id".into()
            }
            ApiError::ValidationFailed(_) => "see `errors` for each field to fix".into(),
            other => other.to_string(),
        }
    }

    fn extra(&self) -> BTreeMap<String, serde_json::Value> {
        let mut extra = BTreeMap::new();
        if let ApiError::ValidationFailed(errors) = self {
            extra.insert("errors".into(), serde_json::json!(errors));
        }
        extra
    }

    pub fn problem(&self) -> Problem {
        Problem {
            problem_type: format!("https://payorch.dev/problems/{}", self.code()),
            title: self.title().into(),
            status: self.status_code().as_u16(),
            detail: self.detail(),
            code: self.code().into(),
            extra: self.extra(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::ValidationFailed(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ApiError::Internal(cause) => tracing::error!(%cause, "internal error"),
            ApiError::Unavailable => tracing::warn!("database unavailable"),
            _ => {}
        }
        let mut response = HttpResponse::build(self.status_code());
        response.insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        ));
        if let ApiError::Unavailable = self {
            response.insert_header((header::RETRY_AFTER, UNAVAILABLE_RETRY_AFTER_SECS));
        }
        if let ApiError::Unauthenticated = self {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        response.json(self.problem())
    }
}

impl From<PoolError> for ApiError {
    fn from(err: PoolError) -> Self {
        tracing::warn!(error = %err, "no database connection");
        ApiError::Unavailable
    }
}

impl From<diesel::result::Error> for ApiError {
    fn from(err: diesel::result::Error) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        match &err {
            // The server went away under us (stopped, restarted, network): nothing committed.
            Error::DatabaseError(
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
                _,
            )
            | Error::BrokenTransactionManager => {
                tracing::warn!(error = %err, "database connection lost");
                ApiError::Unavailable
            }
            Error::DatabaseError(_, info) if is_connection_failure(info.message()) => {
                tracing::warn!(error = %err, "database connection lost");
                ApiError::Unavailable
            }
            _ => ApiError::Internal(err.to_string()),
        }
    }
}

/// A server shutting down ends sessions with SQLSTATE 57P01/57P03, which diesel passes on as
/// `Unknown` without the code; its fixed server messages are all that is left to tell them by.
fn is_connection_failure(message: &str) -> bool {
    const SIGNS: [&str; 3] = [
        "terminating connection due to administrator command",
        "the database system is shutting down",
        "the database system is starting up",
    ];
    SIGNS.iter().any(|sign| message.contains(sign))
}
