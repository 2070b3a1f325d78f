#![warn(unreachable_pub)]
//! The provider simulator (docs/DESIGN.md, "The provider protocol"): the Stripe
//! PaymentIntents protocol with Stripe's idempotency semantics, fault injection, signed
//! webhooks and a ledger of real charges and refunds; and on the same port, under `/v71/`,
//! an Adyen Checkout face over the same charges, refunds, fault tokens and ledger, with
//! Adyen's signed notifications.
//!
//! Each face is as strict as the provider's published contract (SPEC §6), the uncomfortable
//! parts included: it refuses what the provider refuses and offers nothing the provider
//! lacks; only `/__sandbox/…` (the ledger, the 3-D Secure challenge page) is its own.
//!
//! Fault model. `--error-rate` fails a request at the edge, before the API saw it: nothing is
//! done and nothing recorded under the key, so a resend runs afresh. The payment method's
//! faults strike once the API began: `pm_sandbox_error_before` (a 500, nothing charged) and
//! `pm_sandbox_error_after` (charged, then a 500). On the Stripe face that 500 is the key's
//! first result, and Stripe saves a key's first result "whatever it was, including 500
//! errors" (Stripe's docs, "Idempotent requests"): it is recorded under the key and a resend
//! gets the same 500 again, never the charge (the ledger has it; a retrieve or a list tells).
//! The Adyen face keeps them at the edge (Adyen's docs, "API idempotency", promise only the
//! response of a request already processed): after `…_error_after` a resend gets the payment.
//! `pm_sandbox_lost_response` and `--lost-response-rate` charge and record the answer, then
//! never answer: a resend gets the answer. A refund's faults and the `pm_sandbox_capture_*`
//! tokens (a payment's first capture or cancel) behave the same way (`refunds`, `modify`);
//! captures and cancels meet the global knobs too.
//!
//! What the Stripe face promises, as Stripe's docs do: a retrieve by id and the lists
//! (`GET /v1/payment_intents`, `GET /v1/refunds`, with Stripe's `created` window and paging:
//! `listing`) are read-after-write; search lags by `--search-lag-secs` (default a minute,
//! up to an hour); at `--null-rate` the fields Stripe's OpenAPI document marks `nullable`
//! come `null` in answers and events (`nulls`).
//!
//! What the Adyen face does as Checkout API v71 does: no lookup of a payment or a refund
//! (v71 has none; any endpoint it lacks is Adyen's `404`); a field the v71 schema does not
//! define, at any depth, is `422` `702` (`adyen_schema`); a currency that is not ISO 4217's,
//! `422` `138` (`currency`); a refund's `reference` is optional; a technical cancel
//! (`POST /v71/cancels`) is answered `201 received` and settled by its `TECHNICAL_CANCEL`
//! notification (`adyen_modifications` says when it succeeds); every notification item
//! carries the fields Webhooks-v1 requires and is signed with Adyen's HMAC.
//!
//! A manual capture holds the money (`requires_capture`) until it is captured or canceled;
//! `pm_card_threeDSecure2Required` waits for its customer on the sandbox's own challenge
//! page (`challenge`), as does a decline asking for authentication when the charge asks for
//! 3-D Secure (`three_d_secure`). The ledger tells holds, captures and voids apart.
//!
//! Each face approves an ordinary card at its own rate, declines the rest in a mix of soft,
//! hard and authentication-required declines and meets outages, drawn from a seed and the
//! request's idempotency key (`mix`), changeable while it runs (`mix_control`).
//!
//! A declining test payment method is declined with the same reason through both faces,
//! each in its provider's words (`declines`), so payorch's one decline vocabulary can be
//! held to it.
//!
//! A successful charge can be disputed (`disputes`): by a test payment method, at
//! `--dispute-rate` or by `POST /__sandbox/disputes` (`dispute_control`); each move is told
//! as Stripe's `charge.dispute.*` events or Adyen's dispute notifications (`dispute_news`),
//! and the merchant answers through Stripe's Disputes API (`stripe_disputes`) or Adyen's
//! DisputeService (`adyen_disputes`). The Stripe face refuses a refund while the charge's
//! dispute holds its money (`charge_disputed`); the Adyen face refunds it, as Adyen does.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use actix_web::{dev::ServerHandle, web, App, HttpServer};

use payorch_wire::secret::Secret;
use rand::distr::{Alphanumeric, SampleString};
use rand::Rng;
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod adyen;
mod adyen_details;
mod adyen_disputes;
mod adyen_modifications;
mod adyen_refunds;
mod adyen_schema;
mod answers;
mod behaviour;
mod captures;
mod challenge;
mod charges;
mod config;
mod currency;
mod declines;
mod dispute_control;
mod dispute_news;
mod dispute_scripts;
mod disputes;
mod kept;
mod listing;
mod mix;
mod mix_control;
mod modification;
mod modify;
mod nulls;
mod packed;
mod params;
mod protocol;
mod redirect_result;
mod refunds;
mod routes;
mod serial;
mod settlement;
mod settlement_routes;
mod store;
mod stripe_disputes;
mod three_d_secure;
mod webhooks;

pub use behaviour::{Behaviour, ModificationFault};
pub use config::{
    parse_keep_intents, SandboxConfig, DEFAULT_KEEP_ANSWERS, DEFAULT_KEEP_INTENTS,
    DEFAULT_SEARCH_LAG_SECS, DEFAULT_SLOW_MS, DEFAULT_WEBHOOK_DELAY_MS, MAX_SEARCH_LAG_SECS,
};
pub use declines::{AdyenRefusal, Decline, AUTHENTICATION_FAILED, DECLINES};
pub use dispute_control::{LOSING_EVIDENCE, WINNING_EVIDENCE};
pub use disputes::{
    DisputeEntry, DisputeMoney, DisputeStage, DisputeStatus, DisputeTransition, REASONS,
};
pub use mix::{Drawn, Face, Mix, Outage, AUTHENTICATION, HARD, SOFT};
pub use store::{CaptureEntry, Forgotten, HoldEntry, LedgerEntry, RefundEntry, VoidEntry, Window};

use store::Store;
use webhooks::{Signing, Webhooks};

/// State shared by the handlers and the background tasks.
pub(crate) struct Sandbox {
    config: SandboxConfig,
    store: Store,
    /// Each face's mix, as the flags set it and the control endpoint changes it.
    mixes: Mutex<mix_control::Mixes>,
    /// Stripe events of the Stripe face.
    webhooks: Webhooks,
    /// Adyen notifications of the Adyen face.
    notifications: Webhooks,
    /// Every dispute of either face (`disputes`).
    disputes: disputes::Book,
    /// The providers' settlement records: what is forgotten and invented, Adyen's batches.
    settlement: settlement::Settlement,
    /// Dispute moves to make later (`dispute_control`).
    dispute_plans: dispute_control::Plans,
    /// The runtime `start` was called on: charges, settlements and webhook deliveries run
    /// there, not on the HTTP workers, so they outlive any one connection.
    rt: tokio::runtime::Handle,
    shutdown: watch::Sender<bool>,
}

impl Sandbox {
    /// Tell the merchant what happened to `intent`, in the protocol it was made through: a
    /// Stripe `kind` event, or the Adyen notification that stands for it.
    fn announce(
        &self,
        kind: &str,
        intent: &payorch_wire::stripe::PaymentIntent,
        cause: Option<webhooks::Cause>,
    ) {
        if kind == "payment_intent.succeeded" {
            self.after_charged(intent);
        }
        if adyen::is_adyen(intent) {
            if let Some(body) = adyen::notification(&self.config, kind, intent) {
                self.notifications.send(body);
            }
        } else {
            self.webhooks.emit(kind, intent, cause);
        }
    }

    /// Tell the merchant what happened to `refund`, in the protocol it was made through: a
    /// Stripe `kind` event, or the Adyen `REFUND` notification once its outcome is known.
    fn announce_refund(
        &self,
        kind: &str,
        refund: &payorch_wire::stripe::Refund,
        cause: Option<webhooks::Cause>,
    ) {
        if protocol::is_marked_adyen(&refund.metadata) {
            if let Some(body) = adyen_refunds::notification(&self.config, refund) {
                self.notifications.send(body);
            }
        } else {
            self.webhooks.emit_refund(kind, refund, cause);
        }
    }

    /// Tell the merchant what a capture or cancel of `intent` came to, in the protocol the
    /// payment was made through: Stripe's event about the intent as it is now, when it moved
    /// (Stripe tells nothing of a refused request); or Adyen's `CAPTURE`, `CANCELLATION` or
    /// `TECHNICAL_CANCEL` notification of the modification, `success` `true` or `false`.
    fn announce_modification(
        &self,
        intent: &payorch_wire::stripe::PaymentIntent,
        modification: &modification::Modification,
        cause: webhooks::Cause,
    ) {
        if modification.succeeded && modification.kind == modification::Kind::Capture {
            self.after_charged(intent);
        }
        if adyen::is_adyen(intent) {
            let notification =
                adyen_modifications::notification(&self.config, intent, modification);
            if let Some(body) = notification {
                self.notifications.send(body);
            }
            return;
        }
        if !modification.succeeded {
            return;
        }
        let kind = match modification.kind {
            modification::Kind::Capture => "payment_intent.succeeded",
            modification::Kind::Cancel | modification::Kind::TechnicalCancel => {
                "payment_intent.canceled"
            }
        };
        self.webhooks.emit(kind, intent, Some(cause));
    }

    /// Runs `work`, a change made under `key`, as its own task on the sandbox's runtime, so a
    /// client that hangs up (or times out) cannot leave it half done or its key stuck in
    /// flight; `None` when the task failed (`what` names it in the log), the key freed.
    async fn run_whole(
        &self,
        what: &str,
        key: Option<&str>,
        work: impl Future<Output = store::StoredResponse> + Send + 'static,
    ) -> Option<store::StoredResponse> {
        match self.rt.spawn(work).await {
            Ok(stored) => Some(stored),
            Err(e) => {
                tracing::error!(error = %e, "sandbox {what} task failed");
                if let Some(key) = key {
                    self.store.abandon(key);
                }
                None
            }
        }
    }

    /// Run `fut` on the sandbox runtime until it finishes or the sandbox stops.
    fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.rt
            .spawn(until_shutdown(self.shutdown.subscribe(), fut));
    }

    async fn wait_for_shutdown(&self) {
        let mut rx = self.shutdown.subscribe();
        // An error means the sender is gone, which is shutdown too.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// Run `fut` until it ends or `shutdown` turns true.
pub(crate) async fn until_shutdown(
    mut shutdown: watch::Receiver<bool>,
    fut: impl Future<Output = ()>,
) {
    tokio::select! {
        _ = shutdown.wait_for(|stopped| *stopped) => {}
        () = fut => {}
    }
}

/// A Stripe-style id: `prefix_` and 24 random alphanumerics.
pub(crate) fn random_id(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        Alphanumeric.sample_string(&mut rand::rng(), 24)
    )
}

/// True with probability `rate` (0.0 never, 1.0 always).
pub(crate) fn roll(rate: f64) -> bool {
    rate > 0.0 && rand::rng().random_bool(rate.min(1.0))
}

/// A running sandbox.
pub struct SandboxHandle {
    addr: SocketAddr,
    state: Arc<Sandbox>,
    server: ServerHandle,
    task: Mutex<Option<JoinHandle<std::io::Result<()>>>>,
}

impl SandboxHandle {
    /// e.g. `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every confirmed PaymentIntent kept, oldest first (the same as `GET /__sandbox/ledger`);
    /// [`SandboxHandle::forgotten`] counts the rest.
    pub fn ledger(&self) -> Vec<LedgerEntry> {
        self.state.store.ledger()
    }

    /// Every refund kept, in order.
    pub fn refunds(&self) -> Vec<RefundEntry> {
        self.state.store.refund_ledger()
    }

    /// Every hold (an authorisation for a later capture) on a kept intent, oldest first.
    pub fn holds(&self) -> Vec<HoldEntry> {
        self.state.store.holds()
    }

    /// Every capture of a kept intent, in order (the Adyen face's refused ones too, `failed`).
    pub fn captures(&self) -> Vec<CaptureEntry> {
        self.state.store.captures()
    }

    /// Every hold a cancel released, in order.
    pub fn voids(&self) -> Vec<VoidEntry> {
        self.state.store.voids()
    }

    /// Every dispute kept, oldest first, with its moves and the money it moved (the same as
    /// `GET /__sandbox/disputes`).
    pub fn disputes(&self) -> Vec<DisputeEntry> {
        self.state.disputes.all()
    }

    /// The money disputes moved, in the order it moved: what the providers' settlement
    /// records list of disputes (withdrawn negative, reinstated positive).
    pub fn dispute_money(&self) -> Vec<DisputeMoney> {
        let mut money: Vec<DisputeMoney> = self
            .state
            .disputes
            .all()
            .into_iter()
            .flat_map(|dispute| dispute.money)
            .collect();
        money.sort_by_key(|m| m.created);
        money
    }

    /// What the sandbox no longer keeps: the ledger's `forgotten`.
    pub fn forgotten(&self) -> Forgotten {
        self.state.store.forgotten()
    }

    /// Where webhooks go from now on; `None` stops delivery.
    pub fn set_webhook_url(&self, url: Option<String>) {
        self.state.webhooks.set_url(url);
    }

    /// The hex HMAC key the Adyen face signs its notifications with.
    pub fn adyen_hmac_key(&self) -> Secret {
        self.state.config.adyen_hmac_key.clone()
    }

    /// The face's mix from the next charge on (as `POST /__sandbox/mix/{face}` does).
    pub fn set_mix(&self, face: Face, mix: Mix) {
        self.state.set_mix(face, mix);
    }

    /// The face's mix now.
    pub fn mix(&self, face: Face) -> Mix {
        self.state.mix(face)
    }

    /// Where the Adyen face's notifications go from now on; `None` stops delivery.
    pub fn set_notification_url(&self, url: Option<String>) {
        self.state.notifications.set_url(url);
    }

    /// Begin stopping without waiting (for `Drop` impls): the server stops accepting and
    /// the background tasks end.
    pub fn stop_now(&self) {
        self.state.shutdown.send_replace(true);
        // The stop command is sent when `stop` is called; the future only awaits completion.
        drop(self.server.stop(false));
    }

    /// Stop serving and end background tasks (pending webhooks are dropped). Idempotent.
    pub async fn stop(&self) {
        self.state.shutdown.send_replace(true);
        self.server.stop(false).await;
        let task = self
            .task
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(task) = task {
            if let Ok(Err(e)) = task.await {
                tracing::warn!(error = %e, "sandbox server ended with an error");
            }
        }
    }
}

/// Every route of both faces, in the order actix tries them: the charge first (each pattern
/// with a `{…}` costs a regex match), then captures and cancels, refunds, the Adyen face,
/// and the 3-D Secure challenge page; the ledger and the answer to an unknown route with the
/// payment intents' routes. Registered here, above the
/// faces, so that no face module imports another to be reached.
fn configure(cfg: &mut web::ServiceConfig) {
    cfg.configure(routes::configure)
        .configure(captures::configure)
        .configure(refunds::configure)
        .configure(adyen_refunds::configure)
        .configure(adyen_modifications::configure)
        .configure(adyen_details::configure)
        .configure(adyen::configure)
        .configure(challenge::configure)
        .configure(mix_control::configure)
        .configure(dispute_control::configure)
        .configure(stripe_disputes::configure)
        .configure(adyen_disputes::configure)
        .configure(settlement_routes::configure);
}

/// Bind, spawn the server and its background tasks on the current runtime, return at once.
pub async fn start(config: SandboxConfig) -> std::io::Result<SandboxHandle> {
    let listener = std::net::TcpListener::bind(&config.bind)?;
    let addr = listener.local_addr()?;
    let rt = tokio::runtime::Handle::current();
    let (shutdown, shutdown_rx) = watch::channel(false);
    let webhooks = Webhooks::start(
        &config,
        config.webhook_url.clone(),
        Signing::Header(config.webhook_secret.clone()),
        &rt,
        shutdown_rx.clone(),
    )?;
    let notifications = Webhooks::start(
        &config,
        config.adyen_notification_url.clone(),
        Signing::InBody,
        &rt,
        shutdown_rx,
    )?;
    let (dispute_plans, plans) = tokio::sync::mpsc::unbounded_channel();
    let state = Arc::new(Sandbox {
        store: Store::new(config.window()),
        disputes: disputes::Book::new(config.keep_intents),
        settlement: settlement::Settlement::new(chrono::Utc::now().timestamp()),
        dispute_plans,
        mixes: Mutex::new(mix_control::Mixes::from_config(&config)),
        config,
        webhooks,
        notifications,
        rt,
        shutdown,
    });
    state.spawn(dispute_control::run_plans(state.clone(), plans));
    let data = web::Data::from(state.clone());
    let server = HttpServer::new(move || App::new().app_data(data.clone()).configure(configure))
        .workers(2)
        // The host process owns signals; `stop` ends the server.
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)?
        .run();
    let server_handle = server.handle();
    let task = tokio::spawn(server);
    tracing::info!(%addr, "sandbox provider listening");
    Ok(SandboxHandle {
        addr,
        state,
        server: server_handle,
        task: Mutex::new(Some(task)),
    })
}

/// `payorch sandbox`: serve until Ctrl-C or SIGTERM.
pub async fn run_standalone(config: SandboxConfig) -> std::io::Result<()> {
    let handle = start(config).await?;
    println!("sandbox listening on {}", handle.base_url());
    wait_for_signal().await?;
    handle.stop().await;
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result,
        _ = term.recv() => Ok(()),
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> std::io::Result<()> {
    tokio::signal::ctrl_c().await
}
