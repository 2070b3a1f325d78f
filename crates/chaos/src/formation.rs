//! The `failover` run's database: `scripts/formation` (docs/FORMATION.md), a pg_auto_failover
//! monitor, a primary and a synchronous standby on 127.0.0.1, in the run's folder and on ports
//! of its own, so that it never meets a formation someone else runs on this machine. Every verb
//! the run calls is logged, with its time and what the script said, to `formation.log`.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio_postgres::NoTls;

/// A data node of the formation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    One,
    Two,
}

impl Node {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Node::One => "node1",
            Node::Two => "node2",
        }
    }

    pub(crate) fn other(self) -> Node {
        match self {
            Node::One => Node::Two,
            Node::Two => Node::One,
        }
    }

    fn parse(name: &str) -> Option<Node> {
        match name.trim() {
            "node1" => Some(Node::One),
            "node2" => Some(Node::Two),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub(crate) struct Formation {
    script: PathBuf,
    dir: PathBuf,
    port_base: u16,
    /// The multi-host URL `start` printed (`target_session_attrs=read-write`).
    pub(crate) url: String,
    log: PathBuf,
    /// When the run began, for the log's times.
    origin: Instant,
}

impl Formation {
    /// Creates and starts a formation in `dir` (which must not exist yet, or be one the
    /// script made) and waits until it is healthy.
    pub(crate) async fn start(
        script: &Path,
        dir: PathBuf,
        log: PathBuf,
        origin: Instant,
    ) -> Result<Formation, String> {
        if !script.exists() {
            return Err(format!(
                "no formation script at {} (--formation)",
                script.display()
            ));
        }
        let mut formation = Formation {
            script: script.to_owned(),
            dir,
            port_base: free_port_base()?,
            url: String::new(),
            log,
            origin,
        };
        eprintln!(
            "chaos: starting a formation in {} (ports {}–{})",
            formation.dir.display(),
            formation.port_base,
            formation.port_base + 2
        );
        formation.url = formation.verb(&["start"]).await?;
        if !formation.url.starts_with("postgres://") {
            return Err(format!(
                "`formation start` printed {:?}, not a URL",
                formation.url
            ));
        }
        Ok(formation)
    }

    /// Runs `scripts/formation ARGS` to its end: its stdout, trimmed, or why it failed.
    pub(crate) async fn verb(&self, args: &[&str]) -> Result<String, String> {
        let began = Instant::now();
        let out = Command::new(&self.script)
            .args(args)
            .env("PAYORCH_FORMATION_DIR", &self.dir)
            .env("PAYORCH_FORMATION_PORT_BASE", self.port_base.to_string())
            .output()
            .await
            .map_err(|e| format!("{}: {e}", self.script.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The rapid `primary` polls are logged only when they have something to say.
        if args != ["primary"] || !stderr.trim().is_empty() {
            self.note(&format!(
                "formation {} -> exit {}, {:.1} s, stdout {stdout:?}\n{stderr}",
                args.join(" "),
                out.status.code().unwrap_or(-1),
                began.elapsed().as_secs_f64(),
            ));
        }
        if out.status.success() {
            Ok(stdout)
        } else {
            let why = stderr.lines().last().unwrap_or_default();
            Err(format!("`formation {}` failed: {why}", args.join(" ")))
        }
    }

    /// A line in `formation.log`, with the run's time.
    pub(crate) fn note(&self, what: &str) {
        if let Ok(mut log) = OpenOptions::new().create(true).append(true).open(&self.log) {
            let _ = writeln!(
                log,
                "[{:8.3} s] {}",
                self.origin.elapsed().as_secs_f64(),
                what.trim_end()
            );
        }
    }

    /// Time since the run's start.
    pub(crate) fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }

    /// The node the monitor names primary now (`None`: none, or the monitor not answering).
    pub(crate) async fn primary(&self) -> Option<Node> {
        self.verb(&["primary"])
            .await
            .ok()
            .and_then(|name| Node::parse(&name))
    }

    /// `wait-primary` or `wait-healthy` for at most `secs`: the node it names.
    pub(crate) async fn wait(&self, verb: &str, secs: u64) -> Result<Node, String> {
        let name = self.verb(&[verb, &secs.to_string()]).await?;
        Node::parse(&name).ok_or_else(|| format!("`formation {verb}` printed {name:?}"))
    }

    /// A fault or `rejoin` verb for `node`.
    pub(crate) async fn on(&self, verb: &str, node: Node) -> Result<(), String> {
        self.verb(&[verb, node.name()]).await.map(drop)
    }

    /// `stop` when `keep` (the folder stays for a look), else `destroy`.
    pub(crate) async fn stop(&self, keep: bool) {
        let verb = if keep { "stop" } else { "destroy" };
        if let Err(why) = self.verb(&[verb]).await {
            eprintln!("chaos: {why}");
        }
    }

    pub(crate) fn port(&self, node: Node) -> u16 {
        match node {
            Node::One => self.port_base + 1,
            Node::Two => self.port_base + 2,
        }
    }

    /// A session on `node` itself, whatever it is now (standby, primary, or an old primary
    /// fenced off), as the role payorch uses; `application_name` `payorch-chaos`, so it is
    /// never one of payorch's sessions.
    pub(crate) async fn connect(&self, node: Node) -> Result<tokio_postgres::Client, String> {
        let (client, connection) = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port(node))
            .user("payorch")
            .dbname("payorch")
            .application_name("payorch-chaos")
            .connect_timeout(Duration::from_secs(1))
            .connect(NoTls)
            .await
            .map_err(|e| format!("{}: {e}", node.name()))?;
        tokio::spawn(connection);
        Ok(client)
    }
}

/// Three free ports in a row (monitor, node1, node2), below Linux's ephemeral range so that no
/// outgoing connection takes one meanwhile.
fn free_port_base() -> Result<u16, String> {
    for _ in 0..200 {
        let base: u16 = rand::random_range(20_000..30_000);
        let free = (base..base + 3).all(|port| TcpListener::bind(("127.0.0.1", port)).is_ok());
        if free {
            return Ok(base);
        }
    }
    Err("no three free ports in a row for the formation".into())
}
