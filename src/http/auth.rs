//! `Authorization: Bearer <secret>` → the [`Caller`]. The secret is hashed and the hash looked
//! up by a unique index, so no secret is ever compared byte by byte in our code; a live key
//! is then remembered for a few seconds ([`accounts::CallerCache`]).

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};

use crate::accounts::{self, Caller, Recalled, SupportRole};
use crate::http::client_address::client_of;
use crate::http::errors::ApiError;
use crate::http::AppState;
use crate::ids::{ApiKeyId, MerchantId};

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Caller, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            // Another extractor of the same request may have authenticated already.
            if let Some(caller) = req.extensions().get::<Caller>() {
                return Ok(*caller);
            }
            let secret = bearer_secret(&req)?.ok_or(ApiError::Unauthenticated)?;
            let state = req
                .app_data::<web::Data<AppState>>()
                .ok_or_else(|| ApiError::Internal("application state missing".into()))?;
            let client = client_of(&req).ip;
            let caller = caller_of(state, &secret, client).await?;
            req.extensions_mut().insert(caller);
            Ok(caller)
        })
    }
}

/// Who `secret`, presented from `client`, belongs to: remembered, or looked up and then
/// remembered. A secret that is no live key is looked up only if neither it nor its client
/// failed lately ([`FailedAuth`](crate::http::limits::failed_auth::FailedAuth)); one that was
/// a live key when last looked up, and was not evicted since, is looked up whatever its client
/// did, so a live key is never refused for its neighbours' failures (a shared NAT); if it has
/// become no live key, it is forgotten and its next try meets the limits. Also how the
/// checkout demo acts as its merchant with the key it keeps on the server (no client).
pub(crate) async fn caller_of(
    state: &AppState,
    secret: &str,
    client: Option<IpAddr>,
) -> Result<Caller, ApiError> {
    let hash = accounts::secret_hash(secret);
    let caller = match state.callers.recall(&hash) {
        Recalled::Fresh(caller) => caller,
        remembered => {
            let failed_auth = &state.limits.failed_auth;
            if remembered == Recalled::Unknown {
                failed_auth.before_lookup(&hash, client)?;
            }
            let mut conn = state.pool.get().await?;
            let key = accounts::authenticate(&mut conn, &hash)
                .await?
                .ok_or_else(|| {
                    state.callers.evict(&hash);
                    failed_auth.failed(hash, client)
                })?;
            state.callers.put(hash, key);
            key.caller
        }
    };
    state.callers.note_use(caller.key_id());
    tracing::Span::current().record("merchant", tracing::field::display(caller));
    Ok(caller)
}

/// The bearer secret, if the request has one; two `Authorization` headers are refused rather
/// than one of them picked.
pub(crate) fn bearer_secret(req: &HttpRequest) -> Result<Option<String>, ApiError> {
    let mut values = req.headers().get_all(header::AUTHORIZATION);
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::DuplicateHeader("Authorization"));
    }
    let secret = first.to_str().ok().and_then(|value| {
        let (scheme, secret) = value.trim().split_once(' ')?;
        let secret = secret.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty()).then(|| secret.to_string())
    });
    Ok(secret)
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Merchant { merchant_id, .. } => write!(f, "{merchant_id}"),
            Caller::Support { key_id, .. } => write!(f, "support:{key_id}"),
        }
    }
}

impl Caller {
    /// The merchant a merchant key acts for; support keys may not write merchant data.
    pub fn merchant_for_write(&self) -> Result<MerchantId, ApiError> {
        match self {
            Caller::Merchant { merchant_id, .. } => Ok(*merchant_id),
            Caller::Support { .. } => Err(ApiError::Forbidden(
                "support keys are read-only for merchant data; use the merchant's own key",
            )),
        }
    }

    /// Support routes are for support keys only; the key's id and role.
    pub fn require_support(&self) -> Result<(ApiKeyId, SupportRole), ApiError> {
        match self {
            Caller::Support { key_id, role } => Ok((*key_id, *role)),
            Caller::Merchant { .. } => Err(ApiError::Forbidden(
                "this route is for support staff keys; merchant keys cannot use it",
            )),
        }
    }

    /// Support writes (void, reconcile, redeliver, routing) are for operate keys only; the
    /// key's id.
    pub fn require_operator(&self) -> Result<ApiKeyId, ApiError> {
        match self.require_support()? {
            (key_id, SupportRole::Operate) => Ok(key_id),
            (_, SupportRole::Read) => Err(ApiError::Forbidden(
                "this support key has the read role; this action needs a support key with the \
                 operate role (`payorch keys create --support --role operate`)",
            )),
        }
    }

    /// The key the caller presented.
    pub fn key_id(&self) -> ApiKeyId {
        match self {
            Caller::Merchant { key_id, .. } | Caller::Support { key_id, .. } => *key_id,
        }
    }

    /// Whose data a read may see: the caller's own merchant, or any (`None`) for support.
    pub fn scope(&self) -> Option<MerchantId> {
        match self {
            Caller::Merchant { merchant_id, .. } => Some(*merchant_id),
            Caller::Support { .. } => None,
        }
    }

    /// Whether this caller may read data of `merchant`: its own merchant, or support.
    /// Everything else must look like it does not exist (`404`, never `403`).
    pub fn can_read(&self, merchant: MerchantId) -> bool {
        match self {
            Caller::Merchant { merchant_id, .. } => *merchant_id == merchant,
            Caller::Support { .. } => true,
        }
    }
}
