//! One send of a delivery (docs/guides/events.md, "What a delivery is"): a `POST` of the event's body with
//! the Standard Webhooks headers, by a client that follows no redirect, uses no proxy from
//! the environment (a proxy would resolve the name itself, out of the policy's reach), and
//! resolves every name through [`PolicyResolver`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::redirect;

use super::resolver::PolicyResolver;
use super::settings::DeliverySettings;
use crate::events::safe_url::{check_registration, UrlPolicy};
use crate::events::schedule::{parse_retry_after, Answer};

/// What payorch calls itself to endpoints.
pub const USER_AGENT: &str = concat!("payorch-webhooks/", env!("CARGO_PKG_VERSION"));

/// The headers that make a delivery a Standard Webhooks message.
#[derive(Debug, Clone)]
pub struct Signed {
    /// `webhook-id`: the event's id, the same on every retry.
    pub id: String,
    /// `webhook-timestamp`: when this attempt was signed, in Unix seconds.
    pub timestamp: i64,
    /// `webhook-signature`: one `v1,…` per secret that signs, space-separated.
    pub signature: String,
}

/// How a send went.
#[derive(Debug, Clone)]
pub struct Sent {
    pub answer: Answer,
    pub latency: Duration,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    policy: UrlPolicy,
    timeout: Duration,
}

impl Sender {
    pub fn new(settings: &DeliverySettings) -> Result<Sender, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(PolicyResolver {
                policy: settings.urls,
            }))
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.send_timeout)
            .user_agent(USER_AGENT)
            .build()?;
        Ok(Sender {
            client,
            policy: settings.urls,
            timeout: settings.send_timeout,
        })
    }

    /// Sends `body` to `url`. The URL is judged again first: an address in it is not resolved,
    /// so the resolver never sees it, and the policy may have changed since it was registered.
    pub async fn send(&self, url: &str, signed: &Signed, body: Vec<u8>) -> Sent {
        let started = Instant::now();
        let url = match check_registration(url, &self.policy) {
            Ok(url) => url,
            Err(refused) => {
                return Sent {
                    answer: Answer::NoAnswer,
                    latency: started.elapsed(),
                    error: Some(format!("not sent: the URL {refused}")),
                }
            }
        };
        let sent = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header("webhook-id", &signed.id)
            .header("webhook-timestamp", signed.timestamp.to_string())
            .header("webhook-signature", &signed.signature)
            .body(body)
            .send()
            .await;
        let latency = started.elapsed();
        match sent {
            Ok(response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, chrono::Utc::now()));
                let error = (!status.is_success()).then(|| {
                    let mut why = format!("answered {status}");
                    if status.is_redirection() {
                        why.push_str(" (redirects are not followed: register the final URL)");
                    }
                    why
                });
                Sent {
                    answer: Answer::Status {
                        status: status.as_u16(),
                        retry_after,
                    },
                    latency,
                    error,
                }
            }
            Err(err) => Sent {
                answer: Answer::NoAnswer,
                latency,
                error: Some(if err.is_timeout() {
                    format!("no answer within {} s", self.timeout.as_secs_f64())
                } else {
                    error_chain(&err)
                }),
            },
        }
    }
}

/// An error and its sources, `: `-separated: reqwest's own message names only the URL, its
/// sources say what went wrong (the refused address, the refused connection).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
