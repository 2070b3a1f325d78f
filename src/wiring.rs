//! payorch against the sandbox provider: how `serve`, the tests and the benches all put the
//! two together, so what the tests exercise is what `serve` runs (docs/DESIGN.md, "Modules and
//! their dependencies").

use std::sync::Arc;

use payorch_sandbox::SandboxHandle;

use crate::app::{AppError, AppSettings, Application};
use crate::providers::adyen::{AdyenConfig, AdyenProvider, AdyenSetupError};
use crate::providers::circuit::CircuitSettings;
use crate::providers::registry::{Providers, RegistryError};
use crate::providers::stripe::{StripeConfig, StripeProvider, StripeSetupError};
use crate::providers::PaymentProvider;

/// The merchant account the in-process sandbox's Adyen face is paid under.
pub const SANDBOX_MERCHANT_ACCOUNT: &str = "PayorchSandbox";

#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    #[error(transparent)]
    Provider(#[from] StripeSetupError),
    #[error(transparent)]
    Adyen(#[from] AdyenSetupError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    App(#[from] AppError),
}

/// Whether the sandbox sends its webhooks to the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    /// To `POST /v1/webhooks/stripe` and `/v1/webhooks/adyen` of the app, once it is bound.
    ToTheApp,
    /// Nowhere: only the request path runs (the benches).
    Off,
}

/// Binds an app whose providers are the two faces of `sandbox`: `stripe`, talking to it as
/// `stripe` describes (made from the sandbox's URL), then `adyen`, with the same key and
/// timeouts, the sandbox's HMAC key and [`SANDBOX_MERCHANT_ACCOUNT`]; and points the
/// sandbox's webhooks and notifications at the app.
pub async fn app_on_sandbox(
    settings: &AppSettings,
    database_url: &str,
    sandbox: &SandboxHandle,
    stripe: impl FnOnce(String) -> StripeConfig,
    webhooks: Webhooks,
) -> Result<Application, WiringError> {
    let stripe = stripe(sandbox.base_url());
    let adyen = AdyenConfig {
        connect_timeout: stripe.connect_timeout,
        timeout: stripe.timeout,
        ..AdyenConfig::new(
            sandbox.base_url(),
            stripe.secret.clone(),
            SANDBOX_MERCHANT_ACCOUNT,
            vec![sandbox.adyen_hmac_key()],
        )
    };
    let stripe: Arc<dyn PaymentProvider> = Arc::new(StripeProvider::new(stripe)?);
    let adyen: Arc<dyn PaymentProvider> = Arc::new(AdyenProvider::new(adyen)?);
    let providers = Providers::new(
        vec![("stripe".into(), stripe), ("adyen".into(), adyen)],
        &CircuitSettings::default(),
    )?;
    let app = Application::build(settings, database_url, providers).await?;
    if webhooks == Webhooks::ToTheApp {
        sandbox.set_webhook_url(Some(format!("{}/v1/webhooks/stripe", app.base_url())));
        sandbox.set_notification_url(Some(format!("{}/v1/webhooks/adyen", app.base_url())));
    }
    Ok(app)
}
