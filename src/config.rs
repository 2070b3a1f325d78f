//! Command-line and environment configuration: one typed struct per area. Every flag has an
//! environment variable; `payorch <command> --help` lists them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use ipnet::IpNet;
use payorch_sandbox::SandboxConfig;

use crate::accounts::SupportRole;
use crate::app::{AppSettings, MetricsSettings};
use crate::db::{PoolSettings, Pooler};
use crate::delivery::settings::DeliverySettings;
use crate::events::reaper::EventReaperSettings;
use crate::events::safe_url::UrlPolicy;
use crate::http::client_address::{ForwardedHeader, TrustedProxies};
use crate::http::connections::ClientLimits;
use crate::http::limits::LimitSettings;
use crate::http::metrics::MetricsAccess;
use crate::idempotency::reaper::ReaperSettings;
use crate::idempotency::IdempotencySettings;
use crate::ids::{ApiKeyId, MerchantId};
use crate::payments::reconciler::settings::ReconcilerSettings;
use crate::payments::settlement::SettlementSettings;
use crate::payments::webhooks::reaper::WebhookReaperSettings;
use crate::provider_specs::ProviderSpec;
use crate::providers::stripe::StripeConfig;
use crate::rate_limit::Quota;
use crate::secret::Secret;

pub mod reference;

#[derive(Debug, Parser)]
#[command(
    name = "payorch",
    version,
    about = "Payment orchestration: one intent, at most one charge"
)]
pub struct Cli {
    /// Log as JSON lines instead of human-readable text; either way `RUST_LOG` filters what is
    /// logged (default `info`).
    #[arg(long, env = "PAYORCH_LOG_JSON", global = true)]
    pub log_json: bool,

    /// Also log each span as it closes, with the time spent in it (`time.busy`, `time.idle`):
    /// a request's claim, statements and provider calls, nested in its request span, read as
    /// one trace (docs/operations/monitoring.md, "Tracing").
    #[arg(long, env = "PAYORCH_LOG_SPANS", global = true)]
    pub log_spans: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API and its background workers.
    Serve(Box<ServeArgs>),
    /// Apply the embedded database migrations and exit.
    Migrate(DatabaseArgs),
    /// Manage merchants.
    #[command(subcommand)]
    Merchant(MerchantCommand),
    /// Manage support-staff keys (`keys create --support` does the same).
    #[command(subcommand, name = "support-key")]
    SupportKey(SupportKeyCommand),
    /// Keys of merchants and support staff: list, create, revoke, rotate (docs/operations/commands.md, "Commands").
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Run the sandbox provider alone (the Stripe PaymentIntents protocol, with faults).
    Sandbox(Box<SandboxConfig>),
    /// What is kept sealed at rest: webhook-endpoint secrets (docs/PRODUCTION.md, section 5).
    #[command(subcommand)]
    Secrets(SecretsCommand),
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Rewrite every webhook-endpoint secret under the first master key; then the others can
    /// be dropped.
    Reencrypt(ReencryptArgs),
}

#[derive(Debug, Args)]
pub struct ReencryptArgs {
    #[command(flatten)]
    pub master_key: MasterKeyArgs,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// The master keys that seal webhook-endpoint secrets at rest (docs/PRODUCTION.md, section
/// 5): from `--master-key-file`, or from the environment variable `PAYORCH_MASTER_KEY` (same
/// form), never from the command line.
#[derive(Debug, Clone, Args)]
pub struct MasterKeyArgs {
    /// A file of master keys, `<id>:<base64 of 32 bytes>` each, separated by commas or
    /// lines: the first seals, every one opens. Default: `PAYORCH_MASTER_KEY`; else, with the
    /// in-process sandbox only, `master_key` in `--data-dir` (made at the first start). A
    /// real provider needs one. Making, keeping and rotating them: docs/PRODUCTION.md, section
    /// 5; after putting a new key first, `payorch secrets reencrypt` rewrites every secret
    /// under it.
    #[arg(
        help_heading = "Secrets at rest",
        long,
        env = "PAYORCH_MASTER_KEY_FILE"
    )]
    pub master_key_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum MerchantCommand {
    /// Create a merchant with a secret API key (printed once, stored only as a hash).
    Create(CreateArgs),
}

#[derive(Debug, Subcommand)]
pub enum SupportKeyCommand {
    /// Create a support-staff key (printed once, stored only as a hash); read-only unless
    /// `--role operate`.
    Create(SupportKeyArgs),
}

#[derive(Debug, Args)]
pub struct SupportKeyArgs {
    #[command(flatten)]
    pub create: CreateArgs,
    /// `read` (look only; the default, so that acting is granted on purpose) or `operate`
    /// (also void, reconcile, redeliver, change routing).
    #[arg(long, default_value = "read")]
    pub role: SupportRole,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Every key, never a secret: id, role, merchant, name, created, last used, expiry and
    /// revocation.
    List(KeysListArgs),
    /// A new key (its secret printed once, stored only as a hash): a further key of a
    /// merchant, or a support person's.
    Create(KeysCreateArgs),
    /// Revoke a key now; every replica refuses it within a second.
    Revoke(KeyIdArgs),
    /// A new key of the same owner and name; the old one keeps working for the overlap, then
    /// expires.
    Rotate(KeysRotateArgs),
}

#[derive(Debug, Args)]
pub struct KeysListArgs {
    /// Only this merchant's keys (`mer_…`).
    #[arg(long, conflicts_with = "support")]
    pub merchant: Option<MerchantId>,
    /// Only support staff keys.
    #[arg(long)]
    pub support: bool,
    /// One JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("owner").required(true).args(["merchant", "support"])))]
pub struct KeysCreateArgs {
    /// The merchant the key acts for (`mer_…`).
    #[arg(long)]
    pub merchant: Option<MerchantId>,
    /// A support staff key; give its `--role`.
    #[arg(long)]
    pub support: bool,
    /// A support key's role: `read` (look only; the default) or `operate` (also void,
    /// reconcile, redeliver, change routing).
    #[arg(long, requires = "support")]
    pub role: Option<SupportRole>,
    /// Who or what holds the key (a person, for a support key).
    #[arg(long)]
    pub name: String,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

#[derive(Debug, Args)]
pub struct KeyIdArgs {
    /// The key's id (`key_…`), as `keys list` shows it.
    pub key_id: ApiKeyId,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

#[derive(Debug, Args)]
pub struct KeysRotateArgs {
    #[command(flatten)]
    pub key: KeyIdArgs,
    /// How long the old key keeps working beside the new one (at most 30 days; 0 ends it
    /// now).
    #[arg(long, default_value_t = 86_400)]
    pub overlap_secs: u64,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The merchant's name (the console shows merchants by it), or the support person's.
    #[arg(long)]
    pub name: String,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// Where the database is. Without `DATABASE_URL`, a private cluster under `--data-dir`.
#[derive(Clone, Args)]
pub struct DatabaseArgs {
    /// An existing PostgreSQL database; when unset, payorch runs a private cluster. libpq's
    /// `sslmode` (disable, prefer, require, verify-ca, verify-full) and `sslrootcert` apply.
    /// In production, a role that owns nothing (docs/PRODUCTION.md, section 2).
    #[arg(
        help_heading = "Database",
        long,
        env = "DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// The table owner's URL, for migrations (`serve` and `migrate`); defaults to
    /// `DATABASE_URL`.
    #[arg(
        help_heading = "Database",
        long,
        env = "PAYORCH_MIGRATION_DATABASE_URL",
        hide_env_values = true
    )]
    pub migration_database_url: Option<String>,
    /// A file holding `DATABASE_URL` (a password kept out of the environment and `ps`).
    #[arg(
        help_heading = "Database",
        long,
        env = "DATABASE_URL_FILE",
        conflicts_with = "database_url",
        value_parser = secret_file
    )]
    pub database_url_file: Option<Secret>,
    /// A file holding the migration URL.
    #[arg(
        help_heading = "Database",
        long,
        env = "PAYORCH_MIGRATION_DATABASE_URL_FILE",
        conflicts_with = "migration_database_url",
        value_parser = secret_file
    )]
    pub migration_database_url_file: Option<Secret>,
    /// The folder for the private cluster and `credentials.json`.
    #[arg(
        help_heading = "Database",
        long,
        env = "PAYORCH_DATA_DIR",
        default_value = ".payorch"
    )]
    pub data_dir: PathBuf,
    /// Largest number of database connections of this process.
    #[arg(
        help_heading = "Database",
        long,
        env = "PAYORCH_DB_POOL_SIZE",
        default_value_t = 16
    )]
    pub db_pool_size: usize,
    /// Longest a request waits for a database connection before answering `503`; a request
    /// that would wait longer is refused `503` on arrival (docs/guides/api.md, "Overload").
    #[arg(
        help_heading = "Database",
        long,
        env = "PAYORCH_DB_ACQUIRE_TIMEOUT_MS",
        default_value_t = 2000
    )]
    pub db_acquire_timeout_ms: u64,
    /// `statement_timeout` set on every connection.
    #[arg(
        help_heading = "Database",
        long,
        env = "PAYORCH_DB_STATEMENT_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub db_statement_timeout_ms: u64,
    /// What `DATABASE_URL` reaches: PostgreSQL itself or a pooler in session mode (`none`),
    /// or a pooler in transaction mode, PgBouncer's of any version (`transaction`): then
    /// payorch sends unnamed statements only, sets its statement timeout and time zone in each
    /// transaction, and migrates only through `--migration-database-url`, straight to
    /// PostgreSQL (docs/operations/pooler.md).
    #[arg(
        help_heading = "Database",
        long,
        env = "PAYORCH_DB_POOLER",
        value_enum,
        default_value_t = Pooler::None
    )]
    pub db_pooler: Pooler,
}

/// The database URL may hold a password: `Debug` says only whether one is set.
impl std::fmt::Debug for DatabaseArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseArgs")
            .field(
                "database_url",
                &self.database_url.as_ref().map(|_| "[redacted]"),
            )
            .field(
                "migration_database_url",
                &self.migration_database_url.as_ref().map(|_| "[redacted]"),
            )
            .field("database_url_file", &self.database_url_file)
            .field(
                "migration_database_url_file",
                &self.migration_database_url_file,
            )
            .field("data_dir", &self.data_dir)
            .field("db_pool_size", &self.db_pool_size)
            .field("db_acquire_timeout_ms", &self.db_acquire_timeout_ms)
            .field("db_statement_timeout_ms", &self.db_statement_timeout_ms)
            .field("db_pooler", &self.db_pooler)
            .finish()
    }
}

/// The contents of the file a `--…-file` flag names, read when the flags are
/// (docs/operations/configuration.md, "How flags, variables and files combine";
/// docs/PRODUCTION.md, "Secrets").
fn secret_file(path: &str) -> Result<Secret, String> {
    crate::secret_files::read_secret_file(std::path::Path::new(path)).map(Secret::from)
}

impl DatabaseArgs {
    /// `DATABASE_URL`, given or from its file.
    pub fn url(&self) -> Option<String> {
        self.database_url.clone().or_else(|| {
            self.database_url_file
                .as_ref()
                .map(|s| s.expose().to_owned())
        })
    }

    /// The migration URL, given or from its file.
    pub fn migration_url(&self) -> Option<String> {
        self.migration_database_url.clone().or_else(|| {
            self.migration_database_url_file
                .as_ref()
                .map(|s| s.expose().to_owned())
        })
    }

    pub fn pool_settings(&self) -> PoolSettings {
        PoolSettings {
            max_size: self.db_pool_size,
            acquire_timeout: Duration::from_millis(self.db_acquire_timeout_ms),
            statement_timeout: Duration::from_millis(self.db_statement_timeout_ms),
            pooler: self.db_pooler,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address of the HTTP API; port 0 picks a free port (the demo's `credentials.json` says
    /// which).
    #[arg(
        help_heading = "Server",
        long,
        env = "PAYORCH_BIND",
        default_value = "127.0.0.1:8080"
    )]
    pub bind: String,
    /// HTTP worker threads (default: one per core).
    #[arg(help_heading = "Server", long, env = "PAYORCH_WORKERS")]
    pub workers: Option<usize>,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub idempotency: IdempotencyArgs,
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[command(flatten)]
    pub delivery: DeliveryArgs,
    #[command(flatten)]
    pub reconciler: ReconcilerArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub master_key: MasterKeyArgs,
    /// How long a live API key is remembered in process without asking the database (0: ask
    /// every time). A revocation evicts it sooner (`--key-poll-ms`); this bounds it only while
    /// that poll cannot reach the database.
    #[arg(
        help_heading = "API keys",
        long,
        env = "PAYORCH_AUTH_CACHE_MS",
        default_value_t = 5000
    )]
    pub auth_cache_ms: u64,
    /// How often this replica asks the database for revoked or rotated keys (and writes keys'
    /// last use): a revocation is honoured within about this long. At most 10 minutes.
    #[arg(help_heading = "API keys", long, env = "PAYORCH_KEY_POLL_MS", default_value_t = 250,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub key_poll_ms: u64,
    /// The demo with a real provider too: on an empty database a demo merchant and a support
    /// key written to `credentials.json`, and the anonymous checkout demo at `/checkout`
    /// paying as that merchant through the provider (a test account's, say). Always on with
    /// the in-process sandbox; never in production (docs/PRODUCTION.md, "No demo").
    #[arg(help_heading = "Demo", long, env = "PAYORCH_DEMO")]
    pub demo: bool,
    /// When the database has merchants but `credentials.json` is missing or stale: mint a
    /// fresh API key for the demo merchant (the oldest merchant named `Demo merchant`) and a
    /// fresh support key, and write the file; older keys stay live. Only with the demo.
    #[arg(help_heading = "Demo", long, env = "PAYORCH_NEW_DEMO_KEYS")]
    pub new_demo_keys: bool,
    /// Most client connections open at once, in all; lowered to fit the open-file limit
    /// (which `serve` raises to its hard maximum) minus 256 kept for the database, the
    /// providers and the rest.
    #[arg(
        help_heading = "Connections",
        long,
        env = "PAYORCH_MAX_CONNECTIONS",
        default_value_t = 10_000
    )]
    pub max_connections: usize,
    /// Most connections open at once from one client address, but those listed in
    /// `--connection-budget-exempt` (0: no limit).
    #[arg(
        help_heading = "Connections",
        long,
        env = "PAYORCH_MAX_CONNECTIONS_PER_IP",
        default_value_t = 256
    )]
    pub max_connections_per_ip: usize,
    /// Longest a request body may take to arrive after its headers; then `408
    /// request_timeout` and the connection is closed.
    #[arg(
        help_heading = "Connections",
        long,
        env = "PAYORCH_BODY_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub body_timeout_ms: u64,
    /// Longest a client may take to send a request's headers; then the connection is closed.
    #[arg(
        help_heading = "Connections",
        long,
        env = "PAYORCH_HEADER_TIMEOUT_MS",
        default_value_t = 5_000
    )]
    pub header_timeout_ms: u64,
    /// Addresses (or CIDR ranges), comma-separated, with no per-address connection limit:
    /// your reverse proxy or load balancer and your provider's webhook senders. They still
    /// count in `--max-connections` (docs/guides/api.md, "Slow and greedy clients").
    #[arg(
        help_heading = "Connections",
        long = "connection-budget-exempt",
        env = "PAYORCH_CONNECTION_BUDGET_EXEMPT",
        value_delimiter = ',',
        default_value = "127.0.0.1,::1",
        value_parser = parse_ip_net
    )]
    pub connection_budget_exempt: Vec<IpNet>,
    /// On SIGTERM or Ctrl-C: how long `serve` waits for the requests in progress, after it
    /// has stopped accepting connections, before it closes what is left. Must be longer
    /// than `--provider-timeout-ms` plus `--db-acquire-timeout-ms` (docs/operations/running.md, "Stopping and
    /// rolling deploys").
    #[arg(
        help_heading = "Server",
        long,
        env = "PAYORCH_DRAIN_SECS",
        default_value_t = 20
    )]
    pub drain_secs: u64,
    /// How many days a provider's webhook is kept, at least: a month of webhooks (by the
    /// provider's own time of the event) is dropped whole once that many days have passed since
    /// the month ended and every payment of its webhooks (with each of its refunds and
    /// captures) has been final that long, so a month more at most
    /// (docs/guides/provider-webhooks.md, "Webhooks"). At least the providers' redelivery
    /// window: Adyen retries for up to 30 days, Stripe for 3. At most 36,500.
    #[arg(help_heading = "Retention", long, env = "PAYORCH_PROVIDER_WEBHOOK_RETENTION_DAYS", default_value_t = 35,
          value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub provider_webhook_retention_days: u64,
    /// How many days merchant events are kept, at least (1 to 36,500); a month of older ones
    /// is dropped whole with its deliveries once its payments are final, so an event is kept
    /// a month more at most, checked every `--reaper-interval-secs` (docs/guides/events.md,
    /// "Events and webhook endpoints").
    #[arg(help_heading = "Retention", long, env = "PAYORCH_EVENT_RETENTION_DAYS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub event_retention_days: u64,
    /// The address payers' browsers reach payorch at (`https://pay.example.com`, behind a
    /// proxy): a provider sends a payer back from a 3-D Secure challenge to its
    /// `/v1/payments/{id}/return` (docs/guides/three-d-secure.md, "3-D Secure"). Default: the address `--bind` bound.
    #[arg(help_heading = "Server", long, env = "PAYORCH_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// How much one client may ask in a while, and whose forwarding headers are believed
/// (docs/PRODUCTION.md, "Limits and the addresses payorch believes"). Counted per replica;
/// a limit of 0 is none.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// `GET`s of the API a minute with one API key; then `429 rate_limited` with
    /// `Retry-After` and `RateLimit` fields. Every request limit is counted per replica, and
    /// 0 is no limit (docs/guides/api.md, "Slow and greedy clients").
    #[arg(
        help_heading = "Request limits and proxies",
        long,
        env = "PAYORCH_READS_PER_MINUTE_PER_KEY",
        default_value_t = 6_000
    )]
    pub reads_per_minute_per_key: u32,
    /// `GET`s of the API (and the checkout demo's) a minute from one client address (an IPv6
    /// client by its /64).
    #[arg(
        help_heading = "Request limits and proxies",
        long,
        env = "PAYORCH_READS_PER_MINUTE_PER_ADDRESS",
        default_value_t = 12_000
    )]
    pub reads_per_minute_per_address: u32,
    /// Secrets that are no live key a minute from one client address; past it the address
    /// is answered `429` without a lookup.
    #[arg(
        help_heading = "Request limits and proxies",
        long,
        env = "PAYORCH_FAILED_AUTH_PER_MINUTE_PER_ADDRESS",
        default_value_t = 20
    )]
    pub failed_auth_per_minute_per_address: u32,
    /// How long a secret that is no live key is answered `401` without a lookup: a key made
    /// meanwhile works at most this long after it was made. At most an hour.
    #[arg(help_heading = "Request limits and proxies", long, env = "PAYORCH_FAILED_AUTH_MEMORY_MS", default_value_t = 2_000,
          value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub failed_auth_memory_ms: u64,
    /// `GET /v1/payments/{id}/return` a minute from one client address: the payer's way back
    /// from 3-D Secure (docs/guides/three-d-secure.md).
    #[arg(
        help_heading = "Request limits and proxies",
        long,
        env = "PAYORCH_PAYER_RETURNS_PER_MINUTE_PER_ADDRESS",
        default_value_t = 60
    )]
    pub payer_returns_per_minute_per_address: u32,
    /// After a payment's first two returns, how often a return may make payorch ask its
    /// provider; the others are answered from what payorch knows (0: every return asks). At
    /// most a day: a bound, so the interval's arithmetic cannot overflow.
    #[arg(help_heading = "Request limits and proxies", long, env = "PAYORCH_PAYER_RETURN_CHECK_SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub payer_return_check_secs: u64,
    /// Your proxies (addresses or CIDR ranges, comma-separated): only from them is the
    /// forwarding header believed about the client's address, host and scheme (in the logs
    /// and the per-address limits); from anyone else it is ignored. Default: none. They are
    /// also exempt from the per-address connection limit (docs/guides/api.md, "Slow and
    /// greedy clients").
    #[arg(
        help_heading = "Request limits and proxies",
        long = "trusted-proxies",
        env = "PAYORCH_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = parse_ip_net
    )]
    pub trusted_proxies: Vec<IpNet>,
    /// The header the trusted proxies write: `x-forwarded-for` (with `X-Forwarded-Proto` and
    /// `-Host`) or `forwarded` (RFC 7239); the other is ignored.
    #[arg(
        help_heading = "Request limits and proxies",
        long,
        env = "PAYORCH_FORWARDED_HEADER",
        default_value = "x-forwarded-for"
    )]
    pub forwarded_header: ForwardedHeader,
}

impl LimitArgs {
    pub fn settings(&self) -> LimitSettings {
        let per_minute = Quota::per_minute;
        LimitSettings {
            reads_per_key: per_minute(self.reads_per_minute_per_key),
            reads_per_address: per_minute(self.reads_per_minute_per_address),
            failed_auth_per_address: per_minute(self.failed_auth_per_minute_per_address),
            failed_auth_memory: Duration::from_millis(self.failed_auth_memory_ms),
            payer_returns_per_address: per_minute(self.payer_returns_per_minute_per_address),
            payer_return_check_interval: Duration::from_secs(self.payer_return_check_secs),
            trusted_proxies: TrustedProxies {
                nets: self.trusted_proxies.clone(),
                header: self.forwarded_header,
            },
        }
    }
}

/// An absolute http(s) URL with a host and no query or fragment, without its trailing `/`:
/// payorch's routes are appended to it.
fn parse_public_url(text: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(text.trim()).map_err(|err| format!("`{text}`: {err}"))?;
    let usable = matches!(url.scheme(), "https" | "http")
        && url.host_str().is_some()
        && url.query().is_none()
        && url.fragment().is_none();
    if !usable {
        return Err(format!(
            "`{text}` must be an absolute http(s) URL without a query or fragment"
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// `10.0.0.1` or `10.0.0.0/8`.
fn parse_ip_net(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| format!("`{text}` is neither an address nor a CIDR range"))
}

/// The payment providers; without `--provider` or `--provider-url`, an in-process sandbox.
#[derive(Debug, Clone, Args)]
pub struct ProviderArgs {
    /// A real provider, `NAME=PROTOCOL:URL` (protocol `stripe` or `adyen`), repeated in
    /// routing order; its secrets come from `PAYORCH_PROVIDER_<NAME>_…` variables (docs/guides/routing.md,
    /// "Routing and failover").
    #[arg(
        help_heading = "Providers",
        long = "provider",
        env = "PAYORCH_PROVIDERS",
        value_delimiter = ',',
        conflicts_with = "provider_url"
    )]
    pub providers: Vec<ProviderSpec>,
    /// Base URL of a Stripe-protocol provider (Stripe itself, or `payorch sandbox`), named
    /// `stripe`: https, or plain http to a loopback host only. With neither this nor
    /// `--provider`, `serve` runs the in-process sandbox, as two providers, `stripe` and
    /// `adyen` (its two faces): the demo.
    #[arg(help_heading = "Providers", long, env = "PAYORCH_PROVIDER_URL", value_parser = crate::provider_specs::provider_url)]
    pub provider_url: Option<String>,
    /// The provider's secret API key (for the in-process sandbox: made up at start).
    #[arg(
        help_heading = "Providers",
        long,
        env = "PAYORCH_PROVIDER_SECRET",
        hide_env_values = true
    )]
    pub provider_secret: Option<Secret>,
    /// A file holding the provider's secret API key.
    #[arg(
        help_heading = "Providers",
        long,
        env = "PAYORCH_PROVIDER_SECRET_FILE",
        conflicts_with = "provider_secret",
        value_parser = secret_file
    )]
    pub provider_secret_file: Option<Secret>,
    /// The secrets webhooks may be signed with, comma-separated: several at once while a
    /// secret is rotated; the in-process sandbox signs with the first (default: the one in
    /// credentials.json, else a new one).
    #[arg(
        help_heading = "Providers",
        long = "webhook-secret",
        env = "PAYORCH_WEBHOOK_SECRET",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub webhook_secrets: Vec<Secret>,
    /// A file holding the webhook secrets, comma-separated.
    #[arg(
        help_heading = "Providers",
        long,
        env = "PAYORCH_WEBHOOK_SECRET_FILE",
        conflicts_with = "webhook_secrets",
        value_parser = secret_file
    )]
    pub webhook_secret_file: Option<Secret>,
    /// Largest accepted distance between a webhook's signed timestamp and now.
    #[arg(
        help_heading = "Providers",
        long,
        env = "PAYORCH_WEBHOOK_TOLERANCE_SECS",
        default_value_t = 300
    )]
    pub webhook_tolerance_secs: u64,
    /// Address of the in-process sandbox provider. Its other settings are `payorch
    /// sandbox`'s defaults (no faults; `payorch sandbox --help` lists them).
    #[arg(
        help_heading = "The in-process sandbox",
        long,
        env = "PAYORCH_SANDBOX_BIND",
        default_value = "127.0.0.1:0"
    )]
    pub sandbox_bind: String,
    /// How long after a charge the in-process sandbox delivers its webhook, as a provider's
    /// queue would (0: at once, racing the API answer, as the tests do).
    #[arg(help_heading = "The in-process sandbox", long, env = "PAYORCH_SANDBOX_WEBHOOK_DELAY_MS", default_value_t = payorch_sandbox::DEFAULT_WEBHOOK_DELAY_MS)]
    pub sandbox_webhook_delay_ms: u64,
    /// Intents (and refunds) the in-process sandbox keeps; older ones it forgets and counts
    /// (docs/operations/running.md, "The sandbox's memory").
    #[arg(help_heading = "The in-process sandbox", long, env = "PAYORCH_SANDBOX_KEEP_INTENTS", default_value_t = payorch_sandbox::DEFAULT_KEEP_INTENTS, value_parser = payorch_sandbox::parse_keep_intents)]
    pub sandbox_keep_intents: usize,
    /// Answers the in-process sandbox keeps to replay byte for byte. Past them, a replay is
    /// made again from what the key made (the intent or refund as it is now); a key whose
    /// first answer was a `500` replays that `500`.
    #[arg(help_heading = "The in-process sandbox", long, env = "PAYORCH_SANDBOX_KEEP_ANSWERS", default_value_t = payorch_sandbox::DEFAULT_KEEP_ANSWERS)]
    pub sandbox_keep_answers: usize,
    /// How long the in-process sandbox takes to answer a `pm_sandbox_slow` charge.
    #[arg(help_heading = "The in-process sandbox", long, env = "PAYORCH_SANDBOX_SLOW_MS", default_value_t = payorch_sandbox::DEFAULT_SLOW_MS)]
    pub sandbox_slow_ms: u64,
    /// The in-process sandbox's Stripe face (the `stripe` provider): its approval rate,
    /// decline mix and outages, as `payorch sandbox --stripe-mix` takes them
    /// (docs/guides/test-cards.md, "Approval rates and outages"). Default: every card
    /// approved, no outage.
    #[arg(help_heading = "The in-process sandbox", long, env = "PAYORCH_SANDBOX_STRIPE_MIX", default_value = "approval=1", value_parser = payorch_sandbox::Mix::parse)]
    pub sandbox_stripe_mix: payorch_sandbox::Mix,
    /// The in-process sandbox's Adyen face (the `adyen` provider), as `--sandbox-stripe-mix`.
    #[arg(help_heading = "The in-process sandbox", long, env = "PAYORCH_SANDBOX_ADYEN_MIX", default_value = "approval=1", value_parser = payorch_sandbox::Mix::parse)]
    pub sandbox_adyen_mix: payorch_sandbox::Mix,
    /// The seed the in-process sandbox's mixes draw from, with each request's idempotency
    /// key: the same seed replays the same answers.
    #[arg(
        help_heading = "The in-process sandbox",
        long,
        env = "PAYORCH_SANDBOX_MIX_SEED",
        default_value_t = 0
    )]
    pub sandbox_mix_seed: u64,
    /// Longest wait for a connection to the provider.
    #[arg(
        help_heading = "Providers",
        long,
        env = "PAYORCH_PROVIDER_CONNECT_TIMEOUT_MS",
        default_value_t = 2000
    )]
    pub provider_connect_timeout_ms: u64,
    /// Longest a whole provider call may take; past it the outcome is unknown and the
    /// attempt stays pending for the reconciler. Shorter than `--idempotency-lease-secs`
    /// (`serve` refuses to start otherwise).
    #[arg(
        help_heading = "Providers",
        long,
        env = "PAYORCH_PROVIDER_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub provider_timeout_ms: u64,
}

impl ProviderArgs {
    /// The provider's secret, given or from its file.
    pub fn secret(&self) -> Option<Secret> {
        self.provider_secret
            .clone()
            .or_else(|| self.provider_secret_file.clone())
    }

    /// The webhook secrets, given or from their file.
    pub fn webhook_secrets(&self) -> Vec<Secret> {
        match &self.webhook_secret_file {
            Some(file) => file.split(',').map(|s| s.trim().into()).collect(),
            None => self.webhook_secrets.clone(),
        }
    }

    /// The adapter's configuration for a provider at `base_url`.
    pub fn stripe_config(
        &self,
        base_url: &str,
        secret: &str,
        webhook_secrets: Vec<Secret>,
    ) -> StripeConfig {
        StripeConfig {
            connect_timeout: Duration::from_millis(self.provider_connect_timeout_ms),
            timeout: Duration::from_millis(self.provider_timeout_ms),
            webhook_tolerance: Duration::from_secs(self.webhook_tolerance_secs),
            ..StripeConfig::new(base_url, secret, webhook_secrets)
        }
    }
}

/// The reconciler: when and how payorch asks the provider about unfinished attempts.
#[derive(Debug, Clone, Args)]
pub struct ReconcilerArgs {
    /// How often each replica looks for attempts due a check.
    #[arg(
        help_heading = "Reconciler",
        long,
        env = "PAYORCH_RECONCILER_INTERVAL_MS",
        default_value_t = 1000
    )]
    pub reconciler_interval_ms: u64,
    /// Waits before the first, second, … check of an open attempt; the last repeats. Each
    /// is drawn from 0.8 to 1.2 times its value, so attempts a provider outage left open
    /// together are not checked together again.
    #[arg(
        help_heading = "Reconciler",
        long,
        env = "PAYORCH_RECONCILE_BACKOFF_SECS",
        value_delimiter = ',',
        default_value = "5,15,60,300,900,3600"
    )]
    pub reconcile_backoff_secs: Vec<u64>,
    /// How long the provider remembers idempotency keys, minus a margin (Stripe: 24 h).
    /// Inside it the reconciler's first check of an attempt resends with the attempt's key;
    /// past it, it only asks (Stripe: retrieves the intent, or lists the intents of the
    /// attempt's window; Adyen: nothing, its notifications tell).
    #[arg(help_heading = "Reconciler", long, env = "PAYORCH_PROVIDER_KEY_WINDOW_SECS", default_value_t = 23 * 3600)]
    pub provider_key_window_secs: u64,
    /// How long after an attempt's last possible send the provider has surely finished with
    /// it. Stripe: a read-after-write list of the intents made in the attempt's window that
    /// finds none after it fails the attempt `provider_no_record` (a search never does).
    /// Formerly `--provider-search-delay-secs`, still accepted.
    #[arg(
        help_heading = "Reconciler",
        long = "provider-settle-secs",
        alias = "provider-search-delay-secs",
        env = "PAYORCH_PROVIDER_SETTLE_SECS",
        default_value_t = 300
    )]
    pub provider_settle_secs: u64,
    /// A provider with no lookups (Adyen): an attempt whose outcome is still unknown this long
    /// after it was made, with no notification, is canceled by payorch's reference (Adyen's
    /// technical cancel), whose notification ends it.
    #[arg(
        help_heading = "Reconciler",
        long,
        env = "PAYORCH_TECHNICAL_CANCEL_AFTER_SECS",
        default_value_t = 3600
    )]
    pub technical_cancel_after_secs: u64,
    /// Attempts unresolved for longer than this are counted in
    /// `payorch_payment_attempts_unresolved_overdue`, for a human to look at.
    #[arg(
        help_heading = "Reconciler",
        long,
        env = "PAYORCH_UNRESOLVED_ALERT_SECS",
        default_value_t = 900
    )]
    pub unresolved_alert_secs: u64,
    /// How often each replica reads every provider's record of money moved (Stripe's balance
    /// transactions, Adyen's settlement details report) and compares it with payorch's
    /// attempts, refunds and disputes (docs/operations/reconciliation.md). 0: never.
    #[arg(
        help_heading = "Settlement reconciliation",
        long,
        env = "PAYORCH_SETTLEMENT_INTERVAL_SECS",
        default_value_t = 0
    )]
    pub settlement_interval_secs: u64,
    /// How long after it was booked, or finished at payorch, a charge or refund is compared,
    /// so that one just made is not reported missing: longer than an unknown answer takes to
    /// be settled by the reconciler, and for Adyen than a capture takes to be settled in a
    /// batch.
    #[arg(
        help_heading = "Settlement reconciliation",
        long,
        env = "PAYORCH_SETTLEMENT_GRACE_SECS",
        default_value_t = 3600
    )]
    pub settlement_grace_secs: u64,
    /// The grace of Adyen's record, whose entries are dated by the settlement batch they
    /// arrive in: longer than the account's settlement delay plus its payout interval
    /// (docs/operations/reconciliation.md, "How it runs").
    #[arg(
        help_heading = "Settlement reconciliation",
        long,
        env = "PAYORCH_SETTLEMENT_ADYEN_GRACE_SECS",
        default_value_t = 5 * 24 * 3600
    )]
    pub settlement_adyen_grace_secs: u64,
    /// The first Adyen settlement batch read, before any read: an account older than the
    /// reconciliation starts at a recent batch instead of its first.
    #[arg(
        help_heading = "Settlement reconciliation",
        long,
        env = "PAYORCH_SETTLEMENT_ADYEN_FIRST_BATCH",
        default_value_t = 1
    )]
    pub settlement_adyen_first_batch: i64,
}

impl ReconcilerArgs {
    /// The settlement reconciliation's schedule and grace.
    pub fn settlement(&self) -> SettlementSettings {
        SettlementSettings {
            interval: (self.settlement_interval_secs > 0)
                .then(|| Duration::from_secs(self.settlement_interval_secs)),
            grace: Duration::from_secs(self.settlement_grace_secs),
            batch_grace: Duration::from_secs(self.settlement_adyen_grace_secs),
            first_batch: self.settlement_adyen_first_batch.max(1),
            ..SettlementSettings::default()
        }
    }

    pub fn settings(&self, provider_timeout: Duration) -> ReconcilerSettings {
        let backoff: Vec<Duration> = self
            .reconcile_backoff_secs
            .iter()
            .map(|s| Duration::from_secs((*s).max(1)))
            .collect();
        ReconcilerSettings {
            interval: Duration::from_millis(self.reconciler_interval_ms.max(10)),
            backoff: if backoff.is_empty() {
                ReconcilerSettings::default().backoff
            } else {
                backoff
            },
            key_window: Duration::from_secs(self.provider_key_window_secs),
            settle_delay: Duration::from_secs(self.provider_settle_secs),
            technical_cancel_after: Duration::from_secs(self.technical_cancel_after_secs),
            // A claimed attempt stays hidden until its check has surely ended.
            claim: provider_timeout * 2 + Duration::from_secs(5),
            alert_after: Duration::from_secs(self.unresolved_alert_secs),
            ..ReconcilerSettings::default()
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct IdempotencyArgs {
    /// How long a request waits for an in-flight duplicate before `409
    /// idempotency_key_in_use`.
    #[arg(
        help_heading = "Idempotency keys",
        long,
        env = "PAYORCH_IDEMPOTENCY_WAIT_MS",
        default_value_t = 2000
    )]
    pub idempotency_wait_ms: u64,
    /// How long an in-flight payment holds its key before a retry may take it over (longer
    /// than the provider timeout).
    #[arg(
        help_heading = "Idempotency keys",
        long,
        env = "PAYORCH_IDEMPOTENCY_LEASE_SECS",
        default_value_t = 30
    )]
    pub idempotency_lease_secs: u64,
    // The operations whose `Operation::ttl` is `KeyTtl::Order` (idempotency/operation.rs).
    /// Key lifetime for order creation, cancelation and metadata changes, and for webhook
    /// endpoints and their secret rotations.
    #[arg(help_heading = "Idempotency keys", long, env = "PAYORCH_IDEMPOTENCY_TTL_ORDERS_SECS", default_value_t = 24 * 3600)]
    pub idempotency_ttl_orders_secs: u64,
    // The operations whose `Operation::ttl` is `KeyTtl::Payment`.
    /// Key lifetime for payments, checkouts, refunds, captures and voids (never while the
    /// payment, refund, capture or void is open).
    #[arg(help_heading = "Idempotency keys", long, env = "PAYORCH_IDEMPOTENCY_TTL_PAYMENTS_SECS", default_value_t = 72 * 3600)]
    pub idempotency_ttl_payments_secs: u64,
    /// New idempotency keys a merchant may open per minute before `429`
    /// (docs/guides/idempotency.md, "Rate of new keys").
    #[arg(
        help_heading = "Idempotency keys",
        long,
        env = "PAYORCH_MAX_NEW_KEYS_PER_MINUTE",
        default_value_t = 6000
    )]
    pub max_new_keys_per_minute: i64,
    /// How often each replica shares its counts of new keys with the others (the per-minute
    /// cap is exact within a replica and this far behind across replicas).
    #[arg(
        help_heading = "Idempotency keys",
        long,
        env = "PAYORCH_QUOTA_SYNC_MS",
        default_value_t = 1000
    )]
    pub quota_sync_ms: u64,
    /// How often each replica's reapers look for idempotency keys past their time (retired
    /// or deleted, a batch at a time), and keep the monthly partitions of merchant events and
    /// provider webhooks (the months ahead made, a month past its retention dropped).
    #[arg(
        help_heading = "Idempotency keys",
        long,
        env = "PAYORCH_REAPER_INTERVAL_SECS",
        default_value_t = 60
    )]
    pub reaper_interval_secs: u64,
    /// How long, from its first use, a key that made a payment or refund is remembered: past
    /// its TTL a retry with it answers `409 idempotency_key_expired` until then, never charging
    /// again; after it the key is free (docs/guides/idempotency.md, "A key's life").
    #[arg(help_heading = "Idempotency keys", long, env = "PAYORCH_IDEMPOTENCY_HORIZON_SECS", default_value_t = 30 * 24 * 3600)]
    pub idempotency_horizon_secs: u64,
}

impl IdempotencyArgs {
    pub fn settings(&self) -> IdempotencySettings {
        IdempotencySettings {
            wait: Duration::from_millis(self.idempotency_wait_ms),
            lease: Duration::from_secs(self.idempotency_lease_secs),
            order_ttl: Duration::from_secs(self.idempotency_ttl_orders_secs),
            payment_ttl: Duration::from_secs(self.idempotency_ttl_payments_secs),
            max_new_keys_per_minute: self.max_new_keys_per_minute,
        }
    }

    pub fn reaper(&self) -> ReaperSettings {
        ReaperSettings {
            interval: Duration::from_secs(self.reaper_interval_secs.max(1)),
            horizon: Duration::from_secs(self.idempotency_horizon_secs),
            ..ReaperSettings::default()
        }
    }
}

/// Delivering events to merchants' webhook endpoints (docs/guides/events.md, "Events and webhook
/// endpoints"; docs/DESIGN.md, "Delivering events").
#[derive(Debug, Clone, Args)]
pub struct DeliveryArgs {
    /// Register and send to `http://` endpoints on a loopback host (`localhost`,
    /// `127.0.0.1`, `[::1]`; and loopback addresses at all), for the demo and local
    /// receivers. Default: on with the in-process sandbox (the demo), off with a real
    /// provider; `--allow-http-webhooks=false` turns it off for the demo too
    /// (docs/guides/events.md, "Registering an endpoint").
    #[arg(
        help_heading = "Events to merchants' endpoints",
        long,
        env = "PAYORCH_ALLOW_HTTP_WEBHOOKS",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub allow_http_webhooks: Option<bool>,
    /// Register and send to private (`10/8`, `172.16/12`, `192.168/16`, `fc00::/7`),
    /// carrier-grade NAT (`100.64/10`), link-local and loopback addresses: payorch and its
    /// merchants' receivers in one private network. Cloud metadata, unspecified, multicast,
    /// broadcast, documentation and reserved addresses are never sent to.
    #[arg(
        help_heading = "Events to merchants' endpoints",
        long,
        env = "PAYORCH_ALLOW_PRIVATE_WEBHOOK_ADDRESSES"
    )]
    pub allow_private_webhook_addresses: bool,
    /// How often an idle delivery worker looks for due deliveries (at once again after a
    /// full batch).
    #[arg(
        help_heading = "Events to merchants' endpoints",
        long,
        env = "PAYORCH_DELIVERY_POLL_MS",
        default_value_t = 1000
    )]
    pub delivery_poll_ms: u64,
    /// Deliveries a worker takes per statement.
    #[arg(
        help_heading = "Events to merchants' endpoints",
        long,
        env = "PAYORCH_DELIVERY_BATCH",
        default_value_t = 32
    )]
    pub delivery_batch: i64,
    /// Sends in flight at once, per replica.
    #[arg(
        help_heading = "Events to merchants' endpoints",
        long,
        env = "PAYORCH_DELIVERY_CONCURRENCY",
        default_value_t = 32
    )]
    pub delivery_concurrency: usize,
}

impl DeliveryArgs {
    /// `embedded_sandbox`: whether `serve` runs the demo's in-process sandbox.
    pub fn settings(&self, embedded_sandbox: bool) -> DeliverySettings {
        DeliverySettings {
            poll_interval: Duration::from_millis(self.delivery_poll_ms.max(10)),
            batch: self.delivery_batch.max(1),
            concurrency: self.delivery_concurrency.max(1),
            urls: UrlPolicy {
                allow_http: self.allow_http_webhooks.unwrap_or(embedded_sandbox),
                allow_private: self.allow_private_webhook_addresses,
            },
            ..DeliverySettings::default()
        }
    }
}

impl ServeArgs {
    /// Whether `serve` runs the in-process sandbox: the demo (docs/quickstart.md, "Trying it").
    pub fn embedded_sandbox(&self) -> bool {
        self.provider.providers.is_empty() && self.provider.provider_url.is_none()
    }

    /// Whether `serve` runs the demo: a demo merchant and support key of its own making, and
    /// the anonymous checkout demo. With the in-process sandbox, or when asked (`--demo`);
    /// with a real provider and no `--demo`, no key is made but by an operator.
    pub fn demo(&self) -> bool {
        self.embedded_sandbox() || self.demo
    }

    pub fn app_settings(&self) -> AppSettings {
        AppSettings {
            bind: self.bind.clone(),
            workers: self
                .workers
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
            pool: self.database.pool_settings(),
            idempotency: self.idempotency.settings(),
            reaper: self.idempotency.reaper(),
            event_reaper: EventReaperSettings {
                interval: Duration::from_secs(self.idempotency.reaper_interval_secs.max(1)),
                retention: Duration::from_secs(self.event_retention_days * 24 * 3600),
            },
            webhook_reaper: WebhookReaperSettings {
                interval: Duration::from_secs(self.idempotency.reaper_interval_secs.max(1)),
                retention: Duration::from_secs(self.provider_webhook_retention_days * 24 * 3600),
                ..WebhookReaperSettings::default()
            },
            reconciler: self
                .reconciler
                .settings(Duration::from_millis(self.provider.provider_timeout_ms)),
            settlement: self.reconciler.settlement(),
            delivery: self.delivery.settings(self.embedded_sandbox()),
            auth_cache_ttl: Duration::from_millis(self.auth_cache_ms),
            key_poll: Duration::from_millis(self.key_poll_ms.max(10)),
            quota_sync: Duration::from_millis(self.idempotency.quota_sync_ms.max(10)),
            clients: ClientLimits {
                max_connections: self.max_connections,
                max_connections_per_ip: self.max_connections_per_ip,
                // A trusted proxy carries many clients, each counted by its own address in
                // the limits; its connections are its clients'.
                exempt: [
                    &self.connection_budget_exempt[..],
                    &self.limits.trusted_proxies,
                ]
                .concat(),
                body_timeout: Duration::from_millis(self.body_timeout_ms.max(1)),
                header_timeout: Duration::from_millis(self.header_timeout_ms.max(1)),
            }
            .fitted_to_open_files(),
            drain: Duration::from_secs(self.drain_secs),
            public_url: self.public_url.clone(),
            limits: self.limits.settings(),
            // Loaded by `serve` (files, the environment): `commands::serve`.
            master_keys: None,
            metrics: self.metrics.settings(self.demo()),
        }
    }
}

/// Where `/metrics` is served (docs/PRODUCTION.md, "Metrics and provider URLs"): the demo
/// serves them to anyone on the API's port; anything else needs a listener of their own or a
/// token, or they are not served.
#[derive(Debug, Clone, Args)]
pub struct MetricsArgs {
    /// A listener of their own for `/metrics` (`127.0.0.1:9090`, an internal address), where
    /// no token is asked; then the API's port serves them only with `--metrics-token`.
    #[arg(help_heading = "Metrics", long, env = "PAYORCH_METRICS_BIND")]
    pub metrics_bind: Option<String>,
    /// A bearer token `/metrics` on the API's port asks for. With neither a token (nor its
    /// file) nor `--metrics-bind`, only the demo serves `/metrics` (docs/PRODUCTION.md,
    /// "Metrics and provider URLs").
    #[arg(
        help_heading = "Metrics",
        long,
        env = "PAYORCH_METRICS_TOKEN",
        hide_env_values = true
    )]
    pub metrics_token: Option<Secret>,
    /// A file holding the metrics token.
    #[arg(
        help_heading = "Metrics",
        long,
        env = "PAYORCH_METRICS_TOKEN_FILE",
        conflicts_with = "metrics_token",
        value_parser = secret_file
    )]
    pub metrics_token_file: Option<Secret>,
}

impl MetricsArgs {
    pub fn settings(&self, demo: bool) -> MetricsSettings {
        let token = self
            .metrics_token
            .clone()
            .or_else(|| self.metrics_token_file.clone())
            .filter(|token| !token.trim().is_empty());
        let on_api_port = match token {
            Some(token) => MetricsAccess::Token(token),
            None if demo && self.metrics_bind.is_none() => MetricsAccess::Open,
            None => MetricsAccess::Off,
        };
        MetricsSettings {
            on_api_port,
            bind: self.metrics_bind.clone(),
        }
    }
}

#[cfg(test)]
mod secrets_in_debug {
    use clap::Parser;
    use payorch_sandbox::SandboxConfig;

    use super::Cli;
    use crate::credentials::Credentials;
    use crate::providers::stripe::StripeConfig;

    #[test]
    fn no_config_shows_a_secret_in_debug_output() {
        let cli = Cli::try_parse_from([
            "payorch",
            "serve",
            "--database-url",
            "postgres://payorch:db-password-1@db.internal/payorch",
            "--provider-url",
            "https://api.stripe.com",
            "--provider-secret",
            "sk_live_provider-secret-2",
            "--webhook-secret",
            "whsec_webhook-secret-3,whsec_webhook-secret-4",
        ])
        .expect("the flags parse");
        let sandbox = SandboxConfig {
            secret: "sk_test_sandbox-secret-5".into(),
            webhook_secret: "whsec_sandbox-secret-6".into(),
            ..SandboxConfig::default()
        };
        let stripe = StripeConfig::new(
            "https://api.stripe.com",
            "sk_live_stripe-secret-7",
            vec!["whsec_stripe-secret-8".into()],
        );
        let credentials = Credentials {
            merchant_id: crate::ids::MerchantId::new(),
            api_key: "sk_mer_api-key-9".into(),
            support_key: "sk_sup_support-key-10".into(),
            base_url: "http://127.0.0.1:8080".into(),
            sandbox_url: None,
            webhook_secret: Some("whsec_file-secret-11".into()),
        };
        let (master_keys, master_key_text) = crate::sealing::MasterKeys::generate("k1");
        let master_key = master_key_text
            .split_once(':')
            .expect("id:key")
            .1
            .to_owned();
        let endpoint = crate::ids::EndpointId::new();
        let webhook_secret = crate::events::signing::Secret::generate();
        let sealed =
            crate::events::endpoints::sealed::seal(&master_keys, endpoint, &webhook_secret);
        let shown = format!(
            "{cli:?} {sandbox:?} {stripe:?} {credentials:?} {master_keys:?} {sealed:?} \
             {webhook_secret:?}"
        );
        for secret in [&master_key, sealed.stored(), webhook_secret.expose()] {
            assert!(!shown.contains(secret), "{secret} shows in {shown}");
        }
        for secret in [
            "db-password-1",
            "provider-secret-2",
            "webhook-secret-3",
            "webhook-secret-4",
            "sandbox-secret-5",
            "sandbox-secret-6",
            "stripe-secret-7",
            "stripe-secret-8",
            "api-key-9",
            "support-key-10",
            "file-secret-11",
        ] {
            assert!(!shown.contains(secret), "{secret} shows in {shown}");
        }
        // What is not secret still shows, so the output stays useful.
        assert!(shown.contains("https://api.stripe.com"), "{shown}");
    }
}

#[cfg(test)]
mod webhook_flags {
    use clap::Parser;

    use super::{Cli, Command};

    fn urls(args: &[&str]) -> crate::events::safe_url::UrlPolicy {
        let cli =
            Cli::try_parse_from(["payorch", "serve"].iter().chain(args)).expect("the flags parse");
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        serve.app_settings().delivery.urls
    }

    #[test]
    fn http_webhooks_are_on_for_the_demo_only_unless_told() {
        // The in-process sandbox: the demo, whose receivers are on this machine.
        assert!(urls(&[]).allow_http);
        assert!(!urls(&["--allow-http-webhooks=false"]).allow_http);
        // A real provider: a real deployment.
        let real = ["--provider-url", "https://api.stripe.com"];
        assert!(!urls(&real).allow_http);
        assert!(urls(&[&real[..], &["--allow-http-webhooks"]].concat()).allow_http);
        assert!(!urls(&[]).allow_private);
        assert!(urls(&["--allow-private-webhook-addresses"]).allow_private);
    }
}

#[cfg(test)]
mod public_url_flag {
    use super::parse_public_url;

    #[test]
    fn a_public_url_is_an_absolute_http_url_kept_without_its_trailing_slash() {
        assert_eq!(
            parse_public_url("https://pay.example.com/").as_deref(),
            Ok("https://pay.example.com")
        );
        assert_eq!(
            parse_public_url("http://127.0.0.1:8080/payorch/").as_deref(),
            Ok("http://127.0.0.1:8080/payorch")
        );
        for bad in [
            "pay.example.com",
            "/v1",
            "ftp://pay.example.com",
            "https://pay.example.com/?from=proxy",
            "https://pay.example.com/#top",
        ] {
            assert!(parse_public_url(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod metrics_flags {
    use clap::Parser;

    use super::{Cli, Command};
    use crate::http::metrics::MetricsAccess;

    fn metrics(args: &[&str]) -> crate::app::MetricsSettings {
        let cli =
            Cli::try_parse_from(["payorch", "serve"].iter().chain(args)).expect("the flags parse");
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        serve.app_settings().metrics
    }

    #[test]
    fn metrics_are_open_for_the_demo_only_and_else_behind_a_token_or_their_own_listener() {
        assert!(matches!(metrics(&[]).on_api_port, MetricsAccess::Open));
        let real = ["--provider-url", "https://api.stripe.com"];
        assert!(matches!(metrics(&real).on_api_port, MetricsAccess::Off));
        let token = [&real[..], &["--metrics-token", "t0k"]].concat();
        assert!(matches!(
            metrics(&token).on_api_port,
            MetricsAccess::Token(_)
        ));
        let own = [&real[..], &["--metrics-bind", "127.0.0.1:9090"]].concat();
        let own = metrics(&own);
        assert!(matches!(own.on_api_port, MetricsAccess::Off));
        assert_eq!(own.bind.as_deref(), Some("127.0.0.1:9090"));
        // The demo with a listener of their own keeps them off its public port too.
        let demo_own = metrics(&["--metrics-bind", "127.0.0.1:9090"]);
        assert!(matches!(demo_own.on_api_port, MetricsAccess::Off));
    }

    #[test]
    fn provider_urls_are_https_but_on_this_machine() {
        for bad in ["http://api.stripe.com", "http://10.1.2.3:12111"] {
            assert!(
                Cli::try_parse_from(["payorch", "serve", "--provider-url", bad]).is_err(),
                "{bad}"
            );
        }
        assert!(Cli::try_parse_from([
            "payorch",
            "serve",
            "--provider-url",
            "http://127.0.0.1:12111"
        ])
        .is_ok());
    }
}

#[cfg(test)]
mod limit_flags {
    use clap::Parser;

    use super::{Cli, Command};
    use crate::app::AppSettings;
    use crate::http::client_address::ForwardedHeader;
    use crate::rate_limit::Quota;

    fn settings(args: &[&str]) -> AppSettings {
        let cli =
            Cli::try_parse_from(["payorch", "serve"].iter().chain(args)).expect("the flags parse");
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        serve.app_settings()
    }

    #[test]
    fn no_proxy_is_trusted_unless_named_and_a_named_one_is_exempt_from_connection_shares() {
        let default = settings(&[]);
        assert!(default.limits.trusted_proxies.nets.is_empty());
        assert_eq!(default.limits, Default::default());
        let named = settings(&[
            "--trusted-proxies",
            "10.0.0.0/8,192.0.2.1",
            "--forwarded-header",
            "Forwarded",
            "--reads-per-minute-per-key",
            "10",
        ]);
        let proxies = &named.limits.trusted_proxies;
        assert_eq!(
            proxies.nets,
            [
                "10.0.0.0/8".parse().unwrap(),
                "192.0.2.1/32".parse().unwrap()
            ]
        );
        assert_eq!(proxies.header, ForwardedHeader::Forwarded);
        assert_eq!(named.limits.reads_per_key, Quota::per_minute(10));
        for net in &proxies.nets {
            assert!(named.clients.exempt.contains(net), "{net}");
        }
        assert!(
            Cli::try_parse_from(["payorch", "serve", "--forwarded-header", "x-real-ip"]).is_err()
        );
    }
}
