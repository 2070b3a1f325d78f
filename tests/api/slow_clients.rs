//! Clients that stall or crowd: a body that never finishes is cut, and a flood of
//! connections from one address neither stops the service answering others nor keeps its
//! memory (docs/guides/api.md, "Slow and greedy clients").

use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{payorch_bin, temp_dir, TestApp, TestDatabase};

fn address(base_url: &str) -> SocketAddr {
    base_url
        .trim_start_matches("http://")
        .parse()
        .expect("host:port")
}

/// Everything the server sends until it closes the connection (or `limit` passes).
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> String {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(limit, stream.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "the server closed the connection within {limit:?}"
    );
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_stalled_body_is_cut_with_408_and_nothing_is_stored() {
    let app = TestApp::spawn_with(|settings| {
        settings.clients.body_timeout = Duration::from_millis(500);
    })
    .await;
    let mut stream = TcpStream::connect(address(&app.url(""))).await.unwrap();
    let head = format!(
        "POST /v1/orders HTTP/1.1\r\nHost: payorch\r\nAuthorization: Bearer {}\r\n\
         Idempotency-Key: stalled-1\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"amount\": 1",
        app.merchant_key
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let answer = read_to_close(&mut stream, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, 0);

    // A body that arrives in pieces, in time, is read whole.
    let mut stream = TcpStream::connect(address(&app.url(""))).await.unwrap();
    let body = r#"{"amount": 1500, "currency": "eur"}"#;
    let head = format!(
        "POST /v1/orders HTTP/1.1\r\nHost: payorch\r\nAuthorization: Bearer {}\r\n\
         Idempotency-Key: in-pieces\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        app.merchant_key,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for piece in body.as_bytes().chunks(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stream.write_all(piece).await.unwrap();
    }
    let answer = read_to_close(&mut stream, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
}

/// `payorch serve` on `database_url` with at most `open_files` open files, as a small
/// machine or container would give it.
fn serve_limited(database_url: &str, open_files: u64, extra: &[&str]) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(payorch_bin());
    command
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "2"])
        .args(extra)
        .arg("--data-dir")
        .arg(temp_dir("flood"))
        .env("DATABASE_URL", database_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    // SAFETY: setrlimit is async-signal-safe and touches only the child about to exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: open_files,
                rlim_max: open_files,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn().expect("start payorch serve")
}

/// The `payorch listening on …` line `serve` prints once it is bound.
async fn base_url_of(child: &mut tokio::process::Child) -> String {
    use tokio::io::AsyncBufReadExt;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("serve starts within 60 s")
        .unwrap()
        .expect("a line");
    line.trim_start_matches("payorch listening on ").to_string()
}

/// A field of `/proc/<pid>/status` in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} of {pid}"))
}

/// How many files `pid` has open now.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// The flood's address: on the loopback network, but not this machine's own `127.0.0.1`,
/// which has no per-address budget of its own (a local proxy's address).
const FLOOD_FROM: [u8; 4] = [127, 0, 0, 3];

/// Opens a connection from [`FLOOD_FROM`] that sends a webhook's headers and one byte of a
/// 1000-byte body, then nothing more.
async fn slow_body(to: SocketAddr) -> Option<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((FLOOD_FROM, 0))).ok()?;
    // Bounded: a server that has stopped accepting leaves connects hanging in its backlog.
    let connect = tokio::time::timeout(Duration::from_secs(2), socket.connect(to));
    let mut stream = connect.await.ok()?.ok()?;
    let head = "POST /v1/webhooks/stripe HTTP/1.1\r\nHost: payorch\r\n\
                Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{";
    stream.write_all(head.as_bytes()).await.ok()?;
    Some(stream)
}

#[tokio::test]
async fn a_slow_body_flood_from_one_address_leaves_the_service_answering_and_memory_returns() {
    const ATTACKERS: usize = 2_000;
    let db = TestDatabase::migrated().await;
    // Fewer open files than the flood has connections: before the connection budget, the
    // server ran out of them and stopped accepting anyone.
    let mut child = serve_limited(
        &db.url,
        1024,
        &[
            "--max-connections-per-ip",
            "100",
            "--body-timeout-ms",
            "3000",
        ],
    );
    let pid = child.id().expect("running");
    let base_url = base_url_of(&mut child).await;
    let target = address(&base_url);

    // Health checks come from another address on the loopback network, as a monitor would.
    let monitor: IpAddr = "127.0.0.2".parse().unwrap();
    let health = reqwest::Client::builder()
        .local_address(monitor)
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let live = |client: reqwest::Client| {
        let url = format!("{base_url}/health/live");
        async move {
            let started = Instant::now();
            let ok = client
                .get(url)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            (ok, started.elapsed(), open_files(pid))
        }
    };
    assert!(live(health.clone()).await.0, "healthy before the flood");
    let files_before = open_files(pid);

    // A hundred at a time: far faster than the body timeout lets connections go.
    let flood = tokio::spawn(async move {
        let mut held = Vec::with_capacity(ATTACKERS);
        for _ in 0..ATTACKERS / 100 {
            let batch = futures_util::future::join_all((0..100).map(|_| slow_body(target)));
            held.extend(batch.await.into_iter().flatten());
        }
        held
    });
    let mut checks = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !flood.is_finished() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the flood never ended"
        );
        checks.push(live(health.clone()).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let held = flood.await.unwrap();
    // And while the flood's connections are held (the refused ones are gone by now).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during_flood = checks.len();
    for _ in 0..10 {
        checks.push(live(health.clone()).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failed: Vec<_> = checks.iter().filter(|c| !c.0).collect();
    assert!(
        failed.is_empty(),
        "/health/live answered within 1 s throughout: {} of {} checks failed",
        failed.len(),
        checks.len()
    );
    let peak_kb = status_kb(pid, "VmHWM:");
    eprintln!(
        "flood of {ATTACKERS} ({} connected), {} health checks, slowest {:?}, \
         most open files {}, peak RSS {} MB",
        held.len(),
        checks.len(),
        checks.iter().map(|c| c.1).max().unwrap(),
        checks.iter().map(|c| c.2).max().unwrap(),
        peak_kb / 1024
    );

    // The server lets go of every flooding connection by itself: those over the budget at
    // once, without a byte; those it admitted when their body is late, with a 408.
    let connected = held.len();
    let endings = futures_util::future::join_all(held.into_iter().map(|mut stream| async move {
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer);
        tokio::time::timeout(Duration::from_secs(8), read)
            .await
            .ok()
            .map(|_| answer.starts_with(b"HTTP/1.1 408"))
    }))
    .await;
    let still_open = endings.iter().filter(|e| e.is_none()).count();
    let timed_out = endings.iter().filter(|e| **e == Some(true)).count();
    assert_eq!(
        still_open, 0,
        "of {connected}, {still_open} were still held"
    );
    assert!(timed_out >= 1, "the admitted ones were answered 408");
    // While the flood held its connections, the server kept at most its budget of 100 of
    // them open (and a few files of its own); before the budget it kept every one it could
    // accept, up to its limit of 1,024 files.
    let held = checks[during_flood..].iter().map(|c| c.2).max().unwrap();
    assert!(
        held.saturating_sub(files_before) <= 100 + 20,
        "at most the per-address budget held: {files_before} files before, {held} during"
    );

    // The flood has ended; memory goes back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_kb = status_kb(pid, "VmRSS:");
    assert!(
        rss_kb < 100 * 1024,
        "RSS back under 100 MB after the flood: {} MB",
        rss_kb / 1024
    );
    // And the service still serves everyone, the flooding address included.
    let again = reqwest::Client::new()
        .get(format!("{base_url}/health/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);

    child.kill().await.unwrap();
}
