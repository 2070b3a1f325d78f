//! payorch against the sandbox provider: how `serve`, the tests and the benches all put the
//! two together, so what the tests exercise is what `serve` runs (docs/DESIGN.md, "Modules").

use std::sync::Arc;

use crate::app::{AppError, AppSettings, Application};
use crate::providers::stripe::{StripeConfig, StripeProvider, StripeSetupError};
use crate::sandbox::SandboxHandle;

#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    #[error(transparent)]
    Provider(#[from] StripeSetupError),
    #[error(transparent)]
    App(#[from] AppError),
}

/// Whether the sandbox sends its webhooks to the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    /// To `POST /v1/webhooks/stripe` of the app, once it is bound.
    ToTheApp,
    /// Nowhere: only the request path runs (the benches).
    Off,
}

/// Binds an app whose provider is `sandbox`, talking to it as `stripe` describes (made from
/// the sandbox's URL), and points the sandbox's webhooks at it.
pub async fn app_on_sandbox(
    settings: &AppSettings,
    database_url: &str,
    sandbox: &SandboxHandle,
    stripe: impl FnOnce(String) -> StripeConfig,
    webhooks: Webhooks,
) -> Result<Application, WiringError> {
    let provider = StripeProvider::new(stripe(sandbox.base_url()))?;
    let app = Application::build(settings, database_url, Arc::new(provider)).await?;
    if webhooks == Webhooks::ToTheApp {
        sandbox.set_webhook_url(Some(format!("{}/v1/webhooks/stripe", app.base_url())));
    }
    Ok(app)
}
