//! Which server is the primary, when `DATABASE_URL` lists several hosts (libpq's form:
//! `postgres://payorch@db1:5432,db2:5432/payorch?target_session_attrs=read-write`).
//!
//! libpq's own rule, the first listed host that accepts writes, is not enough after a
//! failover: an old primary that comes back without the keeper that would demote it is
//! writable too, on its old port, and every commit there waits for ever on a synchronous
//! standby that now follows someone else. So a watch asks every host twice a second whether
//! it is in recovery and which timeline it writes on. The primary is the writable host on the
//! newest timeline: a promotion always starts a new timeline, so a writable server on an
//! older one has been superseded, and is fenced off (docs/DESIGN.md, "Database failover").
//!
//! - The pool opens connections only to the chosen host, and none while there is no
//!   primary: requests are answered `503` at once instead of waiting on a dead address.
//! - A pooled connection opened before the primary changed is dropped instead of reused.
//! - On a fenced host the watch ends payorch's sessions, so requests stuck there fail now.
//! - On every writable host it ends payorch's commits that have waited on synchronous
//!   replication for longer than [`PrimaryWatch::sync_wait_limit`]. PostgreSQL reports a
//!   commit whose wait is *canceled* (by `statement_timeout`, say) as a success with a warning,
//!   although no standby has it; a *terminated* session reports nothing, so the request fails
//!   and its client retries with its key, as after any lost connection. The limit is kept
//!   below the pool's `statement_timeout` so that the timeout never gets there first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::ConnectionError;
use tokio::sync::watch;
use tokio_postgres::config::{Host, TargetSessionAttrs};
use tokio_postgres::{Client, Config};

use super::conn::{PgConn, Statements};
use super::url::DatabaseUrl;

/// How often every host is asked.
const PROBE_EVERY: Duration = Duration::from_millis(500);
/// How long one host may take to answer before it counts as unreachable this round.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The `application_name` of the pool's sessions, which the watch may end.
pub const POOL_APPLICATION_NAME: &str = "payorch";
const WATCH_APPLICATION_NAME: &str = "payorch-primary-watch";

/// The hosts of a `DATABASE_URL`, and everything else it says, for one connection at a time.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// The whole URL: its settings for each host, and the TLS every connection uses.
    url: DatabaseUrl,
    hosts: Vec<(Host, u16)>,
}

impl Hosts {
    /// Parses a libpq URL or key/value string; `None` when it names one host only (then the
    /// driver connects as it is told, and there is nothing to watch).
    pub fn parse(database_url: &str) -> Result<Option<Hosts>, String> {
        Hosts::of(&DatabaseUrl::parse(database_url)?)
    }

    /// The hosts of a URL already parsed; `None` when it names one host only.
    pub fn of(url: &DatabaseUrl) -> Result<Option<Hosts>, String> {
        let base = url.config();
        let names = base.get_hosts();
        if names.len() < 2 {
            return Ok(None);
        }
        if !base.get_hostaddrs().is_empty() {
            return Err("hostaddr cannot be combined with several hosts; list them in host".into());
        }
        let ports = base.get_ports();
        let port = |i: usize| match ports.len() {
            0 => Ok(5432),
            1 => Ok(ports[0]),
            n if n == names.len() => Ok(ports[i]),
            n => Err(format!(
                "{n} ports for {} hosts: give one port, or one per host",
                names.len()
            )),
        };
        let hosts = (0..names.len())
            .map(|i| Ok((names[i].clone(), port(i)?)))
            .collect::<Result<_, String>>()?;
        Ok(Some(Hosts {
            url: url.clone(),
            hosts,
        }))
    }

    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// `host:port` (or the socket folder) of host `i`, for logs and errors.
    pub fn describe(&self, i: usize) -> String {
        let (host, port) = &self.hosts[i];
        match host {
            Host::Tcp(name) => format!("{name}:{port}"),
            Host::Unix(path) => format!("{}:{port}", path.display()),
        }
    }

    /// The URL's settings with host `i` alone, insisting on a writable session as the URL's
    /// `target_session_attrs=read-write` does (a host demoted since the last look is refused).
    fn config_for(&self, i: usize, application_name: &str) -> Config {
        let base = self.url.config();
        let mut config = Config::new();
        if let Some(user) = base.get_user() {
            config.user(user);
        }
        if let Some(password) = base.get_password() {
            config.password(password);
        }
        if let Some(dbname) = base.get_dbname() {
            config.dbname(dbname);
        }
        if let Some(options) = base.get_options() {
            config.options(options);
        }
        if let Some(timeout) = base.get_connect_timeout() {
            config.connect_timeout(*timeout);
        }
        config
            .application_name(application_name)
            .keepalives(base.get_keepalives())
            .keepalives_idle(base.get_keepalives_idle())
            .ssl_mode(base.get_ssl_mode())
            .ssl_negotiation(base.get_ssl_negotiation())
            .target_session_attrs(TargetSessionAttrs::ReadWrite);
        let (host, port) = &self.hosts[i];
        match host {
            Host::Tcp(name) => config.host(name),
            Host::Unix(path) => config.host_path(path),
        };
        config.port(*port);
        config
    }

    /// A connection for the pool to host `i`.
    async fn connect(&self, i: usize, statements: Statements) -> Result<PgConn, ConnectionError> {
        PgConn::open(
            &self.url,
            &self.config_for(i, POOL_APPLICATION_NAME),
            statements,
        )
        .await
        .map_err(|err| ConnectionError::BadConnection(format!("{}: {err}", self.describe(i))))
    }
}

/// What one host said this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Unreachable,
    Standby,
    /// Accepts writes, on this timeline.
    Writable {
        timeline: u32,
    },
}

/// The writable host on the newest timeline; on a tie (which one formation never shows), the
/// first listed, as libpq would choose.
pub fn choose(probes: &[Probe]) -> Option<usize> {
    probes
        .iter()
        .enumerate()
        .filter_map(|(i, probe)| match probe {
            Probe::Writable { timeline } => Some((*timeline, std::cmp::Reverse(i))),
            _ => None,
        })
        .max()
        .map(|(_, std::cmp::Reverse(i))| i)
}

/// The primary as last seen, and since when: connections opened before `since` were opened
/// to somebody else (or to a server that has restarted since).
#[derive(Debug, Clone, Copy)]
struct Seen {
    primary: Option<usize>,
    since: Instant,
}

/// The watch over a multi-host `DATABASE_URL`; cheap to clone. Its task ends when the last
/// clone (the pool's) is dropped.
#[derive(Debug, Clone)]
pub struct PrimaryWatch {
    hosts: Arc<Hosts>,
    /// `None` until the first round has asked every host.
    seen: watch::Receiver<Option<Seen>>,
}

impl PrimaryWatch {
    /// Starts watching; `sync_wait_limit` is how long a commit may wait on synchronous
    /// replication before its session is ended (see the module's comment). Needs a Tokio
    /// runtime.
    pub fn start(hosts: Hosts, sync_wait_limit: Duration) -> PrimaryWatch {
        let hosts = Arc::new(hosts);
        let (tell, seen) = watch::channel(None);
        tokio::spawn(watch_hosts(Arc::clone(&hosts), tell, sync_wait_limit));
        PrimaryWatch { hosts, seen }
    }

    /// How long a commit may wait on a synchronous standby: a third of the statement timeout,
    /// at most three seconds (a healthy standby answers in milliseconds).
    pub fn sync_wait_limit(statement_timeout: Duration) -> Duration {
        (statement_timeout / 3).min(Duration::from_secs(3))
    }

    /// A connection to the primary; an error at once while there is none, so the request is
    /// answered `503` rather than left waiting. Waits for the first round at most `patience`.
    pub async fn connect(
        &self,
        patience: Duration,
        statements: Statements,
    ) -> Result<PgConn, ConnectionError> {
        let mut seen = self.seen.clone();
        let first = tokio::time::timeout(patience, async {
            seen.wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|seen| *seen)
        })
        .await;
        match first.ok().flatten().and_then(|s| s.primary) {
            Some(i) => self.hosts.connect(i, statements).await,
            None => Err(ConnectionError::BadConnection(format!(
                "no primary among {}: none accepts writes (a failover may be under way)",
                (0..self.hosts.len())
                    .map(|i| self.hosts.describe(i))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Whether a connection opened at `opened` still goes to the primary as now seen.
    pub fn is_current(&self, opened: Instant) -> bool {
        match *self.seen.borrow() {
            Some(seen) => seen.primary.is_some() && opened >= seen.since,
            None => true,
        }
    }
}

/// Asks every host each round, picks the primary, fences the others and ends stalled commits.
async fn watch_hosts(
    hosts: Arc<Hosts>,
    tell: watch::Sender<Option<Seen>>,
    sync_wait_limit: Duration,
) {
    let mut sessions: Vec<Option<Client>> = (0..hosts.len()).map(|_| None).collect();
    let mut ticks = tokio::time::interval(PROBE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !tell.is_closed() {
        ticks.tick().await;
        let probes = futures_util::future::join_all(
            sessions
                .iter_mut()
                .enumerate()
                .map(|(i, session)| probe(&hosts, i, session)),
        )
        .await;
        let primary = choose(&probes);
        let previous = *tell.borrow();
        if previous.map(|s| s.primary) != Some(primary) {
            match primary {
                Some(i) => {
                    tracing::warn!(primary = %hosts.describe(i), ?probes, "database primary chosen")
                }
                None => tracing::warn!(
                    ?probes,
                    "no database primary: every host is down or in recovery"
                ),
            }
            tell.send_replace(Some(Seen {
                primary,
                since: Instant::now(),
            }));
        }
        for (i, probe) in probes.iter().enumerate() {
            let Probe::Writable { timeline } = probe else {
                continue;
            };
            let Some(client) = &sessions[i] else {
                continue;
            };
            if Some(i) != primary {
                let ended = end_sessions(client, &fence()).await;
                if ended > 0 {
                    tracing::warn!(host = %hosts.describe(i), timeline, ended, "fenced an old primary: ended payorch's sessions there");
                }
            }
            let ended = end_sessions(client, &stalled_commits(sync_wait_limit)).await;
            if ended > 0 {
                tracing::warn!(host = %hosts.describe(i), ended, "ended commits stalled on synchronous replication; their requests fail and are retried");
            }
        }
    }
}

/// One host's answer this round, (re)opening its watch session when needed.
async fn probe(hosts: &Hosts, i: usize, session: &mut Option<Client>) -> Probe {
    let asked = tokio::time::timeout(PROBE_TIMEOUT, async {
        if session.as_ref().is_none_or(Client::is_closed) {
            *session = None;
            let mut config = hosts.config_for(i, WATCH_APPLICATION_NAME);
            // A standby must answer too: it is not the primary, but it is not gone either.
            config
                .target_session_attrs(TargetSessionAttrs::Any)
                .connect_timeout(PROBE_TIMEOUT);
            let (client, connection) = hosts.url.connect_client(&config).await?;
            tokio::spawn(connection);
            *session = Some(client);
        }
        let client = session.as_ref().expect("opened above");
        let row = client.query_typed_one(PROBE, &[]).await?;
        Ok::<_, tokio_postgres::Error>(match row.get::<_, Option<i32>>(0) {
            None => Probe::Standby,
            Some(timeline) => Probe::Writable {
                timeline: timeline as u32,
            },
        })
    })
    .await;
    match asked {
        Ok(Ok(probe)) => probe,
        Ok(Err(_)) | Err(_) => {
            // Opened afresh next round: a session that timed out may be stuck mid-query.
            *session = None;
            Probe::Unreachable
        }
    }
}

/// `NULL` in recovery; otherwise the timeline of the WAL being written, the first eight hex
/// digits of its file name (`pg_control_checkpoint()` would lag until the next checkpoint).
const PROBE: &str = "SELECT CASE WHEN pg_is_in_recovery() THEN NULL \
     ELSE ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::int END";

/// Every session of payorch's pools on a fenced host: whatever they do there is lost.
fn fence() -> String {
    format!(
        "SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity \
         WHERE application_name = '{POOL_APPLICATION_NAME}' AND pid <> pg_backend_pid()"
    )
}

/// payorch's sessions whose commit has waited on a synchronous standby longer than `limit`.
fn stalled_commits(limit: Duration) -> String {
    format!(
        "SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity \
         WHERE application_name = '{POOL_APPLICATION_NAME}' AND wait_event = 'SyncRep' \
         AND clock_timestamp() - query_start > interval '{} milliseconds'",
        limit.as_millis()
    )
}

/// Runs one of the statements above; a failure is only logged, the next round tries again.
async fn end_sessions(client: &Client, statement: &str) -> i32 {
    match tokio::time::timeout(PROBE_TIMEOUT, client.query_typed_one(statement, &[])).await {
        Ok(Ok(row)) => row.get(0),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "could not end payorch sessions");
            0
        }
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_one_host_has_nothing_to_watch() {
        for url in [
            "postgres://payorch@db1:5432/payorch",
            "host=/run/postgresql user=payorch dbname=payorch",
            "postgres://payorch@localhost/payorch?target_session_attrs=read-write",
        ] {
            assert!(Hosts::parse(url).unwrap().is_none(), "{url}");
        }
    }

    #[test]
    fn several_hosts_keep_their_order_and_ports() {
        let hosts = Hosts::parse(
            "postgres://payorch:secret@10.0.0.1:5433,10.0.0.2:5434/payorch?target_session_attrs=read-write&connect_timeout=2",
        )
        .unwrap()
        .unwrap();
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts.describe(0), "10.0.0.1:5433");
        assert_eq!(hosts.describe(1), "10.0.0.2:5434");
        let one = hosts.config_for(1, POOL_APPLICATION_NAME);
        assert_eq!(one.get_hosts(), &[Host::Tcp("10.0.0.2".into())]);
        assert_eq!(one.get_ports(), &[5434]);
        assert_eq!(one.get_user(), Some("payorch"));
        assert_eq!(one.get_password(), Some(&b"secret"[..]));
        assert_eq!(one.get_dbname(), Some("payorch"));
        assert_eq!(one.get_connect_timeout(), Some(&Duration::from_secs(2)));
        assert_eq!(one.get_application_name(), Some("payorch"));
        assert_eq!(
            one.get_target_session_attrs(),
            TargetSessionAttrs::ReadWrite
        );
    }

    #[test]
    fn one_port_serves_every_host_and_none_means_5432() {
        let one = Hosts::parse("host=a,b,c port=6000 user=x dbname=y")
            .unwrap()
            .unwrap();
        assert_eq!(
            (0..3).map(|i| one.describe(i)).collect::<Vec<_>>(),
            ["a:6000", "b:6000", "c:6000"]
        );
        let none = Hosts::parse("postgres://x@a,b/y").unwrap().unwrap();
        assert_eq!(none.describe(1), "b:5432");
        let sockets = Hosts::parse("host=/run/a,/run/b port=5432,5433 user=x")
            .unwrap()
            .unwrap();
        assert_eq!(sockets.describe(1), "/run/b:5433");
    }

    #[test]
    fn mismatched_ports_and_hostaddr_are_refused_with_a_reason() {
        let ports = Hosts::parse("host=a,b,c port=1,2 user=x").unwrap_err();
        assert!(ports.contains("2 ports for 3 hosts"), "{ports}");
        let hostaddr = Hosts::parse("host=a,b hostaddr=10.0.0.1,10.0.0.2 user=x").unwrap_err();
        assert!(hostaddr.contains("hostaddr"), "{hostaddr}");
        assert!(Hosts::parse("postgres://x@a,b:notaport/y").is_err());
    }

    #[test]
    fn the_primary_is_the_writable_host_on_the_newest_timeline() {
        use Probe::*;
        assert_eq!(choose(&[Writable { timeline: 1 }, Standby]), Some(0));
        assert_eq!(choose(&[Unreachable, Writable { timeline: 2 }]), Some(1));
        // An old primary back without its keeper, listed first, still on the timeline the
        // promotion left: fenced.
        assert_eq!(
            choose(&[Writable { timeline: 1 }, Writable { timeline: 2 }]),
            Some(1)
        );
        assert_eq!(
            choose(&[Writable { timeline: 3 }, Writable { timeline: 2 }, Standby]),
            Some(0)
        );
        assert_eq!(choose(&[Unreachable, Standby]), None);
        assert_eq!(choose(&[]), None);
        assert_eq!(
            choose(&[Writable { timeline: 2 }, Writable { timeline: 2 }]),
            Some(0),
            "a tie goes to the first listed, as libpq would"
        );
    }

    #[test]
    fn a_commit_may_wait_on_its_standby_well_below_the_statement_timeout() {
        assert_eq!(
            PrimaryWatch::sync_wait_limit(Duration::from_secs(10)),
            Duration::from_secs(3)
        );
        assert_eq!(
            PrimaryWatch::sync_wait_limit(Duration::from_secs(3)),
            Duration::from_secs(1)
        );
    }
}
