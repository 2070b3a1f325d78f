//! The processes of a run: a private PostgreSQL cluster with real fsync (or, for the
//! `failover` run, a pg_auto_failover formation), the sandbox provider in a process of its own
//! (it must outlive every `serve` it charges for), and the `serve` replicas, which the run kills
//! with SIGKILL and starts again on the same port.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use payorch::db::cluster::{ClusterOptions, PrivateCluster};
use payorch::db::{create_database_if_missing, DATABASE_NAME};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::clients::Merchant;
use crate::formation::Formation;
use crate::strict::{self, Protocol};

/// The provider secret and webhook secret the sandbox and every replica share.
pub(crate) const PROVIDER_SECRET: &str = "sk_test_chaos";
const WEBHOOK_SECRET: &str = "whsec_chaos";
/// The master key that seals webhook-endpoint secrets: a real provider's serve needs one.
const MASTER_KEY: &str = "chaos:l8sXbUp3HnXm0o1Zq0mJ8lJH9N4R1Tq0y2m6WwGqk3E=";

/// Settings that make the reconciler finish a run in seconds rather than the production
/// defaults' minutes; each is a flag a deployment may set the same way
/// (docs/operations/configuration.md, "Configuration reference").
pub(crate) const SERVE_SETTINGS: &[&str] = &[
    "--workers",
    "2",
    "--idempotency-lease-secs",
    "4",
    "--provider-timeout-ms",
    "3000",
    "--reconciler-interval-ms",
    "200",
    "--reconcile-backoff-secs",
    "1",
    // Past it payorch searches instead of resending, which is always safe; the sandbox keeps
    // its keys for ever, so a short window only makes payorch more careful.
    "--provider-key-window-secs",
    "10",
    "--max-new-keys-per-minute",
    "1000000",
    // The run's receiver of merchant events listens on http://127.0.0.1.
    "--allow-http-webhooks",
];

/// How soon after an attempt's last possible send a list that finds nothing may fail it. A
/// strict run has deadlines of its own (`strict::SERVE_SETTINGS`).
const PROVIDER_SETTLE_SETTINGS: &[&str] = &["--provider-settle-secs", "5"];

/// Which providers a run's serves pay through.
#[derive(Debug, Clone)]
pub(crate) enum Providers {
    /// One provider, the sandbox's Stripe face (`--provider-url`).
    One,
    /// Both faces of a strict sandbox, a merchant routed to each (`--strict-providers`).
    Strict,
    /// Both faces, as two providers of one merchant's route, each approving as its mix
    /// says: these sandbox flags (`retries::sandbox_args`). The run routes the merchant.
    Mixed(Vec<String>),
    /// Both faces of a sandbox as kind as the kill run's, a merchant routed to each as in a
    /// strict run, with these flags for the sandbox and these for every `serve` (the
    /// `disputes` and `settlement` runs: the dispute rate, the settlement schedule).
    Both {
        sandbox: Vec<String>,
        serve: Vec<String>,
    },
}

impl Providers {
    fn two_faces(&self) -> bool {
        !matches!(self, Providers::One)
    }

    /// A merchant for each protocol, each routed to its own.
    fn merchant_each(&self) -> bool {
        matches!(self, Providers::Strict | Providers::Both { .. })
    }
}

/// Where the run's database lives.
enum Database {
    /// A private cluster in the run's folder.
    Private(Arc<Mutex<PrivateCluster>>),
    /// A formation of `scripts/formation` in the run's folder.
    Formation(Formation),
}

pub(crate) struct World {
    payorch: PathBuf,
    /// Logs and data folders of the run; kept when a check fails.
    pub(crate) root: PathBuf,
    database: Database,
    pub(crate) database_url: String,
    pub(crate) sandbox_url: String,
    _sandbox: Child,
    pub(crate) replicas: Vec<Replica>,
    /// The first merchant's API key: the one merchant of a run that is not strict.
    pub(crate) api_key: String,
    /// Every merchant the clients pay for, with the provider its routing names.
    pub(crate) merchants: Vec<Merchant>,
    /// Each merchant's id, in the order of `merchants` (empty in a run of one provider).
    pub(crate) merchant_ids: Vec<String>,
    /// A support key, to ask what needs a human and to route (runs of both faces only; empty
    /// otherwise).
    pub(crate) support_key: String,
    /// Both faces of the sandbox configured as named providers in each `serve`.
    two_faces: bool,
    /// `serve` flags of the run beyond every run's (`Providers::Both`).
    serve_more: Vec<String>,
    /// Highest VmHWM seen of any `serve` process, in KiB.
    peak: Arc<AtomicU64>,
    /// The pid of each running replica, by index, for the sampler.
    live: Arc<Mutex<HashMap<usize, u32>>>,
    /// The sampler, stopped with the run (a run may be one of several in a process).
    sampler: Option<tokio::task::JoinHandle<()>>,
}

pub(crate) struct Replica {
    pub(crate) url: String,
    port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl World {
    /// Starts the cluster, migrates, makes the merchant, starts the sandbox (its webhooks
    /// reach the replicas in turn, as through a load balancer) and `replicas` copies of
    /// `serve`, paying through `providers`.
    pub(crate) async fn start(
        payorch: &Path,
        replicas: usize,
        providers: &Providers,
    ) -> Result<World, String> {
        let root = run_folder()?;
        let options = ClusterOptions {
            data_dir: root.join("db"),
            ephemeral: false,
        };
        let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&options))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the private cluster: {e}"))?;
        let cluster = Arc::new(Mutex::new(cluster));
        let started = World::start_on(
            payorch,
            root,
            Database::Private(cluster.clone()),
            replicas,
            providers,
        )
        .await;
        if started.is_err() {
            // The processes went with their handles; the cluster is not stopped on drop.
            let _ = tokio::task::spawn_blocking(move || lock(&cluster).stop()).await;
        }
        started
    }

    /// As [`World::start`], on a formation of `script` (`scripts/formation`) made in the run's
    /// folder; `origin` is the run's start, for the formation's log.
    pub(crate) async fn start_on_formation(
        payorch: &Path,
        script: &Path,
        replicas: usize,
        origin: Instant,
    ) -> Result<World, String> {
        let root = run_folder()?;
        let formation = Formation::start(
            script,
            root.join("formation"),
            root.join("formation.log"),
            origin,
        )
        .await;
        let formation = match formation {
            Ok(formation) => formation,
            Err(why) => {
                eprintln!("chaos: run folder {} kept", root.display());
                return Err(format!("the formation: {why}"));
            }
        };
        World::start_on(
            payorch,
            root,
            Database::Formation(formation),
            replicas,
            &Providers::One,
        )
        .await
    }

    async fn start_on(
        payorch: &Path,
        root: PathBuf,
        database: Database,
        replicas: usize,
        providers: &Providers,
    ) -> Result<World, String> {
        let database_url = match &database {
            Database::Private(cluster) => {
                let (maintenance_url, database_url) = {
                    let cluster = lock(cluster);
                    (
                        cluster.database_url("postgres"),
                        cluster.database_url(DATABASE_NAME),
                    )
                };
                create_database_if_missing(&maintenance_url, DATABASE_NAME)
                    .await
                    .map_err(|e| format!("the database: {e}"))?;
                database_url
            }
            // The formation made its database and role.
            Database::Formation(formation) => formation.url.clone(),
        };
        let started =
            World::start_processes(payorch, root, database, database_url, replicas, providers)
                .await;
        match started {
            Ok(world) => Ok(world),
            Err((why, Database::Formation(formation))) => {
                // Kept for a look, as a run that fails keeps its folder.
                formation.stop(true).await;
                Err(why)
            }
            Err((why, Database::Private(_))) => Err(why),
        }
    }

    /// Migrates, makes the merchant, starts the sandbox and the replicas; on failure hands the
    /// database back to be stopped.
    async fn start_processes(
        payorch: &Path,
        root: PathBuf,
        database: Database,
        database_url: String,
        replicas: usize,
        providers: &Providers,
    ) -> Result<World, (String, Database)> {
        let made = World::migrate_and_merchants(payorch, &database_url, providers).await;
        let (merchants, support_key) = match made {
            Ok(made) => made,
            Err(why) => return Err((why, database)),
        };
        let replicas: Vec<Replica> = match (0..replicas)
            .map(|n| {
                let port = free_port()?;
                Ok(Replica {
                    url: format!("http://127.0.0.1:{port}"),
                    port,
                    data_dir: root.join(format!("replica-{n}")),
                    log: root.join(format!("replica-{n}.log")),
                    child: None,
                })
            })
            .collect::<Result<_, String>>()
        {
            Ok(replicas) => replicas,
            Err(why) => return Err((why, database)),
        };
        let webhook_urls: Vec<String> = replicas
            .iter()
            .map(|replica| format!("{}/v1/webhooks/stripe", replica.url))
            .collect();
        let notification_urls: Vec<String> = replicas
            .iter()
            .map(|replica| format!("{}/v1/webhooks/adyen", replica.url))
            .collect();
        let strict_args = match providers {
            Providers::One => Vec::new(),
            Providers::Strict => strict::sandbox_args(&notification_urls.join(",")),
            Providers::Mixed(more) | Providers::Both { sandbox: more, .. } => {
                let mut args = strict::adyen_notification_args(&notification_urls.join(","));
                args.extend(more.iter().cloned());
                args
            }
        };
        let sandbox = start_sandbox(
            payorch,
            &webhook_urls.join(","),
            &strict_args,
            &root.join("sandbox.log"),
        )
        .await;
        let (sandbox, sandbox_url) = match sandbox {
            Ok(started) => started,
            Err(why) => return Err((why, database)),
        };
        let mut world = World {
            payorch: payorch.to_owned(),
            root,
            database,
            database_url,
            sandbox_url,
            _sandbox: sandbox,
            replicas,
            api_key: merchants[0].1.api_key.clone(),
            merchants: merchants.iter().map(|(_, m)| m.clone()).collect(),
            merchant_ids: merchants.iter().map(|(id, _)| id.clone()).collect(),
            support_key,
            two_faces: providers.two_faces(),
            serve_more: match providers {
                Providers::Both { serve, .. } => serve.clone(),
                _ => Vec::new(),
            },
            peak: Arc::default(),
            live: Arc::default(),
            sampler: None,
        };
        for n in 0..world.replicas.len() {
            if let Err(why) = world.start_replica(n).await {
                // The replicas go with their handles.
                return Err((why, world.database));
            }
        }
        world.watch_memory();
        if providers.merchant_each() {
            if let Err(why) = world.route(&merchants).await {
                return Err((why, world.database));
            }
        }
        Ok(world)
    }

    /// `payorch migrate`, then `payorch merchant create`: each merchant's id and API key
    /// (one, or in a strict run one for each protocol), with a support key to route them
    /// when both faces are providers.
    async fn migrate_and_merchants(
        payorch: &Path,
        database_url: &str,
        providers: &Providers,
    ) -> Result<(Vec<(String, Merchant)>, String), String> {
        run(payorch, &["migrate", "--database-url", database_url]).await?;
        let made = |what: &'static str, name: String, more: &'static [&'static str]| async move {
            let mut args = vec![
                what,
                "create",
                "--name",
                &name,
                "--json",
                "--database-url",
                database_url,
            ];
            args.extend_from_slice(more);
            let printed = run(payorch, &args).await?;
            serde_json::from_str::<serde_json::Value>(&printed)
                .map_err(|_| format!("`{what} create` printed {printed}"))
        };
        // One merchant, unless a strict run: one for each protocol.
        let protocols: &[Protocol] = if providers.merchant_each() {
            &strict::MERCHANTS
        } else {
            &[Protocol::Stripe]
        };
        let mut merchants = Vec::new();
        for &protocol in protocols {
            let name = if providers.merchant_each() {
                format!("chaos-{}", protocol.name())
            } else {
                "chaos".into()
            };
            let merchant = made("merchant", name, &[]).await?;
            let (Some(id), Some(api_key)) = (
                merchant["merchant_id"].as_str(),
                merchant["api_key"].as_str(),
            ) else {
                return Err(format!("`merchant create` printed {merchant}"));
            };
            merchants.push((
                id.to_owned(),
                Merchant {
                    api_key: api_key.to_owned(),
                    protocol,
                },
            ));
        }
        if !providers.two_faces() {
            return Ok((merchants, String::new()));
        }
        // It changes routing: a support write, which needs the operate role.
        let support = made("support-key", "chaos".into(), &["--role", "operate"]).await?;
        let support_key = support["support_key"]
            .as_str()
            .ok_or_else(|| format!("`support-key create` printed no support_key: {support}"))?;
        Ok((merchants, support_key.to_owned()))
    }

    /// Routes each merchant to its protocol's provider alone (support's `PUT …/routing`), so
    /// no payment of one goes to the other by failover; then waits out the second for which a
    /// replica may keep a merchant's routing.
    async fn route(&self, merchants: &[(String, Merchant)]) -> Result<(), String> {
        for (id, merchant) in merchants {
            let routing = serde_json::json!({ "providers": [merchant.protocol.name()] });
            self.put_routing(id, &routing).await?;
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
        Ok(())
    }

    /// Puts merchant `id`'s routing document (support's `PUT …/routing`); what payorch
    /// answered. The caller waits out the second a replica may keep the old one.
    pub(crate) async fn put_routing(
        &self,
        id: &str,
        routing: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let response = reqwest::Client::new()
            .put(format!(
                "{}/v1/merchants/{id}/routing",
                self.replicas[0].url
            ))
            .bearer_auth(&self.support_key)
            .json(routing)
            .send()
            .await
            .map_err(|e| format!("routing {id}: {e}"))?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(format!("routing {id} as {routing}: {status} {body}"));
        }
        serde_json::from_str(&body).map_err(|_| format!("routing {id}: {status} {body}"))
    }

    /// The formation, in a `failover` run.
    pub(crate) fn formation(&self) -> Option<&Formation> {
        match &self.database {
            Database::Formation(formation) => Some(formation),
            Database::Private(_) => None,
        }
    }

    /// Starts replica `n` (again) on its port and waits until it is ready.
    pub(crate) async fn start_replica(&mut self, n: usize) -> Result<(), String> {
        let replica = &mut self.replicas[n];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&replica.log)
            .map_err(|e| format!("{}: {e}", replica.log.display()))?;
        let child = Command::new(&self.payorch)
            .args(serve_args(
                self.two_faces,
                replica.port,
                &replica.data_dir,
                &self.database_url,
                &self.sandbox_url,
            ))
            .args(&self.serve_more)
            .envs(serve_env(self.two_faces))
            .stdout(Stdio::from(log.try_clone().map_err(|e| e.to_string())?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("start {}: {e}", self.payorch.display()))?;
        if let Some(pid) = child.id() {
            lock(&self.live).insert(n, pid);
        }
        replica.child = Some(child);
        wait_ready(&replica.url).await
    }

    /// SIGKILL for replica `n`: no shutdown, no flush, requests cut mid-flight.
    pub(crate) async fn kill_replica(&mut self, n: usize) {
        lock(&self.live).remove(&n);
        if let Some(mut child) = self.replicas[n].child.take() {
            if let Some(pid) = child.id() {
                note_peak(&self.peak, pid);
            }
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    pub(crate) fn is_running(&self, n: usize) -> bool {
        self.replicas[n].child.is_some()
    }

    /// Stops PostgreSQL (fast shutdown: every session ended), waits `down`, starts it again.
    pub(crate) async fn restart_database(&self, down: Duration) -> Result<(), String> {
        let Database::Private(cluster) = &self.database else {
            return Err("a formation is restarted by its own verbs".into());
        };
        let stopping = cluster.clone();
        tokio::task::spawn_blocking(move || lock(&stopping).stop())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("stopping PostgreSQL: {e}"))?;
        tokio::time::sleep(down).await;
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || lock(&cluster).restart())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("starting PostgreSQL again: {e}"))
    }

    /// The highest peak RSS of any `serve` process of the run, in MiB.
    pub(crate) fn peak_rss_mib(&self) -> f64 {
        for replica in &self.replicas {
            if let Some(pid) = replica.child.as_ref().and_then(Child::id) {
                note_peak(&self.peak, pid);
            }
        }
        self.peak.load(Ordering::Relaxed) as f64 / 1024.0
    }

    /// Stops every process; the database last (a formation is destroyed unless `keep`). The
    /// run's folder is removed unless `keep`.
    pub(crate) async fn stop(mut self, keep: bool) {
        if let Some(sampler) = self.sampler.take() {
            sampler.abort();
        }
        for n in 0..self.replicas.len() {
            self.kill_replica(n).await;
        }
        match &self.database {
            Database::Private(cluster) => {
                let stopping = cluster.clone();
                let _ = tokio::task::spawn_blocking(move || lock(&stopping).stop()).await;
                if !keep {
                    // The cluster lives in the run's folder unless its socket path would be
                    // too long there; then it is in the temp dir, and goes too.
                    let cluster_root = lock(cluster).root().to_owned();
                    let _ = std::fs::remove_dir_all(&cluster_root);
                }
            }
            Database::Formation(formation) => formation.stop(keep).await,
        }
        if !keep {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    /// A sampler that keeps the peak RSS of every live replica, also of those killed later.
    fn watch_memory(&mut self) {
        let peak = self.peak.clone();
        let live = self.live.clone();
        self.sampler = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let pids: Vec<u32> = lock(&live).values().copied().collect();
                for pid in pids {
                    note_peak(&peak, pid);
                }
            }
        }));
    }
}

/// A new folder for the run's logs and data.
fn run_folder() -> Result<PathBuf, String> {
    // Runs one after the other in one process (tests/chaos.rs) each get a folder of their
    // own, also when one fails fast and keeps its folder.
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let root = std::env::temp_dir().join(format!(
        "payorch-chaos-{}-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed),
        chrono::Utc::now().format("%H%M%S")
    ));
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    Ok(root)
}

fn note_peak(peak: &AtomicU64, pid: u32) {
    if let Some(kib) = peak_rss_kib(pid) {
        peak.fetch_max(kib, Ordering::Relaxed);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs a `payorch` command to its end and returns what it printed.
async fn run(payorch: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(payorch)
        .args(args)
        .output()
        .await
        .map_err(|e| format!("{}: {e}", payorch.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`payorch {}` failed: {}",
            args[..2.min(args.len())].join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `payorch serve`'s arguments for a replica on `port`; `two_faces`: both faces of the
/// sandbox as named providers, and the strict run's deadlines (through Adyen, which has no
/// lookups, an unknown outcome ends by a technical cancel).
fn serve_args(
    two_faces: bool,
    port: u16,
    data_dir: &Path,
    database_url: &str,
    sandbox_url: &str,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--bind".into(),
        format!("127.0.0.1:{port}"),
        "--data-dir".into(),
        data_dir.to_string_lossy().into_owned(),
        "--database-url".into(),
        database_url.into(),
    ];
    args.extend(SERVE_SETTINGS.iter().map(|s| s.to_string()));
    if two_faces {
        args.extend(strict::provider_args(sandbox_url));
        args.extend(strict::SERVE_SETTINGS.iter().map(|s| s.to_string()));
    } else {
        args.extend(
            [
                "--provider-url",
                sandbox_url,
                "--provider-secret",
                PROVIDER_SECRET,
                "--webhook-secret",
                WEBHOOK_SECRET,
            ]
            .map(str::to_owned),
        );
        args.extend(PROVIDER_SETTLE_SETTINGS.iter().map(|s| s.to_string()));
    }
    args
}

/// The environment of `serve`: its master key, and named providers take their secrets from
/// it only.
fn serve_env(two_faces: bool) -> Vec<(&'static str, &'static str)> {
    let master_key = ("PAYORCH_MASTER_KEY", MASTER_KEY);
    if !two_faces {
        return vec![master_key];
    }
    vec![
        master_key,
        ("PAYORCH_PROVIDER_STRIPE_SECRET", PROVIDER_SECRET),
        ("PAYORCH_PROVIDER_STRIPE_WEBHOOK_SECRET", WEBHOOK_SECRET),
        ("PAYORCH_PROVIDER_ADYEN_SECRET", PROVIDER_SECRET),
        ("PAYORCH_PROVIDER_ADYEN_HMAC_KEY", strict::ADYEN_HMAC_KEY),
        (
            "PAYORCH_PROVIDER_ADYEN_MERCHANT_ACCOUNT",
            strict::ADYEN_MERCHANT_ACCOUNT,
        ),
    ]
}

/// `payorch sandbox`'s arguments: its webhooks to `webhook_urls` (comma-separated) in turn,
/// duplicated now and then and out of order, and `more` (a strict run's).
fn sandbox_args(webhook_urls: &str, more: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "sandbox",
        "--bind",
        "127.0.0.1:0",
        "--secret",
        PROVIDER_SECRET,
        "--webhook-url",
        webhook_urls,
        "--webhook-secret",
        WEBHOOK_SECRET,
        "--slow-ms",
        "1500",
        "--processing-ms",
        "1000",
        "--webhook-duplicate-rate",
        "0.1",
        "--webhook-reorder",
        "--webhook-max-attempts",
        "20",
        "--webhook-retry-ms",
        "300",
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(more.iter().cloned());
    args
}

/// `payorch sandbox` on a port of its own; its first line says where it listens. Its webhooks
/// go to `webhook_urls` (comma-separated) in turn, are duplicated now and then and may arrive
/// out of order.
async fn start_sandbox(
    payorch: &Path,
    webhook_urls: &str,
    more: &[String],
    log: &Path,
) -> Result<(Child, String), String> {
    let mut child = Command::new(payorch)
        .args(sandbox_args(webhook_urls, more))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            File::create(log).map_err(|e| format!("{}: {e}", log.display()))?,
        ))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("start the sandbox: {e}"))?;
    let stdout = child.stdout.take().ok_or("the sandbox has no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .map_err(|_| "the sandbox never said where it listens".to_owned())?
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let url = first.rsplit(' ').next().unwrap_or_default().to_owned();
    if !url.starts_with("http://") {
        return Err(format!("the sandbox said {first:?}"));
    }
    // Keep reading, so a full pipe never stops the sandbox.
    let mut rest = tokio::fs::File::create(log.with_extension("out"))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = rest.write_all(format!("{line}\n").as_bytes()).await;
        }
    });
    Ok((child, url))
}

async fn wait_ready(url: &str) -> Result<(), String> {
    let client = reqwest::Client::new();
    for _ in 0..300 {
        let ready = client
            .get(format!("{url}/health/ready"))
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("{url} never became ready"))
}

/// A port nobody listens on now; the replica binds it a moment later.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// `VmHWM` (peak resident set) of `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use payorch::config::{Cli, Command, ServeArgs};
    use payorch_sandbox::SandboxConfig;

    use super::*;

    /// `payorch`'s own command line takes `args` (after the program's name).
    fn parsed(args: &[String]) -> Command {
        let words = std::iter::once("payorch".to_owned()).chain(args.iter().cloned());
        match Cli::try_parse_from(words) {
            Ok(cli) => cli.command,
            Err(why) => panic!("{args:?}: {why}"),
        }
    }

    fn serve(strict: bool) -> ServeArgs {
        let args = serve_args(
            strict,
            9,
            Path::new("replica-0"),
            "postgres://127.0.0.1/payorch",
            "http://127.0.0.1:7",
        );
        match parsed(&args) {
            Command::Serve(serve) => *serve,
            other => panic!("{other:?}"),
        }
    }

    fn sandbox(more: &[String]) -> SandboxConfig {
        match parsed(&sandbox_args("http://127.0.0.1:9/v1/webhooks/stripe", more)) {
            Command::Sandbox(config) => *config,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn serve_takes_the_settings_of_a_strict_run_and_of_the_others() {
        let strict = serve(true);
        let named: Vec<&str> = strict
            .provider
            .providers
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(named, ["stripe", "adyen"]);
        assert_eq!(strict.provider.provider_url, None);
        assert_eq!(strict.reconciler.technical_cancel_after_secs, 10);
        assert_eq!(strict.reconciler.provider_settle_secs, 5);
        assert_eq!(strict.reconciler.unresolved_alert_secs, 60);
        let kind = serve(false);
        assert!(kind.provider.providers.is_empty());
        assert_eq!(
            kind.provider.provider_url.as_deref(),
            Some("http://127.0.0.1:7")
        );
        assert_eq!(kind.reconciler.provider_settle_secs, 5);
        // Every named provider's secrets are in the environment a strict serve gets.
        let env: Vec<&str> = serve_env(true).iter().map(|(k, _)| *k).collect();
        // A serve with a real provider refuses to start without a master key.
        for strict in [true, false] {
            assert!(serve_env(strict)
                .iter()
                .any(|(k, _)| *k == "PAYORCH_MASTER_KEY"));
        }
        for spec in &strict.provider.providers {
            let needed: &[&str] = match spec.name.as_str() {
                "adyen" => &["SECRET", "HMAC_KEY", "MERCHANT_ACCOUNT"],
                _ => &["SECRET", "WEBHOOK_SECRET"],
            };
            for what in needed {
                assert!(env.contains(&spec.variable(what).as_str()), "{what}");
            }
        }
    }

    #[test]
    fn the_sandbox_takes_a_strict_runs_flags() {
        let strict = sandbox(&strict::sandbox_args(
            "http://127.0.0.1:9/v1/webhooks/adyen",
        ));
        assert_eq!(strict.search_lag_secs, strict::SEARCH_LAG_SECS);
        assert_eq!(strict.null_rate.to_string(), strict::NULL_RATE);
        assert_eq!(
            strict.adyen_notification_url.as_deref(),
            Some("http://127.0.0.1:9/v1/webhooks/adyen")
        );
        // The faults of every run stay.
        assert!(strict.webhook_reorder);
        assert_eq!(strict.webhook_duplicate_rate, 0.1);
        let kind = sandbox(&[]);
        assert_eq!(kind.null_rate, 0.0);
        assert_eq!(kind.adyen_notification_url, None);
    }
}
