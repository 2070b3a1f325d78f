//! One call to a provider over HTTP, the same for every adapter (docs/DESIGN.md, "The
//! provider protocol"): the client's timeouts and redirect policy, the base URL's check, and
//! the call itself — sent once, timed, its answer read whole and mapped by the adapter, and a
//! transport failure told apart as "never sent" or "outcome unknown". Each adapter says only
//! how to authenticate, where to send and how to read an answer; what a lost answer means is
//! decided here once, so the adapters cannot come to disagree about it.

use std::fmt::Debug;
use std::ops::Deref;
use std::time::{Duration, Instant};

use reqwest::Url;

use super::{ProviderCall, ProviderOutcome};
use crate::lasting::Lasting;

/// The default timeouts of a provider call (docs/operations/configuration.md,
/// "Configuration reference").
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client of one adapter: reqwest's (it builds the requests) and the runtime its
/// calls run on, the one current when it was made (src/lasting.rs: its pooled connections
/// must outlive every HTTP worker that borrows them).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    lasting: Lasting,
}

impl Deref for Client {
    type Target = reqwest::Client;

    fn deref(&self) -> &reqwest::Client {
        &self.http
    }
}

/// The HTTP client of one adapter: `connect_timeout` for the TCP/TLS handshake, `timeout`
/// for the whole call (connect to last body byte), and no redirects.
pub fn client(connect_timeout: Duration, timeout: Duration) -> reqwest::Result<Client> {
    let http = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .timeout(timeout)
        // A redirected POST could be replayed somewhere we did not choose.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("payorch/", env!("CARGO_PKG_VERSION")))
        .build()?;
    Ok(Client {
        http,
        lasting: Lasting::current(),
    })
}

/// `raw` as a base URL paths can be joined to, if it is an http(s) one.
pub fn base_url(raw: &str) -> Option<Url> {
    Url::parse(raw)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && !u.cannot_be_a_base())
}

/// `base` joined with `segments`, each percent-encoded.
pub fn join(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
    url
}

impl Client {
    /// Sends `request` once and maps whatever happens to an outcome: an HTTP answer by `map`
    /// (its status and whole body), no answer by [`transport_outcome`]. Logged at `debug` as
    /// `provider` (the adapter's name) and `call` (what was asked).
    pub async fn send(
        &self,
        provider: &'static str,
        call: impl Debug,
        request: reqwest::RequestBuilder,
        map: impl FnOnce(u16, &[u8]) -> ProviderOutcome,
    ) -> ProviderCall {
        let started = Instant::now();
        let exchange = self.lasting.run(async move {
            let response = request.send().await?;
            let status = response.status().as_u16();
            // The status line came but the body did not: the charge may exist.
            let body = response.bytes().await.map_err(|e| (e, status));
            Ok::<_, reqwest::Error>((status, body))
        });
        let (outcome, http_status) = match exchange.await {
            Ok(Ok((status, Ok(body)))) => (map(status, &body), Some(status)),
            Ok(Ok((_, Err((e, status))))) => (transport_outcome(&e), Some(status)),
            Ok(Err(e)) => (transport_outcome(&e), None),
            // The process is ending under the call: whether it reached the provider is unknown.
            Err(e) => (
                ProviderOutcome::Unknown {
                    reason: format!("the call's task ended: {e}"),
                },
                None,
            ),
        };
        logged_call(provider, call, outcome, http_status, started)
    }
}

/// The call as the adapter hands it back, logged at `debug` with its latency.
fn logged_call(
    provider: &'static str,
    call: impl Debug,
    outcome: ProviderOutcome,
    http_status: Option<u16>,
    started: Instant,
) -> ProviderCall {
    let latency = started.elapsed();
    tracing::debug!(
        provider,
        ?call,
        outcome = outcome.label(),
        http_status,
        latency_ms = latency.as_millis() as u64,
        "provider call"
    );
    ProviderCall {
        outcome,
        http_status,
        latency,
    }
}

/// What a request that got no HTTP answer tells: nothing, unless the connection itself was
/// never made (refused, unreachable, or no TCP/TLS handshake within the connect timeout),
/// in which case not one byte of the request was sent.
pub(crate) fn transport_outcome(e: &reqwest::Error) -> ProviderOutcome {
    if e.is_connect() {
        return ProviderOutcome::Unavailable {
            reason: format!("connect error: {}", error_chain(e)),
        };
    }
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_body() || e.is_decode() {
        "response body error"
    } else {
        "transport error"
    };
    ProviderOutcome::Unknown {
        reason: format!("{kind}: {}", error_chain(e)),
    }
}

/// The error and its causes: the chain carries the useful detail (reset, refused, …) and
/// holds no secrets.
fn error_chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
