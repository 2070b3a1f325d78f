//! `Application::build`: a bound listener, the shared state and the HTTP server, ready to run.
//! Binding happens here so that tests (and `serve`) can ask for port 0 and learn the real one.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_http::error::DispatchError;
use actix_http::{HttpService, Protocol};
use actix_service::{fn_service, map_config, IntoServiceFactory, ServiceFactoryExt};
use actix_web::dev::{AppConfig, Server, ServerHandle};
use actix_web::rt::net::TcpStream;
use actix_web::{middleware::from_fn, web, App};
use tracing_actix_web::TracingLogger;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::accounts::{self, CallerCache};
use crate::db::partitions::PartitionGauges;
use crate::db::pool_metrics::PoolGauges;
use crate::db::{build_pool, DbPool, PoolSettings};
use crate::delivery::metrics::DeliveryMetrics;
use crate::delivery::send::Sender;
use crate::delivery::settings::DeliverySettings;
use crate::delivery::{self, Deliverer};
use crate::events::reaper::{self as event_reaper, EventReaperSettings};
use crate::http::connections::{BudgetedStream, ClientLimits, ConnectionBudget};
use crate::http::limits::{LimitSettings, Limits};
use crate::http::metrics::MetricsAccess;
use crate::http::{self, middleware as mw, AppState};
use crate::idempotency::reaper::{self, ReaperSettings};
use crate::idempotency::{quota, IdempotencyMetrics, IdempotencySettings, Keys, NewKeyQuota};
use crate::payments::attempts::final_attempts::FinalAttempts;
use crate::payments::event_log::EventLog;
use crate::payments::metrics::PaymentMetrics;
use crate::payments::reconciler;
use crate::payments::reconciler::settings::ReconcilerSettings;
use crate::payments::routing::RoutingCache;
use crate::payments::settlement::gauges::SettlementMetrics;
use crate::payments::settlement::{self, SettlementSettings};
use crate::payments::success_scores::{self, SuccessScores};
use crate::payments::support;
use crate::payments::webhooks::reaper::{self as webhook_reaper, WebhookReaperSettings};
use crate::payments::Payments;
use crate::providers::registry::Providers;
use crate::sealing::MasterKeys;
use crate::secret::Secret;
use crate::telemetry::metrics::Metrics;

/// How long a replica uses a merchant's routing before reading it again: a change made on
/// another replica applies within this (docs/guides/routing.md, "Routing and failover").
pub const ROUTING_CACHE_TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct AppSettings {
    /// `host:port`; port 0 picks a free one.
    pub bind: String,
    /// HTTP worker threads.
    pub workers: usize,
    pub pool: PoolSettings,
    pub idempotency: IdempotencySettings,
    pub reaper: ReaperSettings,
    /// How long merchant events are kept, and how often older ones are deleted.
    pub event_reaper: EventReaperSettings,
    /// How long providers' webhooks are kept, and how often older ones are deleted.
    pub webhook_reaper: WebhookReaperSettings,
    pub reconciler: ReconcilerSettings,
    /// When the settlement reconciliation runs (docs/operations/reconciliation.md).
    pub settlement: SettlementSettings,
    /// The delivery worker: its pace, its retry schedule, and where it may send.
    pub delivery: DeliverySettings,
    /// How long a live API key is remembered without asking the database: the longest a
    /// revoked key keeps working if the key poll cannot reach the database.
    pub auth_cache_ttl: Duration,
    /// How often the key poll evicts revoked and rotated keys here ([`accounts::sync`]).
    pub key_poll: Duration,
    /// How often this replica tells the others how many new keys each merchant opened.
    pub quota_sync: Duration,
    /// What one client may hold: connections, and time to send a request.
    pub clients: ClientLimits,
    /// What one client may ask in a while, and which proxies tell who the client is.
    pub limits: LimitSettings,
    /// How long a stopping server waits for the answers in progress: longer than a provider
    /// call may take, so that no checkout is cut between its charge and its answer.
    pub drain: Duration,
    /// Where payers' browsers reach payorch (`https://pay.example.com`, no trailing `/`);
    /// `None`: the address bound.
    pub public_url: Option<String>,
    /// What seals webhook-endpoint secrets at rest. `None` only before `serve` has loaded
    /// them: [`Application::build`] refuses to start without (docs/PRODUCTION.md, section 5).
    pub master_keys: Option<MasterKeys>,
    /// Where the metrics are served, and to whom.
    pub metrics: MetricsSettings,
}

/// Where `/metrics` is served (docs/PRODUCTION.md, "Metrics and provider URLs").
#[derive(Debug, Clone, Default)]
pub struct MetricsSettings {
    /// Who may read `/metrics` on the API's port.
    pub on_api_port: MetricsAccess,
    /// A listener of their own (`host:port`; port 0 picks one), serving `/metrics` only.
    pub bind: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {bind}: {source}")]
    Bind {
        bind: String,
        #[source]
        source: std::io::Error,
    },
    #[error("database pool: {0}")]
    Pool(String),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("the HTTP client of event deliveries: {0}")]
    DeliveryClient(#[from] reqwest::Error),
    #[error("no master key to seal webhook-endpoint secrets with (docs/PRODUCTION.md, section 5)")]
    NoMasterKey,
}

pub struct Application {
    port: u16,
    host: String,
    server: Server,
    /// `/metrics` on a listener of its own (`--metrics-bind`), running, and where it listens.
    metrics_server: Option<(
        ServerHandle,
        JoinHandle<std::io::Result<()>>,
        std::net::SocketAddr,
    )>,
    state: web::Data<AppState>,
    workers: Vec<JoinHandle<()>>,
    stop_workers: Arc<watch::Sender<bool>>,
    drain: Duration,
}

impl Application {
    /// Binds, and starts the server and its workers (key and event reapers, reconciler) against
    /// `providers`.
    pub async fn build(
        settings: &AppSettings,
        database_url: &str,
        providers: Providers,
    ) -> Result<Self, AppError> {
        let master_keys = settings.master_keys.clone().ok_or(AppError::NoMasterKey)?;
        let pool = build_pool(database_url, &settings.pool).map_err(AppError::Pool)?;
        let listener = TcpListener::bind(&settings.bind).map_err(|source| AppError::Bind {
            bind: settings.bind.clone(),
            source,
        })?;
        let local = listener.local_addr().map_err(|source| AppError::Bind {
            bind: settings.bind.clone(),
            source,
        })?;
        let metrics = Arc::new(Metrics::new()?);
        metrics.register(Box::new(PoolGauges::new(pool.clone())?))?;
        let partition_gauges = PartitionGauges::new()?;
        partition_gauges.register(&metrics)?;
        let idempotency_metrics = Arc::new(IdempotencyMetrics::new()?);
        idempotency_metrics.register(&metrics)?;
        let payment_metrics = Arc::new(PaymentMetrics::new()?);
        payment_metrics.register(&metrics)?;
        payment_metrics.late_approvals_from_zero(providers.iter().map(|p| p.name.as_str()));
        let success = Arc::new(SuccessScores::new()?);
        success.register(&metrics)?;
        let settlement_metrics = Arc::new(SettlementMetrics::new()?);
        settlement_metrics.register(&metrics)?;
        settlement_metrics.from_zero(providers.iter().map(|p| p.name.as_str()));
        let delivery_metrics = Arc::new(DeliveryMetrics::new()?);
        delivery_metrics.register(&metrics)?;
        let deliverer = Arc::new(Deliverer {
            pool: pool.clone(),
            settings: settings.delivery.clone(),
            sender: Sender::new(&settings.delivery)?,
            metrics: delivery_metrics,
            master_keys: master_keys.clone(),
        });
        let payments = Arc::new(Payments {
            public_url: settings
                .public_url
                .clone()
                .unwrap_or_else(|| format!("http://{local}")),
            providers,
            routing: RoutingCache::new(ROUTING_CACHE_TTL),
            success: success.clone(),
            metrics: payment_metrics,
            reconciler: settings.reconciler.clone(),
            finals: FinalAttempts::default(),
            event_log: EventLog::start(pool.clone()),
        });
        let quota = Arc::new(NewKeyQuota::new(
            settings.idempotency.max_new_keys_per_minute,
        ));
        let callers = CallerCache::new(settings.auth_cache_ttl);
        let limits = Limits::new(&settings.limits, &metrics)?;
        let state = web::Data::new(AppState {
            pool: pool.clone(),
            metrics,
            idempotency: Keys {
                settings: settings.idempotency.clone(),
                metrics: idempotency_metrics.clone(),
                quota: quota.clone(),
                recent: Default::default(),
            },
            payments: payments.clone(),
            callers: callers.clone(),
            limits,
            body_timeout: settings.clients.body_timeout,
            demo_checkout: Default::default(),
            webhook_urls: settings.delivery.urls,
            master_keys,
            metrics_access: settings.metrics.on_api_port.clone(),
        });
        let (stop_workers, stop) = watch::channel(false);
        let workers = vec![
            tokio::spawn(quota::run_sync(
                pool.clone(),
                quota,
                settings.quota_sync,
                stop.clone(),
            )),
            tokio::spawn(reaper::run(
                pool.clone(),
                settings.reaper.clone(),
                idempotency_metrics,
                stop.clone(),
            )),
            tokio::spawn(event_reaper::run(
                pool.clone(),
                settings.event_reaper.clone(),
                partition_gauges.clone(),
                stop.clone(),
            )),
            tokio::spawn(webhook_reaper::run(
                pool.clone(),
                settings.webhook_reaper.clone(),
                partition_gauges,
                stop.clone(),
            )),
            tokio::spawn(delivery::run(deliverer, stop.clone())),
            tokio::spawn(accounts::sync::run(
                pool.clone(),
                callers.clone(),
                settings.key_poll,
                stop.clone(),
            )),
            tokio::spawn(accounts::sync::run_last_used(
                pool.clone(),
                callers,
                settings.key_poll,
                stop.clone(),
            )),
            tokio::spawn(success_scores::run(
                pool.clone(),
                success,
                success_scores::REFRESH,
                stop.clone(),
            )),
            tokio::spawn(settlement::run::run(
                pool.clone(),
                payments.clone(),
                settings.settlement.clone(),
                settlement_metrics,
                stop.clone(),
            )),
            tokio::spawn(support::disputes::run(
                pool.clone(),
                payments.metrics.clone(),
                stop.clone(),
            )),
            tokio::spawn(reconciler::run(pool, payments, stop)),
        ];
        let server = serve_http(settings, listener, local, state.clone()).map_err(|source| {
            AppError::Bind {
                bind: settings.bind.clone(),
                source,
            }
        })?;
        let metrics_server = match &settings.metrics.bind {
            Some(bind) => {
                Some(
                    serve_metrics(bind, state.clone()).map_err(|source| AppError::Bind {
                        bind: bind.clone(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        Ok(Application {
            port: local.port(),
            host: local.ip().to_string(),
            server,
            metrics_server,
            state,
            workers,
            stop_workers: Arc::new(stop_workers),
            drain: settings.drain,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://host:port` as actually bound.
    pub fn base_url(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// `http://host:port` of the metrics' own listener, if they have one.
    pub fn metrics_url(&self) -> Option<String> {
        self.metrics_server
            .as_ref()
            .map(|(_, _, local)| format!("http://{local}"))
    }

    pub fn pool(&self) -> &DbPool {
        &self.state.pool
    }

    /// Turns on the checkout demo (`/checkout`) for the merchant whose API key `api_key` is;
    /// the key stays on the server. Only the first call counts.
    pub fn open_demo_checkout(&self, api_key: Secret) {
        let _ = self.state.demo_checkout.set(api_key);
    }

    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// What stops this application gracefully, from another task while it runs.
    pub fn stopper(&self) -> Stopper {
        Stopper {
            server: self.server.handle(),
            workers: self.stop_workers.clone(),
            drain: self.drain,
        }
    }

    /// Serves until the server is stopped through its [`handle`](Self::handle) or a
    /// [`Stopper`], then waits for the background workers to stop.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = self.server.await;
        if let Some((handle, running, _)) = self.metrics_server {
            handle.stop(true).await;
            let _ = running.await;
        }
        let _ = self.stop_workers.send(true);
        for worker in self.workers {
            let _ = worker.await;
        }
        served
    }
}

/// Stops an [`Application`] for a rolling deploy (docs/operations/running.md, "Stopping and rolling deploys").
pub struct Stopper {
    server: ServerHandle,
    workers: Arc<watch::Sender<bool>>,
    drain: Duration,
}

impl Stopper {
    /// The longest [`stop`](Self::stop) waits for requests in progress.
    pub fn drain(&self) -> Duration {
        self.drain
    }

    /// Stops accepting connections at once and tells the background workers to stop after
    /// the unit of work in hand (a reconciler round, a reaper batch); then waits, up to the
    /// drain time, for the requests in progress to be answered, each on a connection that is
    /// closed after its answer.
    pub async fn stop(&self) {
        let _ = self.workers.send(true);
        self.server.stop(true).await;
    }
}

/// `GET /metrics` alone, on a listener of its own: an address only the operator's scraper
/// reaches, so it asks for no token. Everything else there is an unknown route.
fn serve_metrics(
    bind: &str,
    state: web::Data<AppState>,
) -> std::io::Result<(
    ServerHandle,
    JoinHandle<std::io::Result<()>>,
    std::net::SocketAddr,
)> {
    let listener = TcpListener::bind(bind)?;
    let local = listener.local_addr()?;
    let server = actix_web::HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route(
                "/metrics",
                web::get().to(http::metrics::metrics_on_own_listener),
            )
            .default_service(web::to(http::not_found))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run();
    Ok((server.handle(), tokio::spawn(server), local))
}

/// The HTTP server on `listener`: actix-web's `HttpServer`, put together from its parts so
/// that every connection is counted in the [`ConnectionBudget`] from its accept until its
/// client closes it ([`BudgetedStream`]); a connection over budget is closed unread.
///
/// Stopped through its handle with `graceful = true` (`serve` on SIGTERM), it accepts
/// nothing more, tells every connection to close after the answer in progress (idle
/// keep-alive connections close at once), and waits up to `settings.drain` for those answers
/// before closing what is left (docs/operations/running.md, "Stopping and rolling deploys").
fn serve_http(
    settings: &AppSettings,
    listener: TcpListener,
    local: std::net::SocketAddr,
    state: web::Data<AppState>,
) -> std::io::Result<Server> {
    let budget = ConnectionBudget::new(settings.clients.clone());
    let trusted_proxies = settings.limits.trusted_proxies.clone();
    let header_timeout = settings.clients.header_timeout;
    let builder = actix_server::Server::build();
    let draining = builder.graceful_shutdown_signal();
    builder
        .workers(settings.workers.max(1))
        // Per worker; the budget holds the total across workers.
        .max_concurrent_connections(settings.clients.max_connections.max(1))
        // `serve` owns signal handling, so the database is stopped after the server.
        .disable_signals()
        .shutdown_timeout(settings.drain.as_secs().max(1))
        .listen("payorch", listener, move || {
            let budget = budget.clone();
            let draining = draining.clone();
            let app = App::new()
                .app_data(state.clone())
                .app_data(trusted_proxies.clone())
                .wrap(from_fn(http::admission::admit))
                .wrap(from_fn(http::limits::limit_requests))
                .wrap(from_fn(mw::read_body_in_time))
                .wrap(from_fn(http::metrics::record_request))
                .wrap(from_fn(mw::request_id_header))
                .wrap(TracingLogger::<mw::PayorchRootSpan>::new())
                .wrap(from_fn(mw::check_request_head))
                .configure(http::configure)
                .default_service(web::to(http::not_found))
                .into_factory()
                .map_err(|err| err.error_response());
            let http = HttpService::build()
                .client_request_timeout(header_timeout)
                // As actix-web's `HttpServer` has it: a closing connection's shutdown may
                // take a second before it is dropped.
                .client_disconnect_timeout(Duration::from_secs(1))
                .local_addr(local)
                // Hidden in actix-http's docs, but how actix-web's own `HttpServer` tells
                // connections the server is stopping; pinned by Cargo.lock.
                .graceful_shutdown_signal(move || {
                    let draining = draining.clone();
                    async move { draining.notified().await }
                })
                // No code reads the configured host or address (a request's own `Host`
                // header is what is used), so the default configuration serves.
                .finish(map_config(app, |_| AppConfig::default()));
            fn_service(move |io: TcpStream| {
                let budget = budget.clone();
                async move {
                    let peer = io.peer_addr().ok();
                    match budget.admit(peer.map(|p| p.ip())) {
                        Some(slot) => Ok((BudgetedStream::new(io, slot), Protocol::Http1, peer)),
                        // Dropping the stream closes it, before a byte of it is read.
                        None => Err(DispatchError::Io(std::io::Error::new(
                            std::io::ErrorKind::ConnectionRefused,
                            "over the connection budget",
                        ))),
                    }
                }
            })
            .and_then(http)
        })
        .map(|builder| builder.run())
}
