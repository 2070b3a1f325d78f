//! Real providers from the command line (docs/guides/routing.md, "Routing and failover"): each
//! `--provider NAME=PROTOCOL:URL` names one, in routing order; its secrets come from the
//! environment, never the command line, where any user of the machine could read them:
//!
//! - Stripe: `PAYORCH_PROVIDER_<NAME>_SECRET`, `PAYORCH_PROVIDER_<NAME>_WEBHOOK_SECRET`
//!   (comma-separated while rotating);
//! - Adyen: `PAYORCH_PROVIDER_<NAME>_SECRET` (the API key),
//!   `PAYORCH_PROVIDER_<NAME>_HMAC_KEY` (hex, comma-separated while rotating),
//!   `PAYORCH_PROVIDER_<NAME>_MERCHANT_ACCOUNT`.
//!
//! `<NAME>` is the name upper-cased, `-` as `_`.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::providers::adyen::{AdyenConfig, AdyenProvider};
use crate::providers::circuit::CircuitSettings;
use crate::providers::registry::{is_valid_name, Providers};
use crate::providers::stripe::{StripeConfig, StripeProvider};
use crate::providers::PaymentProvider;
use crate::secret::Secret;

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Stripe,
    Adyen,
}

/// One `--provider NAME=PROTOCOL:URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSpec {
    pub name: String,
    pub protocol: Protocol,
    pub url: String,
}

impl FromStr for ProviderSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!(
                "{s:?}: expected NAME=PROTOCOL:URL, e.g. eu=adyen:https://checkout-test.adyen.com"
            )
        };
        let (name, rest) = s.trim().split_once('=').ok_or_else(usage)?;
        let (protocol, url) = rest.split_once(':').ok_or_else(usage)?;
        if !is_valid_name(name) {
            return Err(format!(
                "provider name {name:?} must be 1–32 of a-z, 0-9, '-' and '_'"
            ));
        }
        let protocol = match protocol {
            "stripe" => Protocol::Stripe,
            "adyen" => Protocol::Adyen,
            other => return Err(format!("protocol {other:?} is not one of stripe, adyen")),
        };
        Ok(ProviderSpec {
            name: name.to_owned(),
            protocol,
            url: provider_url(url)?,
        })
    }
}

/// A provider's base URL: `https`, or plain `http` to a loopback host only (a sandbox on this
/// machine). Payment data and the provider's secret key cross this link; over plain http to
/// another host anyone on the path reads both (docs/PRODUCTION.md, "Metrics and provider URLs").
pub fn provider_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    let url = reqwest::Url::parse(text).map_err(|err| format!("{text:?}: {err}"))?;
    let host = url.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" if !host.is_empty() => Ok(text.to_owned()),
        "http" if loopback => Ok(text.to_owned()),
        "http" => Err(format!(
            "{text:?}: a provider is spoken to over https; plain http only to a loopback host \
             (127.0.0.1, ::1, localhost), for a sandbox on this machine"
        )),
        _ => Err(format!("{text:?} is not an https URL")),
    }
}

impl ProviderSpec {
    /// The environment variable holding this provider's `what` (`SECRET`, `HMAC_KEY`, …).
    pub fn variable(&self, what: &str) -> String {
        format!(
            "PAYORCH_PROVIDER_{}_{what}",
            self.name.to_ascii_uppercase().replace('-', "_")
        )
    }
}

/// Timeouts every provider call gets.
#[derive(Debug, Clone, Copy)]
pub struct CallTimeouts {
    pub connect: Duration,
    pub whole: Duration,
    pub webhook_tolerance: Duration,
}

/// The providers `specs` name, in that order, their secrets read through `env` (a variable's
/// value, or its `_FILE` twin's file: [`crate::secret_files::env_or_file`]).
pub fn providers_from_specs(
    specs: &[ProviderSpec],
    timeouts: CallTimeouts,
    env: impl Fn(&str) -> Result<Option<String>, String>,
) -> Result<Providers, String> {
    let mut list: Vec<(String, Arc<dyn PaymentProvider>)> = Vec::with_capacity(specs.len());
    for spec in specs {
        let required = |what: &str| {
            let variable = spec.variable(what);
            env(&variable)
                .map_err(|err| format!("provider {}: {err}", spec.name))?
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| {
                    format!(
                        "provider {}: set {variable} (or {variable}_FILE to a file holding it)",
                        spec.name
                    )
                })
        };
        let several =
            |value: String| -> Vec<Secret> { value.split(',').map(|s| s.trim().into()).collect() };
        let adapter: Arc<dyn PaymentProvider> = match spec.protocol {
            Protocol::Stripe => {
                let config = StripeConfig {
                    connect_timeout: timeouts.connect,
                    timeout: timeouts.whole,
                    webhook_tolerance: timeouts.webhook_tolerance,
                    ..StripeConfig::new(
                        spec.url.clone(),
                        required("SECRET")?,
                        several(required("WEBHOOK_SECRET")?),
                    )
                };
                Arc::new(
                    StripeProvider::new(config)
                        .map_err(|e| format!("provider {}: {e}", spec.name))?,
                )
            }
            Protocol::Adyen => {
                let config = AdyenConfig {
                    connect_timeout: timeouts.connect,
                    timeout: timeouts.whole,
                    ..AdyenConfig::new(
                        spec.url.clone(),
                        required("SECRET")?,
                        required("MERCHANT_ACCOUNT")?,
                        several(required("HMAC_KEY")?),
                    )
                };
                let adyen = AdyenProvider::new(config)
                    .map_err(|e| format!("provider {}: {e}", spec.name))?;
                // Adyen serves its Disputes API on its own host (`https://ca-test.adyen.com`,
                // live `https://ca-live.adyen.com`); unset, the Checkout URL is asked,
                // as the sandbox serves both (docs/guides/disputes.md, "Answering a dispute").
                let adyen =
                    match env(&spec.variable("DISPUTES_URL"))?.filter(|v| !v.trim().is_empty()) {
                        Some(host) => adyen
                            .with_disputes_host(host.trim())
                            .map_err(|e| format!("provider {}: {e}", spec.name))?,
                        None => adyen,
                    };
                Arc::new(adyen)
            }
        };
        list.push((spec.name.clone(), adapter));
    }
    Providers::new(list, &CircuitSettings::default()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn timeouts() -> CallTimeouts {
        CallTimeouts {
            connect: Duration::from_secs(2),
            whole: Duration::from_secs(10),
            webhook_tolerance: Duration::from_secs(300),
        }
    }

    #[test]
    fn providers_are_spoken_to_over_https_or_on_this_machine() {
        for good in [
            "https://api.stripe.com",
            "https://checkout-test.adyen.com/v71",
            "http://127.0.0.1:12111",
            "http://localhost:12111",
            "http://[::1]:12111",
        ] {
            assert_eq!(provider_url(good).as_deref(), Ok(good), "{good}");
        }
        for bad in [
            "http://api.stripe.com",
            "http://10.0.0.5:8080",
            "http://[::ffff:7f00:1]:80",
            "ftp://api.stripe.com",
            "api.stripe.com",
        ] {
            assert!(provider_url(bad).is_err(), "{bad}");
            assert!(
                format!("eu=stripe:{bad}").parse::<ProviderSpec>().is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_spec_names_a_provider_its_protocol_and_its_url() {
        let spec: ProviderSpec = "eu-2=adyen:https://checkout-test.adyen.com"
            .parse()
            .unwrap();
        assert_eq!(spec.name, "eu-2");
        assert_eq!(spec.protocol, Protocol::Adyen);
        assert_eq!(spec.url, "https://checkout-test.adyen.com");
        assert_eq!(spec.variable("HMAC_KEY"), "PAYORCH_PROVIDER_EU_2_HMAC_KEY");
        for bad in [
            "eu",
            "eu=adyen",
            "EU=adyen:https://x",
            "eu=paypal:https://x",
            "eu=adyen:ftp://x",
        ] {
            assert!(bad.parse::<ProviderSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn providers_are_built_in_order_with_secrets_from_the_environment() {
        let specs: Vec<ProviderSpec> = [
            "us=stripe:https://api.stripe.com",
            "eu=adyen:https://checkout-test.adyen.com",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let mut env: HashMap<&str, &str> = HashMap::from([
            ("PAYORCH_PROVIDER_US_SECRET", "sk_live_x"),
            ("PAYORCH_PROVIDER_US_WEBHOOK_SECRET", "whsec_a,whsec_b"),
            ("PAYORCH_PROVIDER_EU_SECRET", "AQE_key"),
            ("PAYORCH_PROVIDER_EU_MERCHANT_ACCOUNT", "Shop"),
        ]);
        let missing = providers_from_specs(&specs, timeouts(), |v| {
            Ok(env.get(v).map(|s| s.to_string()))
        });
        assert_eq!(
            missing.err().as_deref(),
            Some(
                "provider eu: set PAYORCH_PROVIDER_EU_HMAC_KEY (or \
                 PAYORCH_PROVIDER_EU_HMAC_KEY_FILE to a file holding it)"
            )
        );
        env.insert("PAYORCH_PROVIDER_EU_HMAC_KEY", "00ff00ff");
        let providers = providers_from_specs(&specs, timeouts(), |v| {
            Ok(env.get(v).map(|s| s.to_string()))
        })
        .unwrap();
        assert_eq!(providers.names(), ["us", "eu"]);
        assert_eq!(providers.get("eu").unwrap().adapter.name(), "adyen");

        let twice = [specs[0].clone(), specs[0].clone()];
        assert!(providers_from_specs(&twice, timeouts(), |v| Ok(env
            .get(v)
            .map(|s| s.to_string())))
        .is_err());
    }
}
