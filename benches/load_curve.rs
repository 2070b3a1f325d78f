//! The load curve: checkouts per second, latency, the answers by status and serve's memory as
//! the number of open connections grows, from one client address and from many, drawn so that
//! the knee shows at a glance.
//!
//! `cargo bench --bench load_curve`
//!
//! One command does it all: cargo builds `payorch` (release) alongside this bench, which starts
//! `payorch serve` on its embedded defaults (a private PostgreSQL cluster in a fresh temporary
//! data dir, the in-process sandbox provider, the new-key quota lifted out of the way), loads
//! it point by point and stops it with SIGINT at the end. It writes `load_curve.md` (the
//! table, also printed to stdout), `load_curve.svg` (the chart) and `serve.log` (serve's
//! stderr) to `BENCH_OUT` (default: a `load_curve` folder in the system's temp dir). On a
//! shared machine, run it under `nice`. Tunables:
//! - `BENCH_POINTS`: connection counts, default `16 64 256 1024`;
//! - `BENCH_SECONDS`: length of each point, default 15;
//! - `BENCH_SHAPES`: `one` (every connection from one address) and/or `many` (round-robin
//!   over 127.0.0.2 … 127.0.0.17), default both;
//! - `BENCH_ONE_ADDRESS`: the `one` shape's address, default 127.0.0.2 (serve exempts its
//!   own 127.0.0.1, where its in-process sandbox's webhooks come from, from the per-address
//!   connection budget, so a client there would not meet it);
//! - `BENCH_SERVE_FLAGS`: more `serve` flags, split on whitespace;
//! - `BENCH_PAYORCH`: another `payorch` binary to measure.
//!
//! wrk cannot bind a source address, hence this generator: each connection is one task on one
//! TCP socket bound to its source address, sending `POST /v1/checkout` under a fresh
//! `Idempotency-Key` back to back over HTTP/1.1 keep-alive. A load test keeps hammering, so
//! a 503 is counted and its `Retry-After` not honoured. A connection the server closes before its first
//! answer counts as refused (serve sheds connections over its per-address budget right after
//! accepting them) and is retried after a backoff of 10 ms doubling to 1 s, as a client pool
//! would, so that a crowd of refused connections measures serve rather than a connect storm
//! of this process's making; one closed after it has served answers counts as cut and is
//! reopened at once. Requests in flight when a point ends are dropped uncounted.
//!
//! Each point reports checkouts/s (2xx answers a second), p50 and p99 of all answers and p99
//! of the 503s alone, the answers by status, the connections refused, cut or not opened, and
//! serve's CPU and peak RSS; after a shape's last point, serve's RSS each second through 10 s
//! of quiet. serve logs at its own default level (`RUST_LOG` passes through to it): a line a
//! request, so `serve.log` grows by tens of MB.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderValue};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpSocket;
use tokio::time::Instant;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const CHECKOUT: &str = "/v1/checkout";
const CHECKOUT_BODY: &str = r#"{"amount":100,"currency":"usd","payment_method":"pm_card_visa"}"#;
/// The "many" shape's source addresses: 127.0.0.2 and the 15 after it.
const MANY_FIRST: u8 = 2;
const MANY_COUNT: u8 = 16;
/// Lets serve settle between points.
const PAUSE: Duration = Duration::from_secs(3);
/// How long serve's memory is watched once a shape's load has ended (the issue wants it under
/// 100 MB within 10 s).
const IDLE: Duration = Duration::from_secs(10);
const RSS_EVERY: Duration = Duration::from_millis(250);
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const LAST_BACKOFF: Duration = Duration::from_secs(1);
/// A private cluster's first start runs initdb, slow on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
const ONE_COLOR: &str = "#1f77b4";
const MANY_COLOR: &str = "#e8710a";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("load_curve: error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), BoxError> {
    let config = Config::from_env()?;
    raise_open_file_limit();
    std::fs::create_dir_all(&config.out)?;
    let mut serve = Serve::start(&config)?;
    eprintln!(
        "load_curve: serve (pid {}) on {}; {} s per point",
        serve.pid, serve.addr, config.seconds
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut results = Results::default();
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = sweep(&config, &serve, &mut results) => outcome,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        }
    });
    drop(runtime);
    serve.stop();
    // What was measured is written even when the sweep stopped half way.
    if !results.points.is_empty() {
        let report = Report::new(&config, &results);
        let table = report.markdown();
        println!("{table}");
        std::fs::write(config.out.join("load_curve.md"), &table)?;
        std::fs::write(config.out.join("load_curve.svg"), report.svg())?;
        eprintln!(
            "load_curve: wrote load_curve.md, load_curve.svg and serve.log to {}",
            config.out.display()
        );
    }
    outcome
}

struct Config {
    payorch: PathBuf,
    points: Vec<usize>,
    seconds: u64,
    shapes: Vec<Shape>,
    one_address: Ipv4Addr,
    serve_flags: Vec<String>,
    out: PathBuf,
}

impl Config {
    fn from_env() -> Result<Config, BoxError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let points = match var("BENCH_POINTS") {
            Some(list) => list
                .split([' ', ','])
                .filter(|p| !p.is_empty())
                .map(|p| {
                    p.parse::<usize>()
                        .map_err(|_| format!("BENCH_POINTS: {p:?}"))
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![16, 64, 256, 1024],
        };
        if points.is_empty() || points.contains(&0) {
            return Err("BENCH_POINTS: want connection counts above 0".into());
        }
        let shapes = match var("BENCH_SHAPES") {
            Some(list) => list
                .split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(|s| match s {
                    "one" => Ok(Shape::One),
                    "many" => Ok(Shape::Many),
                    _ => Err(format!("BENCH_SHAPES: {s:?} is neither one nor many")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![Shape::One, Shape::Many],
        };
        Ok(Config {
            payorch: var("BENCH_PAYORCH")
                .map(PathBuf::from)
                .unwrap_or_else(|| env!("CARGO_BIN_EXE_payorch").into()),
            points,
            seconds: match var("BENCH_SECONDS") {
                Some(s) => s.parse().map_err(|_| format!("BENCH_SECONDS: {s:?}"))?,
                None => 15,
            },
            shapes,
            one_address: match var("BENCH_ONE_ADDRESS") {
                Some(a) => a.parse().map_err(|_| format!("BENCH_ONE_ADDRESS: {a:?}"))?,
                None => Ipv4Addr::new(127, 0, 0, 2),
            },
            serve_flags: var("BENCH_SERVE_FLAGS")
                .map(|f| f.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
            out: var("BENCH_OUT")
                .map(PathBuf::from)
                .unwrap_or_else(|| std::env::temp_dir().join("load_curve")),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Every connection from one address.
    One,
    /// Round-robin over 127.0.0.2 … 127.0.0.17.
    Many,
}

impl Shape {
    fn label(self) -> &'static str {
        match self {
            Shape::One => "one address",
            Shape::Many => "16 addresses",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Shape::One => ONE_COLOR,
            Shape::Many => MANY_COLOR,
        }
    }

    fn source(self, one: Ipv4Addr, connection: usize) -> IpAddr {
        match self {
            Shape::One => one.into(),
            Shape::Many => {
                let host = MANY_FIRST + (connection % usize::from(MANY_COUNT)) as u8;
                Ipv4Addr::new(127, 0, 0, host).into()
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// serve

/// `payorch serve` as a child process, with its temporary data dir.
struct Serve {
    child: Child,
    pid: u32,
    addr: SocketAddr,
    api_key: String,
    work: PathBuf,
    stopped: bool,
}

impl Serve {
    fn start(config: &Config) -> Result<Serve, BoxError> {
        let work = fresh_temp_dir()?;
        let data_dir = work.join("data");
        let log_path = config.out.join("serve.log");
        let log = std::fs::File::create(&log_path)?;
        let child = Command::new(&config.payorch)
            .arg("serve")
            .arg("--data-dir")
            .arg(&data_dir)
            // Port 0: serve picks a free port and names it in its first line.
            .args(["--bind", "127.0.0.1:0"])
            // One merchant opens every key here.
            .args(["--max-new-keys-per-minute", "100000000"])
            .args(&config.serve_flags)
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", config.payorch.display()))?;
        let pid = child.id();
        let mut serve = Serve {
            child,
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            api_key: String::new(),
            work,
            stopped: false,
        };
        let banner = serve.first_line()?;
        let addr = banner
            .strip_prefix("payorch listening on http://")
            .and_then(|a| a.trim().parse().ok())
            .ok_or_else(|| format!("unexpected first line from serve: {banner:?}"))?;
        serve.addr = addr;
        let credentials: serde_json::Value =
            serde_json::from_slice(&std::fs::read(data_dir.join("credentials.json"))?)?;
        serve.api_key = credentials["api_key"]
            .as_str()
            .ok_or("credentials.json has no api_key")?
            .to_string();
        Ok(serve)
    }

    /// Waits for serve's first line of stdout; the rest is drained in the background, so that
    /// serve never blocks on a full pipe.
    fn first_line(&mut self) -> Result<String, BoxError> {
        let stdout = self.child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            lines.for_each(drop);
        });
        let started = std::time::Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(500)) {
                Ok(Some(Ok(line))) => return Ok(line),
                Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(
                        "serve closed its stdout before saying where it listens (see serve.log)"
                            .into(),
                    )
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Some(status) = self.child.try_wait()? {
                self.stopped = true;
                return Err(format!("serve exited at start ({status}); see serve.log").into());
            }
            if started.elapsed() > START_TIMEOUT {
                return Err("serve did not start listening within 180 s".into());
            }
        }
    }

    /// SIGINT, and waits for serve to exit; its private cluster stops with it.
    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        // SAFETY: kill only sends a signal to our own child, which has not been reaped.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGINT) };
        let started = std::time::Instant::now();
        while started.elapsed() < STOP_TIMEOUT {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return,
                Ok(Some(status)) => {
                    eprintln!("load_curve: serve exited with {status} (see serve.log)");
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(_) => return,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        eprintln!(
            "load_curve: serve did not stop within 60 s and was killed; its PostgreSQL may \
             still run in {}",
            self.work.display()
        );
        // Kept, so that the cluster can still be stopped by hand.
        self.work = PathBuf::new();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.stop();
        if !self.work.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}

/// A new folder in the system's temp dir, which the `postgres` user can enter when the
/// bench runs as root (serve's private cluster then runs as `postgres`).
fn fresh_temp_dir() -> Result<PathBuf, BoxError> {
    use std::os::unix::fs::PermissionsExt;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos();
    let dir =
        std::env::temp_dir().join(format!("payorch-load-curve-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// Each connection is a socket: raise the soft open-file limit to the hard one.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// /proc: serve's memory and CPU

/// A line of `/proc/<pid>/status` such as `VmRSS`, in kB.
fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The process's state letter and its user + system CPU time in clock ticks.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let state = fields.first()?.chars().next()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((state, utime + stime))
}

fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// This process's user + system CPU time.
fn own_cpu() -> Duration {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes to it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// serve's peak resident memory over a span: the kernel's high-water mark, reset at the start
/// (`clear_refs`), so no spike between samples is missed; else the largest of the samples
/// taken every 250 ms.
struct PeakRss {
    pid: u32,
    hwm_reset: bool,
    stop: Arc<AtomicBool>,
    sampler: JoinHandle<Option<u64>>,
}

impl PeakRss {
    fn start(pid: u32) -> PeakRss {
        let hwm_reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        // A thread of its own: the runtime's two workers are busy with the load.
        let sampler = std::thread::spawn(move || {
            let mut peak = None;
            while !stopping.load(Ordering::Relaxed) {
                peak = peak.max(proc_status_kb(pid, "VmRSS"));
                std::thread::sleep(RSS_EVERY);
            }
            peak.max(proc_status_kb(pid, "VmRSS"))
        });
        PeakRss {
            pid,
            hwm_reset,
            stop,
            sampler,
        }
    }

    fn finish(self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        let sampled = self.sampler.join().ok().flatten();
        if self.hwm_reset {
            sampled.max(proc_status_kb(self.pid, "VmHWM"))
        } else {
            sampled
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The load

#[derive(Default)]
struct Results {
    points: Vec<Point>,
    /// Per shape, serve's RSS (kB) each second after its last point.
    idle: Vec<(Shape, Vec<Option<u64>>)>,
}

struct Point {
    shape: Shape,
    connections: usize,
    seconds: f64,
    tally: Tally,
    serve_cpu: Option<f64>,
    client_cpu: f64,
    peak_rss_kb: Option<u64>,
    /// For a shape's last point: serve's RSS 10 s after it.
    rss_after_kb: Option<u64>,
}

/// What the connections saw; latencies in microseconds.
#[derive(Default)]
struct Tally {
    latencies: Vec<u32>,
    latencies_503: Vec<u32>,
    ok: u64,
    conflict: u64,
    rate_limited: u64,
    unavailable: u64,
    other: u64,
    close_answers: u64,
    refused: u64,
    cut: u64,
    connect_errors: u64,
    /// The first error of each kind, to tell what happened.
    refused_error: Option<String>,
    cut_error: Option<String>,
    connect_error: Option<String>,
}

impl Tally {
    fn record(&mut self, answer: &Answer, latency: Duration) {
        let micros = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
        self.latencies.push(micros);
        match answer.status {
            200..=299 => self.ok += 1,
            409 => self.conflict += 1,
            429 => self.rate_limited += 1,
            503 => {
                self.unavailable += 1;
                self.latencies_503.push(micros);
            }
            _ => self.other += 1,
        }
        if answer.close {
            self.close_answers += 1;
        }
    }

    fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.latencies_503.extend(other.latencies_503);
        self.ok += other.ok;
        self.conflict += other.conflict;
        self.rate_limited += other.rate_limited;
        self.unavailable += other.unavailable;
        self.other += other.other;
        self.close_answers += other.close_answers;
        self.refused += other.refused;
        self.cut += other.cut;
        self.connect_errors += other.connect_errors;
        self.refused_error = self.refused_error.take().or(other.refused_error);
        self.cut_error = self.cut_error.take().or(other.cut_error);
        self.connect_error = self.connect_error.take().or(other.connect_error);
    }

    fn lost_connections(&self) -> u64 {
        self.refused + self.cut + self.connect_errors
    }
}

/// The `q` quantile of sorted latencies, in milliseconds.
fn quantile_ms(sorted: &[u32], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(f64::from(sorted[rank - 1]) / 1000.0)
}

async fn sweep(config: &Config, serve: &Serve, results: &mut Results) -> Result<(), BoxError> {
    let auth = HeaderValue::from_str(&format!("Bearer {}", serve.api_key))?;
    let host = HeaderValue::from_str(&serve.addr.to_string())?;
    let client = Client {
        target: serve.addr,
        auth,
        host,
    };
    let ticks = clock_ticks_per_second();
    let mut first = true;
    for &shape in &config.shapes {
        for (i, &connections) in config.points.iter().enumerate() {
            if !first {
                tokio::time::sleep(PAUSE).await;
            }
            first = false;
            if !alive(serve.pid) {
                return Err("serve has exited (see serve.log)".into());
            }
            let peak = PeakRss::start(serve.pid);
            let serve_cpu_before = proc_stat(serve.pid).map(|(_, t)| t);
            let client_cpu_before = own_cpu();
            let started = Instant::now();
            let deadline = started + Duration::from_secs(config.seconds);
            let tasks: Vec<_> = (0..connections)
                .map(|c| {
                    let source = shape.source(config.one_address, c);
                    tokio::spawn(client.clone().hammer(source, deadline))
                })
                .collect();
            let mut tally = Tally::default();
            for task in tasks {
                tally.merge(task.await?);
            }
            let seconds = started.elapsed().as_secs_f64();
            let serve_cpu = serve_cpu_before
                .zip(proc_stat(serve.pid))
                .map(|(before, (_, after))| (after - before) as f64 / ticks / seconds * 100.0);
            let client_cpu = (own_cpu() - client_cpu_before).as_secs_f64() / seconds * 100.0;
            let peak_rss_kb = peak.finish();
            tally.latencies.sort_unstable();
            tally.latencies_503.sort_unstable();
            let point = Point {
                shape,
                connections,
                // The point's length, not the moment the last task was joined.
                seconds: config.seconds as f64,
                tally,
                serve_cpu,
                client_cpu,
                peak_rss_kb,
                rss_after_kb: None,
            };
            eprintln!("load_curve: {}", point.summary());
            results.points.push(point);
            if i + 1 == config.points.len() {
                let trace = idle_rss(serve.pid).await;
                if let Some(point) = results.points.last_mut() {
                    point.rss_after_kb = trace.last().copied().flatten();
                }
                results.idle.push((shape, trace));
            }
        }
    }
    Ok(())
}

/// serve's RSS each second for the 10 s after a load, from +0 s to +10 s.
async fn idle_rss(pid: u32) -> Vec<Option<u64>> {
    let started = Instant::now();
    let mut trace = Vec::new();
    for second in 0..=IDLE.as_secs() {
        tokio::time::sleep_until(started + Duration::from_secs(second)).await;
        trace.push(proc_status_kb(pid, "VmRSS"));
    }
    trace
}

#[derive(Clone)]
struct Client {
    target: SocketAddr,
    auth: HeaderValue,
    host: HeaderValue,
}

/// One open connection; its driver task ends with it.
struct Connection {
    sender: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

struct Answer {
    status: u16,
    /// The server said `Connection: close`.
    close: bool,
}

impl Client {
    /// One connection's worth of load until `deadline`: checkouts back to back, reconnecting
    /// whenever the connection is lost.
    async fn hammer(self, source: IpAddr, deadline: Instant) -> Tally {
        let mut tally = Tally::default();
        let mut backoff = FIRST_BACKOFF;
        while Instant::now() < deadline {
            let mut connection = match tokio::time::timeout_at(deadline, self.connect(source)).await
            {
                Err(_) => break,
                Ok(Ok(connection)) => connection,
                Ok(Err(err)) => {
                    tally.connect_errors += 1;
                    tally.connect_error.get_or_insert_with(|| err.to_string());
                    backoff = back_off(backoff, deadline).await;
                    continue;
                }
            };
            let mut answered = false;
            loop {
                let sent = Instant::now();
                match tokio::time::timeout_at(deadline, self.checkout(&mut connection)).await {
                    // The point is over: what is in flight is dropped with the connection.
                    Err(_) => return tally,
                    Ok(Ok(answer)) => {
                        tally.record(&answer, sent.elapsed());
                        answered = true;
                        backoff = FIRST_BACKOFF;
                        if answer.close {
                            break;
                        }
                    }
                    Ok(Err(err)) if answered => {
                        tally.cut += 1;
                        tally.cut_error.get_or_insert_with(|| error_chain(&err));
                        break;
                    }
                    Ok(Err(err)) => {
                        tally.refused += 1;
                        tally.refused_error.get_or_insert_with(|| error_chain(&err));
                        backoff = back_off(backoff, deadline).await;
                        break;
                    }
                }
            }
        }
        tally
    }

    async fn connect(&self, source: IpAddr) -> Result<Connection, BoxError> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        let stream = socket.connect(self.target).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            // Its errors reach the sender too, which is where they are counted.
            let _ = connection.await;
        });
        Ok(Connection { sender, driver })
    }

    async fn checkout(&self, connection: &mut Connection) -> Result<Answer, hyper::Error> {
        connection.sender.ready().await?;
        let key = HeaderValue::from_str(&uuid::Uuid::now_v7().to_string())
            .expect("a UUID is a valid header value");
        let request = Request::post(CHECKOUT)
            .header(header::HOST, self.host.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, self.auth.clone())
            .header("idempotency-key", key)
            .body(Full::new(Bytes::from_static(CHECKOUT_BODY.as_bytes())))
            .expect("the checkout request is well-formed");
        let response = connection.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let close = response
            .headers()
            .get(header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        response.into_body().collect().await?;
        Ok(Answer { status, close })
    }
}

/// Sleeps for `backoff` (not past the deadline); the next, longer backoff.
async fn back_off(backoff: Duration, deadline: Instant) -> Duration {
    tokio::time::sleep_until((Instant::now() + backoff).min(deadline)).await;
    (backoff * 2).min(LAST_BACKOFF)
}

/// hyper's error and its causes ("connection closed before message completed", "Connection
/// reset by peer").
fn error_chain(err: &hyper::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}

// ---------------------------------------------------------------------------------------------
// The report

impl Point {
    fn checkouts_per_second(&self) -> f64 {
        self.tally.ok as f64 / self.seconds
    }

    fn p50(&self) -> Option<f64> {
        quantile_ms(&self.tally.latencies, 0.50)
    }

    fn p99(&self) -> Option<f64> {
        quantile_ms(&self.tally.latencies, 0.99)
    }

    fn p99_503(&self) -> Option<f64> {
        quantile_ms(&self.tally.latencies_503, 0.99)
    }

    fn summary(&self) -> String {
        let t = &self.tally;
        format!(
            "{} × {}: {:.0} checkouts/s, p50 {} ms, p99 {} ms; 503: {}; refused {}, cut {}, \
             connect errors {}; serve CPU {} %, peak RSS {} MB; this process's CPU {:.0} %",
            self.shape.label(),
            self.connections,
            self.checkouts_per_second(),
            ms(self.p50()),
            ms(self.p99()),
            t.unavailable,
            t.refused,
            t.cut,
            t.connect_errors,
            self.serve_cpu.map_or("–".into(), |c| format!("{c:.0}")),
            mb(self.peak_rss_kb),
            self.client_cpu,
        )
    }
}

fn ms(value: Option<f64>) -> String {
    match value {
        None => "–".into(),
        Some(v) if v < 10.0 => format!("{v:.2}"),
        Some(v) if v < 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.0}"),
    }
}

/// MB as the project's other figures count them: kB of `/proc` over 1,000.
fn mb(kb: Option<u64>) -> String {
    kb.map_or("–".into(), |kb| format!("{:.1}", kb as f64 / 1000.0))
}

struct Report<'a> {
    config: &'a Config,
    results: &'a Results,
    date: String,
    commit: String,
}

impl<'a> Report<'a> {
    fn new(config: &'a Config, results: &'a Results) -> Self {
        Report {
            config,
            results,
            date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
            commit: git_commit(),
        }
    }

    fn serve_flags(&self) -> String {
        let mut flags = String::from("--max-new-keys-per-minute 100000000");
        for flag in &self.config.serve_flags {
            flags.push(' ');
            flags.push_str(flag);
        }
        flags
    }

    fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(
            md,
            "## Load curve, {} (commit {})\n\n`cargo bench --bench load_curve`: `payorch serve` \
             on embedded defaults (`{}`), {} s per point, `POST /v1/checkout` with a fresh key \
             back to back on each keep-alive connection, from one address ({}) or from 16 \
             (127.0.0.2 … 127.0.0.17); {} CPUs.\n",
            self.date,
            self.commit,
            self.serve_flags(),
            self.config.seconds,
            self.config.one_address,
            std::thread::available_parallelism().map_or(0, |n| n.get()),
        );
        md.push_str(
            "| shape | conns | checkouts/s | p50 ms | p99 ms | 503 p99 ms | 2xx | 409 | 429 \
             | 503 | other | refused | cut | connect errors | `Connection: close` | serve CPU % \
             | load CPU % | serve peak RSS MB | RSS 10 s later MB |\n",
        );
        md.push_str(&"|---".repeat(19));
        md.push_str("|\n");
        for p in &self.results.points {
            let t = &p.tally;
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} \
                 | {} | {:.0} | {} | {} |",
                p.shape.label(),
                p.connections,
                p.checkouts_per_second(),
                ms(p.p50()),
                ms(p.p99()),
                ms(p.p99_503()),
                t.ok,
                t.conflict,
                t.rate_limited,
                t.unavailable,
                t.other,
                t.refused,
                t.cut,
                t.connect_errors,
                t.close_answers,
                p.serve_cpu.map_or("–".into(), |c| format!("{c:.0}")),
                p.client_cpu,
                mb(p.peak_rss_kb),
                p.rss_after_kb.map_or(String::new(), |kb| mb(Some(kb))),
            );
        }
        md.push('\n');
        for (shape, trace) in &self.results.idle {
            let seconds: Vec<String> = trace
                .iter()
                .enumerate()
                .map(|(s, kb)| format!("+{s} s {}", mb(*kb)))
                .collect();
            let _ = writeln!(
                md,
                "- serve's RSS (MB) after the {} load: {}.",
                shape.label(),
                seconds.join(", ")
            );
        }
        md.push_str(
            "- *refused*: connections closed before their first answer (serve sheds those over \
             its per-address budget as it accepts them), retried after a backoff of 10 ms to \
             1 s; *cut*: closed after serving answers, or a request that got no answer, \
             reopened at once; *load CPU*: this generator's (100 % = one core).\n",
        );
        for p in &self.results.points {
            let t = &p.tally;
            for (kind, error) in [
                ("refused", &t.refused_error),
                ("cut", &t.cut_error),
                ("connect error", &t.connect_error),
            ] {
                if let Some(error) = error {
                    let _ = writeln!(
                        md,
                        "- {} × {}, first {kind}: `{error}`",
                        p.shape.label(),
                        p.connections
                    );
                }
            }
        }
        md.push_str("\n![load curve](load_curve.svg)\n");
        md
    }

    fn svg(&self) -> String {
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="Helvetica, Arial, sans-serif">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{cx}" y="30" text-anchor="middle" font-size="18" font-weight="bold">payorch load curve: POST /v1/checkout, {seconds} s per point</text>
<text x="{cx}" y="52" text-anchor="middle" font-size="12" fill="#555">{date}, commit {commit}, serve {flags}</text>"##,
            W = WIDTH,
            H = HEIGHT,
            cx = WIDTH / 2.0,
            seconds = self.config.seconds,
            date = self.date,
            commit = escape(&self.commit),
            flags = escape(&self.serve_flags()),
        );
        let xs = XScale::new(&self.config.points);
        let points = &self.results.points;
        let panels = [
            (
                "checkouts/s (2xx)",
                self.series(|p| Some(p.checkouts_per_second()), false),
                None,
            ),
            (
                "latency, ms: p99 solid, p50 dashed",
                self.series(|p| p.p99(), false)
                    .into_iter()
                    .chain(self.series(|p| p.p50(), true))
                    .collect(),
                None,
            ),
            (
                "serve's peak RSS, MB",
                self.series(|p| p.peak_rss_kb.map(|kb| kb as f64 / 1000.0), false),
                Some((100.0, "100 MB")),
            ),
        ];
        for (i, (title, series, line)) in panels.iter().enumerate() {
            let panel = Panel {
                left: i as f64 * WIDTH / 3.0 + 64.0,
                top: 96.0,
                width: WIDTH / 3.0 - 88.0,
                height: 380.0,
            };
            panel.draw(&mut svg, title, &xs, series, *line);
        }
        self.legend(
            &mut svg,
            points.iter().any(|p| p.tally.lost_connections() > 0),
        );
        svg.push_str("</svg>\n");
        svg
    }

    /// One line per shape of `value` over the connection counts.
    fn series(&self, value: impl Fn(&Point) -> Option<f64>, dashed: bool) -> Vec<Series> {
        self.config
            .shapes
            .iter()
            .map(|&shape| Series {
                color: shape.color(),
                dashed,
                points: self
                    .results
                    .points
                    .iter()
                    .filter(|p| p.shape == shape)
                    .filter_map(|p| {
                        value(p).map(|v| (p.connections, v, p.tally.lost_connections() > 0))
                    })
                    .collect(),
            })
            .collect()
    }

    fn legend(&self, svg: &mut String, lost: bool) {
        let mut items: Vec<String> = self
            .config
            .shapes
            .iter()
            .map(|&shape| {
                let what = match shape {
                    Shape::One => format!("from one address ({})", self.config.one_address),
                    Shape::Many => "from 16 addresses (127.0.0.2–17)".into(),
                };
                format!(
                    r#"<line x1="0" y1="-4" x2="24" y2="-4" stroke="{c}" stroke-width="2.5"/><circle cx="12" cy="-4" r="4" fill="{c}"/><text x="30" y="0" font-size="13">{what}</text>"#,
                    c = shape.color()
                )
            })
            .collect();
        if lost {
            items.push(
                r##"<circle cx="12" cy="-4" r="4" fill="white" stroke="#333" stroke-width="2"/><text x="30" y="0" font-size="13">connections refused or cut</text>"##
                    .into(),
            );
        }
        let width = WIDTH / items.len() as f64;
        for (i, item) in items.iter().enumerate() {
            let _ = writeln!(
                svg,
                r#"<g transform="translate({:.0},{:.0})">{item}</g>"#,
                i as f64 * width + 40.0,
                HEIGHT - 30.0
            );
        }
    }
}

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 600.0;

struct Series {
    color: &'static str,
    dashed: bool,
    /// Connections, value, and whether connections were refused or cut there.
    points: Vec<(usize, f64, bool)>,
}

/// The connection counts on a log2 axis.
struct XScale {
    ticks: Vec<usize>,
    low: f64,
    high: f64,
}

impl XScale {
    fn new(points: &[usize]) -> XScale {
        let mut ticks = points.to_vec();
        ticks.sort_unstable();
        ticks.dedup();
        let log = |c: usize| (c as f64).log2();
        let (low, high) = (log(ticks[0]), log(ticks[ticks.len() - 1]));
        // Room on both sides, so that the end points do not sit on the axes.
        let pad = ((high - low) * 0.08).max(0.5);
        XScale {
            ticks,
            low: low - pad,
            high: high + pad,
        }
    }

    /// 0 … 1 across the panel.
    fn at(&self, connections: usize) -> f64 {
        ((connections as f64).log2() - self.low) / (self.high - self.low)
    }
}

struct Panel {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Panel {
    fn draw(
        &self,
        svg: &mut String,
        title: &str,
        xs: &XScale,
        series: &[Series],
        line: Option<(f64, &str)>,
    ) {
        let highest = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(line.map(|l| l.0))
            .fold(0.0, f64::max);
        let step = nice_step(highest * 1.05);
        let top_value = ((highest * 1.05 / step).ceil() * step).max(step);
        let x = |c: usize| self.left + xs.at(c) * self.width;
        let y = |v: f64| self.top + self.height * (1.0 - v / top_value);
        let bottom = self.top + self.height;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
            self.left + self.width / 2.0,
            self.top - 14.0,
            escape(title)
        );
        // Grid and y labels.
        let mut tick = 0.0;
        while tick <= top_value + step / 2.0 {
            let _ = writeln!(
                svg,
                r##"<line x1="{l:.1}" y1="{y:.1}" x2="{r:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="end" font-size="11" fill="#444">{label}</text>"##,
                l = self.left,
                r = self.left + self.width,
                y = y(tick),
                tx = self.left - 6.0,
                ty = y(tick) + 4.0,
                label = tick_label(tick),
            );
            tick += step;
        }
        // x ticks: the connection counts.
        for &c in &xs.ticks {
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{b:.1}" x2="{x:.1}" y2="{b5:.1}" stroke="#444"/><text x="{x:.1}" y="{ty:.1}" text-anchor="middle" font-size="11" fill="#444">{c}</text>"##,
                x = x(c),
                b = bottom,
                b5 = bottom + 5.0,
                ty = bottom + 18.0,
            );
        }
        let _ = writeln!(
            svg,
            r##"<path d="M{l:.1},{t:.1}V{b:.1}H{r:.1}" fill="none" stroke="#444"/><text x="{cx:.1}" y="{ly:.1}" text-anchor="middle" font-size="12" fill="#444">connections (log scale)</text>"##,
            l = self.left,
            t = self.top,
            b = bottom,
            r = self.left + self.width,
            cx = self.left + self.width / 2.0,
            ly = bottom + 38.0,
        );
        if let Some((value, label)) = line {
            let _ = writeln!(
                svg,
                r##"<line x1="{l:.1}" y1="{y:.1}" x2="{r:.1}" y2="{y:.1}" stroke="#c0392b" stroke-dasharray="2,3"/><text x="{r:.1}" y="{ty:.1}" text-anchor="end" font-size="11" fill="#c0392b">{label}</text>"##,
                l = self.left,
                r = self.left + self.width,
                y = y(value),
                ty = y(value) - 4.0,
            );
        }
        for s in series {
            let path: Vec<String> = s
                .points
                .iter()
                .map(|&(c, v, _)| format!("{:.1},{:.1}", x(c), y(v)))
                .collect();
            let dash = if s.dashed {
                r#" stroke-dasharray="6,4""#
            } else {
                ""
            };
            if path.len() > 1 {
                let _ = writeln!(
                    svg,
                    r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2.5"{dash}/>"#,
                    path.join(" "),
                    s.color
                );
            }
            for &(c, v, lost) in &s.points {
                let fill = if lost { "white" } else { s.color };
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="{}" fill="{fill}" stroke="{}" stroke-width="2"/>"#,
                    x(c),
                    y(v),
                    if s.dashed { 3 } else { 4 },
                    s.color
                );
            }
        }
    }
}

/// A step of 1, 2, 2.5 or 5 times a power of ten that cuts `0 … max` into at most 5 parts.
fn nice_step(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * magnitude)
}

fn tick_label(value: f64) -> String {
    // Rounded, so that 3 × 0.1 prints as 0.3.
    let rounded = (value * 1000.0).round() / 1000.0;
    format!("{rounded}")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The commit the bench was built from, `-dirty` when the sources have uncommitted changes.
fn git_commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .stderr(Stdio::null())
            .output()
    };
    let Ok(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    if !head.status.success() {
        return "unknown".into();
    }
    let mut commit = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let dirty = git(&["diff", "--quiet", "HEAD", "--", "src", "Cargo.lock"])
        .is_ok_and(|o| o.status.code() == Some(1));
    if dirty {
        commit.push_str("-dirty");
    }
    commit
}
