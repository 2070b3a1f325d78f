//! A private PostgreSQL cluster run with the machine's own `initdb` / `pg_ctl`.
//!
//! The cluster listens only on a Unix socket inside its own folder (no TCP), with `trust`
//! authentication: reaching the socket at all needs access to that folder, which belongs to
//! the cluster's owner alone. As root the cluster runs as the `postgres` system user, since
//! `initdb` refuses to run as root.
//!
//! Two roles, as a careful operator would have them (docs/PRODUCTION.md, section 2): the
//! superuser the cluster is created with owns the tables and runs the migrations; the service
//! connects as [`CLUSTER_RUNTIME_USER`], which owns nothing (src/db/roles.rs).

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

/// The superuser the cluster is created with: it owns the tables and runs the migrations.
pub const CLUSTER_USER: &str = "payorch";
/// The login role the service connects as: a member of `payorch_runtime`, owning nothing.
pub const CLUSTER_RUNTIME_USER: &str = "payorch_app";
/// The system user a root process hands the cluster to.
const ROOT_RUNS_AS: &str = "postgres";
/// Unix socket paths are limited to 107 bytes; `.s.PGSQL.5432` takes 14 of them.
const MAX_SOCKET_DIR_LEN: usize = 90;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found in $PAYORCH_PG_BIN_DIR, on \
         PATH or under /usr/lib/postgresql/*/bin: install them (Debian/Ubuntu: `apt-get install postgresql`) \
         or set DATABASE_URL to an existing database"
    )]
    BinariesNotFound,
    #[error("running as root needs the `{0}` system user to own the cluster, and it does not exist: create it (`useradd --system {0}`) or set DATABASE_URL")]
    NoSystemUser(&'static str),
    #[error("{what} failed ({status}): {stderr}")]
    CommandFailed {
        what: String,
        status: String,
        stderr: String,
    },
    #[error("cluster folder {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ClusterError + '_ {
    move |source| ClusterError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Options for starting a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The folder the cluster belongs to (`--data-dir`).
    pub data_dir: PathBuf,
    /// Trade durability for speed (`fsync=off`): only for throw-away test clusters.
    pub ephemeral: bool,
}

/// A running private cluster. Stop it with [`PrivateCluster::stop`]; it is not stopped on drop
/// because stopping blocks, and a cluster that outlives a crash is simply reused next start.
#[derive(Debug)]
pub struct PrivateCluster {
    bin_dir: PathBuf,
    root: PathBuf,
    run_as: Option<SystemUser>,
    started_here: bool,
}

#[derive(Debug, Clone)]
struct SystemUser {
    name: &'static str,
    uid: u32,
    gid: u32,
}

impl PrivateCluster {
    /// Starts the cluster under `options.data_dir`, creating it on first use and reusing it
    /// afterwards. A cluster that is already running there (another replica) is joined.
    /// Blocking: call it from a blocking thread.
    pub fn start(options: &ClusterOptions) -> Result<Self, ClusterError> {
        let bin_dir = find_bin_dir().ok_or(ClusterError::BinariesNotFound)?;
        let run_as = if is_root() {
            Some(lookup_user(ROOT_RUNS_AS).ok_or(ClusterError::NoSystemUser(ROOT_RUNS_AS))?)
        } else {
            None
        };
        fs::create_dir_all(&options.data_dir).map_err(io_err(&options.data_dir))?;
        // Two commands starting at once on one data dir must not both run initdb.
        let _lock = StartLock::acquire(&options.data_dir.join(".cluster.lock"))?;
        let root = cluster_root(&options.data_dir, run_as.as_ref())?;
        let mut cluster = PrivateCluster {
            bin_dir,
            root,
            run_as,
            started_here: false,
        };
        cluster.prepare_folders()?;
        if !cluster.pgdata().join("PG_VERSION").exists() {
            cluster.initdb(options.ephemeral)?;
        }
        if cluster.is_running() {
            tracing::info!(root = %cluster.root.display(), "joining the private PostgreSQL cluster that is already running");
        } else {
            cluster.pg_ctl_start()?;
            cluster.started_here = true;
        }
        Ok(cluster)
    }

    /// The folder holding the cluster's data, socket and log.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn socket_dir(&self) -> PathBuf {
        self.root.join("socket")
    }

    fn pgdata(&self) -> PathBuf {
        self.root.join("data")
    }

    /// Whether this process started the server (and so should stop it).
    pub fn started_here(&self) -> bool {
        self.started_here
    }

    /// A libpq-style connection string for `database` over the cluster's socket, as the
    /// superuser that owns the tables (migrations, tests' own checks).
    pub fn database_url(&self, database: &str) -> String {
        self.url_as(CLUSTER_USER, database)
    }

    /// The same as the runtime role the service runs as ([`CLUSTER_RUNTIME_USER`]), which
    /// [`crate::db::roles::create_runtime_login`] makes.
    pub fn runtime_database_url(&self, database: &str) -> String {
        self.url_as(CLUSTER_RUNTIME_USER, database)
    }

    fn url_as(&self, user: &str, database: &str) -> String {
        format!(
            "host='{}' user={user} dbname={database}",
            self.socket_dir().display()
        )
    }

    pub fn is_running(&self) -> bool {
        // A postmaster killed by [`kill`](Self::kill) may stay a zombie for a while (its
        // parent is whatever adopted it), which `pg_ctl status` still counts as running.
        let dead = self.postmaster_pid().is_some_and(is_zombie);
        !dead
            && self
                .pg_ctl(&["status"])
                .map(|out| out.status.success())
                .unwrap_or(false)
    }

    /// The postmaster's pid, from the first line of its pid file.
    fn postmaster_pid(&self) -> Option<i32> {
        let text = fs::read_to_string(self.pgdata().join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// Stops the server with a fast shutdown (active sessions are ended, data is flushed).
    pub fn stop(&self) -> Result<(), ClusterError> {
        if !self.is_running() {
            return Ok(());
        }
        let out = self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", "60"])?;
        check(out, "pg_ctl stop")
    }

    /// Starts the server again after [`stop`](Self::stop) (used by outage tests and restarts).
    pub fn restart(&mut self) -> Result<(), ClusterError> {
        if !self.is_running() {
            self.pg_ctl_start()?;
            self.started_here = true;
        }
        Ok(())
    }

    /// Starts a streaming standby of `primary` under `options.data_dir`, copied from it with
    /// `pg_basebackup` on first use, that tells the primary its name `name` (what
    /// `synchronous_standby_names` lists). The smallest failover formation, for trying one
    /// without an HA manager: [`promote`](Self::promote) it, [`kill`](Self::kill) the other.
    pub fn start_standby(
        options: &ClusterOptions,
        primary: &PrivateCluster,
        name: &str,
    ) -> Result<Self, ClusterError> {
        fs::create_dir_all(&options.data_dir).map_err(io_err(&options.data_dir))?;
        let cluster = PrivateCluster {
            bin_dir: primary.bin_dir.clone(),
            root: cluster_root(&options.data_dir, primary.run_as.as_ref())?,
            run_as: primary.run_as.clone(),
            started_here: true,
        };
        cluster.prepare_folders()?;
        if !cluster.pgdata().join("PG_VERSION").exists() {
            let source = format!(
                "host='{}' user={CLUSTER_USER} application_name={name}",
                primary.socket_dir().display()
            );
            let pgdata = cluster.pgdata().display().to_string();
            // A fast checkpoint: the default spreads it over minutes.
            let args = [
                "-D", &pgdata, "-d", &source, "-X", "stream", "-R", "-c", "fast",
            ];
            let out = cluster.run("pg_basebackup", &args.map(String::from))?;
            check(out, "pg_basebackup")?;
            // The copy carries the primary's settings; its own socket comes last and wins.
            let path = cluster.pgdata().join("postgresql.conf");
            let mut conf = fs::read_to_string(&path).map_err(io_err(&path))?;
            conf.push_str(&format!(
                "unix_socket_directories = '{}'\n",
                cluster.socket_dir().display()
            ));
            fs::write(&path, conf).map_err(io_err(&path))?;
        }
        if !cluster.is_running() {
            cluster.pg_ctl_start()?;
        }
        Ok(cluster)
    }

    /// Promotes a standby to primary, on a new timeline, and waits until it accepts writes.
    pub fn promote(&self) -> Result<(), ClusterError> {
        let out = self.pg_ctl(&["promote", "-w", "-t", "60"])?;
        check(out, "pg_ctl promote")
    }

    /// Kills the postmaster with SIGKILL, as a lost machine would, and waits until its
    /// sessions have noticed and gone, so that [`restart`](Self::restart) can start it again.
    pub fn kill(&self) -> Result<(), ClusterError> {
        let pid_file = self.pgdata().join("postmaster.pid");
        let pid = self
            .postmaster_pid()
            .ok_or_else(|| io_err(&pid_file)(io::ErrorKind::NotFound.into()))?;
        // SAFETY: a signal to the process the cluster's own pid file names.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        // Its children exit when they see the postmaster gone; a start before that fails on
        // the shared memory they still hold.
        for _ in 0..100 {
            let sessions_left = fs::read_dir("/proc")
                .map_err(io_err(Path::new("/proc")))?
                .flatten()
                .filter_map(|entry| fs::read_to_string(entry.path().join("stat")).ok())
                .any(|stat| parent_pid(&stat) == Some(pid));
            // SAFETY: signal 0 only asks whether the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0 && !is_zombie(pid);
            if !sessions_left && !alive {
                // A zombie postmaster's pid still exists, and the next start would take its
                // lock files (data folder, socket) for another server's: they go with it.
                if is_zombie(pid) {
                    let socket_lock = self.socket_dir().join(".s.PGSQL.5432.lock");
                    for lock in [pid_file, socket_lock] {
                        fs::remove_file(&lock).map_err(io_err(&lock))?;
                    }
                }
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(ClusterError::CommandFailed {
            what: "kill".into(),
            status: "timeout".into(),
            stderr: format!("the sessions of postmaster {pid} did not exit within 5 s"),
        })
    }

    fn prepare_folders(&self) -> Result<(), ClusterError> {
        for dir in [self.root.clone(), self.socket_dir()] {
            fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(io_err(&dir))?;
            if let Some(user) = &self.run_as {
                std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.gid))
                    .map_err(io_err(&dir))?;
            }
        }
        Ok(())
    }

    fn initdb(&self, ephemeral: bool) -> Result<(), ClusterError> {
        let pgdata = self.pgdata();
        let mut args = vec![
            "-D".to_string(),
            pgdata.display().to_string(),
            "-U".into(),
            CLUSTER_USER.into(),
            "--auth=trust".into(),
            "-E".into(),
            "UTF8".into(),
            "--locale=C".into(),
        ];
        if ephemeral {
            args.push("--no-sync".into());
        }
        let out = self.run("initdb", &args)?;
        check(out, "initdb")?;

        // Settings appended once, at creation: no TCP at all, the socket in our own folder,
        // and room for several pools (replicas, tests) at once.
        let mut conf = format!(
            "\n# payorch private cluster\nlisten_addresses = ''\nunix_socket_directories = '{}'\n\
             max_connections = 300\n",
            self.socket_dir().display()
        );
        if ephemeral {
            conf.push_str("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n");
        }
        let path = pgdata.join("postgresql.conf");
        let mut existing = fs::read_to_string(&path).map_err(io_err(&path))?;
        existing.push_str(&conf);
        fs::write(&path, existing).map_err(io_err(&path))
    }

    fn pg_ctl_start(&self) -> Result<(), ClusterError> {
        let log = self.root.join("server.log");
        let log_arg = log.display().to_string();
        let out = self.pg_ctl(&["start", "-w", "-t", "60", "-l", &log_arg])?;
        check(out, "pg_ctl start").map_err(|err| match err {
            ClusterError::CommandFailed { what, status, .. } => ClusterError::CommandFailed {
                what,
                status,
                stderr: format!("see the server log at {}", log.display()),
            },
            other => other,
        })
    }

    /// `pg_ctl <args…> -D <pgdata>`.
    fn pg_ctl(&self, args: &[&str]) -> Result<Output, ClusterError> {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.push("-D".into());
        all.push(self.pgdata().display().to_string());
        self.run("pg_ctl", &all)
    }

    fn run(&self, program: &str, args: &[String]) -> Result<Output, ClusterError> {
        let binary = self.bin_dir.join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user.name, "--"]).arg(&binary);
                c
            }
            None => Command::new(&binary),
        };
        command
            .args(args)
            .env("LC_ALL", "C")
            .current_dir(&self.root);
        command.output().map_err(io_err(&binary))
    }
}

/// An exclusive `flock` held while a cluster is being created or started; released on drop.
struct StartLock {
    _file: fs::File,
}

impl StartLock {
    fn acquire(path: &Path) -> Result<Self, ClusterError> {
        use std::os::fd::AsRawFd;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        // SAFETY: flock on a descriptor we own; the lock ends when the file is closed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io_err(path)(io::Error::last_os_error()));
        }
        Ok(StartLock { _file: file })
    }
}

fn check(out: Output, what: &str) -> Result<(), ClusterError> {
    if out.status.success() {
        return Ok(());
    }
    let mut stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if stderr.is_empty() {
        stderr = String::from_utf8_lossy(&out.stdout).trim().to_string();
    }
    Err(ClusterError::CommandFailed {
        what: what.to_string(),
        status: out.status.to_string(),
        stderr,
    })
}

/// Where the cluster lives: `<data_dir>/postgres` when its owner can reach it and the socket
/// path fits; otherwise (root with a data dir under a private home, or a very long path) a
/// folder in the system temp dir named after the data dir, so the same data dir always finds
/// the same cluster again.
fn cluster_root(data_dir: &Path, run_as: Option<&SystemUser>) -> Result<PathBuf, ClusterError> {
    let data_dir = data_dir.canonicalize().map_err(io_err(data_dir))?;
    let preferred = data_dir.join("postgres");
    let socket_fits = preferred.join("socket").as_os_str().len() <= MAX_SOCKET_DIR_LEN;
    let reachable = match run_as {
        None => true,
        Some(user) => user_can_enter(user, &data_dir),
    };
    if socket_fits && reachable {
        return Ok(preferred);
    }
    let digest = Sha256::digest(data_dir.as_os_str().as_encoded_bytes());
    let name = format!("payorch-cluster-{}", &hex::encode(digest)[..16]);
    let fallback = std::env::temp_dir().join(name);
    tracing::info!(
        data_dir = %data_dir.display(),
        cluster = %fallback.display(),
        "the data dir cannot hold the cluster (unreachable for its owner or too long a socket path); using the temp dir"
    );
    Ok(fallback)
}

/// Whether `user` may enter every folder down to `dir` (mode bits only; no ACLs).
fn user_can_enter(user: &SystemUser, dir: &Path) -> bool {
    dir.ancestors().all(|folder| {
        let Ok(meta) = fs::metadata(folder) else {
            return false;
        };
        use std::os::unix::fs::MetadataExt;
        let mode = meta.mode();
        if meta.uid() == user.uid {
            mode & 0o100 != 0
        } else if meta.gid() == user.gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        }
    })
}

/// The fields of a `/proc/<pid>/stat` line after the command, which is in parentheses and
/// may itself hold spaces: the state first, then the parent's pid.
fn fields_after_command(stat: &str) -> impl Iterator<Item = &str> {
    let after_command = stat.rfind(')').map_or("", |end| &stat[end + 1..]);
    after_command.split_whitespace()
}

fn parent_pid(stat: &str) -> Option<i32> {
    fields_after_command(stat).nth(1)?.parse().ok()
}

fn is_zombie(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| fields_after_command(&stat).next() == Some("Z"))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn lookup_user(name: &'static str) -> Option<SystemUser> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; we copy the two ids out
    // at once, and this runs before any other thread of ours calls getpw*.
    unsafe {
        let entry = libc::getpwnam(c_name.as_ptr());
        if entry.is_null() {
            return None;
        }
        Some(SystemUser {
            name,
            uid: (*entry).pw_uid,
            gid: (*entry).pw_gid,
        })
    }
}

/// Names the folder of `initdb`/`pg_ctl` explicitly (to pick one PostgreSQL of several).
pub const BIN_DIR_ENV: &str = "PAYORCH_PG_BIN_DIR";

/// The folder with `initdb` and `pg_ctl`: `$PAYORCH_PG_BIN_DIR` if set, else the first on
/// `PATH` (where links lead), else the newest `/usr/lib/postgresql/<version>/bin`.
fn find_bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os(BIN_DIR_ENV) {
        let dir = PathBuf::from(dir);
        return has_both(&dir).then_some(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|d| has_both(d)) {
            // A link on PATH (`/usr/local/bin/initdb`) stands for the server's own folder,
            // which has the other tools (`pg_basebackup`) too.
            let real = fs::canonicalize(dir.join("initdb"))
                .ok()
                .and_then(|initdb| initdb.parent().map(Path::to_path_buf))
                .filter(|real| has_both(real));
            return Some(real.unwrap_or(dir));
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_both(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}
