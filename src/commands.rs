//! What each subcommand does, start to finish.

use crate::provider_specs::{providers_from_specs, CallTimeouts};
use crate::providers::registry::Providers;
use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use payorch_sandbox::{self as sandbox, SandboxConfig, SandboxHandle};
use serde_json::json;

use crate::accounts;
use crate::app::Application;
use crate::config::{
    Cli, Command, CreateArgs, DatabaseArgs, MerchantCommand, ServeArgs, SupportKeyCommand,
};
use crate::credentials::{self, Credentials, DemoAccount, OnMissingKeys};
use crate::db::migrations::run_migrations;
use crate::db::Database;
use crate::providers::stripe::StripeProvider;
use crate::secret::Secret;
use crate::wiring::{self, Webhooks};

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
        Command::Sandbox(config) => Ok(sandbox::run_standalone(config).await?),
    }
}

async fn open_database(args: &DatabaseArgs) -> Result<Database, CommandError> {
    Ok(Database::open(args.database_url.clone(), args.data_dir.clone(), false).await?)
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
    let settings = args.app_settings();
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
    let applied = run_migrations(database.url()).await?;
    tracing::info!(applied = applied.len(), "database migrated");

    let path = credentials::path_in(&args.database.data_dir);
    let previous = credentials::read(&path);
    // Kept across restarts so a provider configured with it keeps working. Given secrets
    // are all accepted; the first is the one the in-process sandbox signs with.
    let webhook_secrets: Vec<Secret> = match args.provider.webhook_secrets.as_slice() {
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
        let providers = providers_from_specs(&args.provider.providers, timeouts, |name| {
            std::env::var(name).ok()
        })
        .map_err(CommandError)?;
        tracing::info!(providers = ?providers.names(), "using external providers");
        let app = Application::build(&settings, database.url(), providers).await?;
        let base_url = app.base_url();
        return run_server(
            app,
            &path,
            previous,
            &base_url,
            &webhook_secret,
            None,
            args.new_demo_keys,
        )
        .await;
    }
    let (provider_url, provider_secret, sandbox) = match &args.provider.provider_url {
        Some(url) => {
            let secret = args.provider.provider_secret.clone().ok_or_else(|| {
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
                .provider_secret
                .clone()
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
            args.new_demo_keys,
        )
        .await
    }
    .await;
    if let Some(sandbox) = sandbox {
        sandbox.stop().await;
    }
    result
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
    new_demo_keys: bool,
) -> Result<(), CommandError> {
    let mut conn = app.pool().get().await?;
    let on_missing = if new_demo_keys {
        OnMissingKeys::MintNew
    } else {
        OnMissingKeys::Leave
    };
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
    drop(conn);

    tracing::info!(%base_url, "payorch listening");
    // The first line of stdout: scripts wait for it. One write, and a closed stdout (a script
    // that read its line and left) is no reason to stop serving.
    let mut banner = format!("payorch listening on {base_url}\n");
    if demo.is_some() {
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
    let result = run_migrations(database.url()).await;
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
    work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, CommandError>,
) -> Result<T, CommandError> {
    let database = open_database(args).await?;
    let result = async {
        run_migrations(database.url()).await?;
        let mut conn = AsyncPgConnection::establish(database.url()).await?;
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

async fn create_support_key(args: CreateArgs) -> Result<(), CommandError> {
    let name = args.name.trim().to_string();
    let key = with_connection(&args.database, async |conn| {
        Ok(accounts::create_support_key(conn, &name).await?)
    })
    .await?;
    if args.json {
        println!(
            "{}",
            json!({"key_id": key.key_id, "name": name, "support_key": key.secret})
        );
    } else {
        println!("support key {} ({name})", key.key_id);
        println!("secret (shown once, keep it secret): {}", key.secret);
    }
    Ok(())
}
