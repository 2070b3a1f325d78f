//! What each subcommand does, start to finish.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use payorch_sandbox::{self as sandbox, SandboxConfig, SandboxHandle};
use serde_json::json;

use crate::accounts;
use crate::app::Application;
use crate::config::{
    Cli, Command, CreateArgs, DatabaseArgs, MerchantCommand, SecretsCommand, ServeArgs,
    SupportKeyArgs, SupportKeyCommand,
};
use crate::credentials::{self, Credentials, DemoAccount, OnMissingKeys};
use crate::db::migrations::run_migrations;
use crate::db::{roles, Database, PgConn, Pooler};
use crate::provider_specs::{providers_from_specs, CallTimeouts};
use crate::providers::registry::Providers;
use crate::providers::stripe::StripeProvider;
use crate::secret::Secret;
use crate::wiring::{self, Webhooks};

mod keys;
mod secrets;

/// A failure that ends the command; printed as one line.
#[derive(Debug)]
pub struct CommandError(pub String);

impl<E: Display> From<E> for CommandError {
    fn from(err: E) -> Self {
        CommandError(err.to_string())
    }
}

pub async fn run(cli: Cli) -> Result<(), CommandError> {
    match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::Migrate(args) => migrate(args).await,
        Command::Merchant(MerchantCommand::Create(args)) => create_merchant(args).await,
        Command::SupportKey(SupportKeyCommand::Create(args)) => create_support_key(args).await,
        Command::Keys(command) => keys::run(command).await,
        Command::Sandbox(config) => Ok(sandbox::run_standalone(*config).await?),
        Command::Secrets(SecretsCommand::Reencrypt(args)) => secrets::reencrypt_secrets(args).await,
    }
}

async fn open_database(args: &DatabaseArgs) -> Result<Database, CommandError> {
    if args.migration_url().is_some() && args.url().is_none() {
        return Err(CommandError(
            "--migration-database-url goes with --database-url: the private cluster migrates \
             as its own owner"
                .into(),
        ));
    }
    if args.db_pooler == Pooler::Transaction && args.url().is_none() {
        return Err(CommandError(
            "--db-pooler transaction goes with --database-url: the private cluster has no \
             pooler in front of it"
                .into(),
        ));
    }
    let pool = args.pool_settings();
    Ok(Database::open(args.url(), args.data_dir.clone(), false)
        .await?
        .with_migration_url(args.migration_url())
        .with_pooler(pool.pooler, pool.statement_timeout))
}

async fn serve(args: ServeArgs) -> Result<(), CommandError> {
    let database = open_database(&args.database).await?;
    if let Some(cluster) = database.cluster() {
        tracing::info!(cluster = %cluster.root().display(), "private PostgreSQL cluster ready");
    }
    let result = serve_on(&args, &database).await;
    // The cluster is stopped whatever happened to the server, so no postgres is left behind.
    if let Err(err) = database.shutdown().await {
        tracing::error!(error = %err, "could not stop the private cluster");
    }
    result
}

async fn serve_on(args: &ServeArgs, database: &Database) -> Result<(), CommandError> {
    let mut settings = args.app_settings();
    let provider_timeout = Duration::from_millis(args.provider.provider_timeout_ms);
    if settings.idempotency.lease <= provider_timeout {
        return Err(CommandError(format!(
            "the idempotency lease ({} s) must be longer than the provider timeout ({} ms), \
             or a retry could resend a charge whose first call is still running",
            settings.idempotency.lease.as_secs(),
            provider_timeout.as_millis()
        )));
    }
    let least_drain = provider_timeout + settings.pool.acquire_timeout;
    if settings.drain <= least_drain {
        return Err(CommandError(format!(
            "the drain time ({} s) must be longer than the provider timeout plus the database \
             acquire timeout ({} ms), or stopping could cut a checkout between its charge and \
             its answer",
            settings.drain.as_secs(),
            least_drain.as_millis()
        )));
    }
    if args.new_demo_keys && !args.demo() {
        return Err(CommandError(
            "--new-demo-keys mints keys for the demo, which is off with a real provider: make \
             keys with `payorch merchant create` / `payorch support-key create`, or add --demo \
             (never in production)"
                .into(),
        ));
    }
    let demo = args.demo().then_some(if args.new_demo_keys {
        OnMissingKeys::MintNew
    } else {
        OnMissingKeys::Leave
    });
    if args.demo && !args.embedded_sandbox() {
        tracing::warn!(
            "--demo with a real provider: anyone who reaches /checkout pays the demo merchant \
             through it; never in production (docs/PRODUCTION.md, \"No demo\")"
        );
    }
    let applied = run_migrations(database.migration_url()?).await?;
    tracing::info!(applied = applied.len(), "database migrated");
    warn_if_the_role_can_bypass_invariants(database).await?;
    if database.pooler() == Pooler::Transaction {
        check_the_pooled_sessions(database).await?;
    }
    // Before the server answers: a real deployment without a master key stops here.
    let master_keys = secrets::master_keys_of_serve(args)?;
    secrets::seal_clear_endpoint_secrets(database, &master_keys).await?;
    settings.master_keys = Some(master_keys);

    let path = credentials::path_in(&args.database.data_dir);
    let previous = credentials::read(&path);
    // Kept across restarts so a provider configured with it keeps working. Given secrets
    // are all accepted; the first is the one the in-process sandbox signs with.
    let webhook_secrets: Vec<Secret> = match args.provider.webhook_secrets().as_slice() {
        [] => vec![previous
            .as_ref()
            .and_then(|p| p.webhook_secret.clone())
            .unwrap_or_else(|| accounts::random_secret("whsec_"))
            .into()],
        given => given.iter().map(|s| s.trim().into()).collect(),
    };
    let webhook_secret = webhook_secrets[0].clone();
    if !args.provider.providers.is_empty() {
        let timeouts = CallTimeouts {
            connect: Duration::from_millis(args.provider.provider_connect_timeout_ms),
            whole: provider_timeout,
            webhook_tolerance: Duration::from_secs(args.provider.webhook_tolerance_secs),
        };
        let providers = providers_from_specs(
            &args.provider.providers,
            timeouts,
            crate::secret_files::env_or_file,
        )
        .map_err(CommandError)?;
        tracing::info!(providers = ?providers.names(), "using external providers");
        let app = Application::build(&settings, database.url(), providers).await?;
        let base_url = app.base_url();
        return run_server(app, &path, previous, &base_url, &webhook_secret, None, demo).await;
    }
    let (provider_url, provider_secret, sandbox) = match &args.provider.provider_url {
        Some(url) => {
            let secret = args.provider.secret().ok_or_else(|| {
                CommandError(
                    "--provider-url needs --provider-secret (PAYORCH_PROVIDER_SECRET)".into(),
                )
            })?;
            tracing::info!(provider_url = %url, "using an external provider");
            (url.clone(), secret, None)
        }
        None => {
            let secret = args
                .provider
                .secret()
                .unwrap_or_else(|| accounts::random_secret("sk_test_").into());
            let sandbox = start_sandbox(args, &secret, &webhook_secret).await?;
            (sandbox.base_url(), secret, Some(sandbox))
        }
    };
    let result = async {
        let app = match &sandbox {
            Some(sandbox) => {
                wiring::app_on_sandbox(
                    &settings,
                    database.url(),
                    sandbox,
                    |url: String| {
                        args.provider
                            .stripe_config(&url, &provider_secret, webhook_secrets)
                    },
                    Webhooks::ToTheApp,
                )
                .await?
            }
            None => {
                let provider = StripeProvider::new(args.provider.stripe_config(
                    &provider_url,
                    &provider_secret,
                    webhook_secrets,
                ))?;
                let providers = Providers::single(Arc::new(provider));
                Application::build(&settings, database.url(), providers).await?
            }
        };
        let base_url = app.base_url();
        run_server(
            app,
            &path,
            previous,
            &base_url,
            &webhook_secret,
            sandbox.as_ref(),
            demo,
        )
        .await
    }
    .await;
    if let Some(sandbox) = sandbox {
        sandbox.stop().await;
    }
    result
}

/// Says loudly when the service's own role is a superuser or owns the tables: then nothing
/// stops a bug or a stolen connection from disabling the triggers that hold the invariants
/// (docs/PRODUCTION.md, section 2). It still serves: an old deployment keeps running.
async fn warn_if_the_role_can_bypass_invariants(database: &Database) -> Result<(), CommandError> {
    let mut conn = database.connect().await?;
    let reach = roles::role_reach(&mut conn).await?;
    if reach.can_bypass_invariants() {
        tracing::warn!(
            role = %reach.role,
            superuser = reach.superuser,
            owns_tables = reach.owns_tables,
            "payorch connects to the database as a role that can disable the triggers holding \
             the payment invariants: run it as a member of `{}` that owns nothing, and give \
             the owner's URL to --migration-database-url (docs/PRODUCTION.md, section 2)",
            roles::RUNTIME_GROUP
        );
    }
    Ok(())
}

/// Behind a pooler in transaction mode, a statement outside a transaction runs under the
/// session's own settings, which payorch cannot set there (docs/operations/pooler.md): a time
/// zone other than UTC would move payorch's days and months, so `serve` refuses it; no
/// statement timeout is a warning.
async fn check_the_pooled_sessions(database: &Database) -> Result<(), CommandError> {
    let mut conn = database.connect().await?;
    let defaults = crate::db::session_defaults(&mut conn).await?;
    if defaults.time_zone != "UTC" && defaults.time_zone != "Etc/UTC" {
        return Err(CommandError(format!(
            "behind the pooler (--db-pooler transaction) payorch's sessions run in the server's \
             time zone, `{}`, and payorch reckons in UTC: set the runtime role's, as the owner \
             `ALTER ROLE <role> SET timezone = 'UTC'`, or the server's (docs/operations/pooler.md)",
            defaults.time_zone
        )));
    }
    if defaults.statement_timeout == "0" {
        tracing::warn!(
            "behind the pooler (--db-pooler transaction) a statement outside a transaction runs \
             under the server's statement_timeout, which is none: set the runtime role's \
             (ALTER ROLE <role> SET statement_timeout = '10s') or PgBouncer's query_timeout \
             (docs/operations/pooler.md)"
        );
    }
    Ok(())
}

/// The in-process sandbox; its webhooks are pointed at the server once it is bound.
async fn start_sandbox(
    args: &ServeArgs,
    secret: &str,
    webhook_secret: &str,
) -> Result<SandboxHandle, CommandError> {
    let config = SandboxConfig {
        bind: args.provider.sandbox_bind.clone(),
        secret: secret.into(),
        webhook_url: None,
        webhook_secret: webhook_secret.into(),
        // Made up at start, like the API key: the sandbox and the app share the process.
        adyen_hmac_key: hex::encode(rand::random::<[u8; 32]>()).into(),
        webhook_delay_ms: args.provider.sandbox_webhook_delay_ms,
        keep_intents: args.provider.sandbox_keep_intents,
        keep_answers: args.provider.sandbox_keep_answers,
        slow_ms: args.provider.sandbox_slow_ms,
        stripe_mix: args.provider.sandbox_stripe_mix.clone(),
        adyen_mix: args.provider.sandbox_adyen_mix.clone(),
        mix_seed: args.provider.sandbox_mix_seed,
        ..SandboxConfig::default()
    };
    let handle = sandbox::start(config).await?;
    tracing::info!(sandbox_url = %handle.base_url(), "in-process sandbox provider listening");
    Ok(handle)
}

async fn run_server(
    app: Application,
    path: &std::path::Path,
    previous: Option<Credentials>,
    base_url: &str,
    webhook_secret: &str,
    sandbox: Option<&SandboxHandle>,
    demo: Option<OnMissingKeys>,
) -> Result<(), CommandError> {
    let demo = match demo {
        Some(on_missing) => {
            open_demo(
                &app,
                path,
                previous,
                base_url,
                webhook_secret,
                sandbox,
                on_missing,
            )
            .await?
        }
        None => {
            tracing::info!(
                "no demo: no demo merchant, no support key of payorch's making, and the \
                 checkout demo off; make keys with `payorch merchant create` and \
                 `payorch support-key create` (docs/PRODUCTION.md)"
            );
            false
        }
    };

    tracing::info!(%base_url, "payorch listening");
    // The first line of stdout: scripts wait for it. One write, and a closed stdout (a script
    // that read its line and left) is no reason to stop serving.
    let mut banner = format!("payorch listening on {base_url}\n");
    if demo {
        banner.push_str(&format!(
            "checkout demo on {base_url}/checkout (pays as the demo merchant)\n"
        ));
    }
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(banner.as_bytes())
            .and_then(|()| stdout.flush());
    }
    let stopper = app.stopper();
    let server = tokio::spawn(app.run_until_stopped());
    shutdown_signal().await;
    tracing::info!(
        drain_secs = stopper.drain().as_secs(),
        "stopping: no new connections; answering the requests in progress"
    );
    stopper.stop().await;
    server.await??;
    tracing::info!("stopped: every request in progress was answered or the drain time ran out");
    Ok(())
}

/// The demo account (made now, or read back) and `credentials.json`; then the checkout demo
/// acts as its merchant. Whether the checkout demo is on.
async fn open_demo(
    app: &Application,
    path: &std::path::Path,
    previous: Option<Credentials>,
    base_url: &str,
    webhook_secret: &str,
    sandbox: Option<&SandboxHandle>,
    on_missing: OnMissingKeys,
) -> Result<bool, CommandError> {
    let mut conn = app.pool().get().await?;
    let save = |demo: &DemoAccount| {
        credentials::write(
            path,
            &Credentials {
                merchant_id: demo.merchant_id,
                api_key: demo.api_key.clone(),
                support_key: demo.support_key.clone(),
                base_url: base_url.to_string(),
                sandbox_url: sandbox.map(|s| s.base_url()),
                webhook_secret: Some(webhook_secret.to_string()),
            },
        )
    };
    let demo = credentials::demo_account(&mut conn, previous.as_ref(), on_missing, save).await?;
    match &demo {
        Some(demo) => {
            tracing::info!(file = %path.display(), "demo credentials written");
            app.open_demo_checkout(demo.api_key.as_str().into());
        }
        None => tracing::warn!(
            file = %path.display(),
            "the database already has merchants and no matching credentials file, so the \
             checkout demo is off; `payorch serve --new-demo-keys` mints fresh demo keys, \
             `payorch merchant create` makes a merchant of your own"
        ),
    }
    Ok(demo.is_some())
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            tracing::error!(error = %err, "cannot listen for SIGTERM; only Ctrl-C stops payorch");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn migrate(args: DatabaseArgs) -> Result<(), CommandError> {
    let database = open_database(&args).await?;
    let result = run_migrations(database.migration_url()?).await;
    database.shutdown().await?;
    let applied = result?;
    if applied.is_empty() {
        println!("database is up to date");
    } else {
        println!(
            "applied {} migration(s): {}",
            applied.len(),
            applied.join(", ")
        );
    }
    Ok(())
}

/// Runs `work` on a migrated database, then stops the cluster if this command started it.
async fn with_connection<T>(
    args: &DatabaseArgs,
    work: impl AsyncFnOnce(&mut PgConn) -> Result<T, CommandError>,
) -> Result<T, CommandError> {
    let database = open_database(args).await?;
    let result = async {
        run_migrations(database.migration_url()?).await?;
        let mut conn = database.connect().await?;
        work(&mut conn).await
    }
    .await;
    database.shutdown().await?;
    result
}

async fn create_merchant(args: CreateArgs) -> Result<(), CommandError> {
    let name = args.name.trim().to_string();
    let (merchant, key) = with_connection(&args.database, async |conn| {
        Ok(accounts::create_merchant(conn, &name).await?)
    })
    .await?;
    if args.json {
        println!(
            "{}",
            json!({"merchant_id": merchant.id, "name": merchant.name, "api_key": key.secret})
        );
    } else {
        println!("merchant {} ({})", merchant.id, merchant.name);
        println!("api key (shown once, keep it secret): {}", key.secret);
    }
    Ok(())
}

async fn create_support_key(args: SupportKeyArgs) -> Result<(), CommandError> {
    let SupportKeyArgs { create: args, role } = args;
    let name = args.name.trim().to_string();
    let key = with_connection(&args.database, async |conn| {
        Ok(accounts::create_support_key(conn, &name, role).await?)
    })
    .await?;
    if args.json {
        println!(
            "{}",
            json!({"key_id": key.key_id, "name": name, "role": role, "support_key": key.secret})
        );
    } else {
        println!("support key {} ({name}, role {role})", key.key_id);
        println!("secret (shown once, keep it secret): {}", key.secret);
    }
    Ok(())
}
