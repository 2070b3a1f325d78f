//! TLS to PostgreSQL as libpq's `sslmode` means it (src/db/tls.rs; docs/PRODUCTION.md,
//! section 2), against a private cluster that listens on loopback TCP with a certificate of
//! a CA made here: every connection payorch opens (database creation, migrations, the pool,
//! the primary watch) is encrypted when the URL says so, `verify-full` accepts only the
//! right CA and host name, and `require` refuses a server that offers no TLS.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use diesel_async::RunQueryDsl;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use payorch::db::cluster::CLUSTER_RUNTIME_USER;
use payorch::db::{create_database_if_missing, ClusterOptions, DatabaseUrl, PrivateCluster};

use crate::helpers::{eventually, payorch_bin, temp_dir};

/// A certificate authority of its own, for one test.
fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a CA key")).expect("a CA")
}

/// A private cluster on a loopback port, serving a certificate for `localhost` alone (not
/// for 127.0.0.1) signed by its CA; stopped and removed when dropped.
pub(crate) struct TlsCluster {
    cluster: PrivateCluster,
    dir: PathBuf,
    port: u16,
    /// The PEM file of the CA that signed the server's certificate.
    pub(crate) ca_file: PathBuf,
    /// The PEM file of another CA, which signed nothing the server has.
    other_ca_file: PathBuf,
}

impl TlsCluster {
    pub(crate) async fn start(label: &str) -> TlsCluster {
        let dir = temp_dir(label);
        let options = ClusterOptions {
            data_dir: dir.clone(),
            ephemeral: true,
        };
        let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&options))
            .await
            .expect("cluster thread")
            .expect("start a cluster");
        let port = free_port();
        let ca = authority("payorch test CA");
        let server_key = KeyPair::generate().expect("a server key");
        let server_cert = CertificateParams::new(vec!["localhost".to_string()])
            .expect("server parameters")
            .signed_by(&server_key, &ca)
            .expect("a server certificate");
        let pgdata = cluster.root().join("data");
        let owner = std::fs::metadata(&pgdata).expect("the data folder");
        for (name, pem) in [
            ("server.crt", server_cert.pem()),
            ("server.key", server_key.serialize_pem()),
        ] {
            let path = pgdata.join(name);
            std::fs::write(&path, pem).expect("write a server file");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .expect("key mode");
            std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid()))
                .expect("give the server its files");
        }
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).expect("write the CA");
        let other_ca_file = dir.join("other-ca.pem");
        std::fs::write(&other_ca_file, authority("another CA").pem()).expect("write a CA");
        // Settings appended last win; initdb's pg_hba.conf already trusts 127.0.0.1.
        append_settings(
            &pgdata,
            &format!(
                "listen_addresses = '127.0.0.1'\nport = {port}\nssl = on\n\
                 ssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
            ),
        );
        let mut cluster = cluster;
        tokio::task::spawn_blocking(move || {
            cluster.stop()?;
            cluster.restart()?;
            Ok::<_, payorch::db::ClusterError>(cluster)
        })
        .await
        .expect("cluster thread")
        .map(|cluster| TlsCluster {
            cluster,
            dir,
            port,
            ca_file,
            other_ca_file,
        })
        .expect("restart the cluster on its port with TLS")
    }

    /// The superuser over the cluster's socket (no TLS there, as with libpq).
    pub(crate) fn socket_url(&self, database: &str) -> String {
        format!(
            "host='{}' port={} user=payorch dbname={database}",
            self.cluster.socket_dir().display(),
            self.port
        )
    }

    /// `user` on `host` over TCP, with `tls` appended (`sslmode=…&sslrootcert=…`).
    pub(crate) fn tcp_url(&self, user: &str, host: &str, tls: &str) -> String {
        format!("postgres://{user}@{host}:{}/payorch?{tls}", self.port)
    }

    pub(crate) fn verify_full(&self, ca: &Path) -> String {
        format!("sslmode=verify-full&sslrootcert={}", ca.display())
    }

    /// Turns TLS off (on reload, as an operator might by mistake) and waits until it is.
    async fn turn_tls_off(&self) {
        append_settings(&self.cluster.root().join("data"), "ssl = off\n");
        let mut conn = payorch::db::connect(&self.socket_url("postgres"))
            .await
            .expect("connect over the socket");
        diesel::sql_query("SELECT pg_reload_conf()")
            .execute(&mut conn)
            .await
            .expect("reload");
        let url = DatabaseUrl::parse(&self.tcp_url("payorch", "localhost", "sslmode=prefer"))
            .expect("a URL");
        assert!(
            eventually(Duration::from_secs(10), || async {
                match url.connect_client(url.config()).await {
                    Ok((client, connection)) => {
                        tokio::spawn(connection);
                        !session_is_encrypted(&client).await
                    }
                    Err(_) => false,
                }
            })
            .await,
            "the server stopped offering TLS"
        );
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let _ = self.cluster.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn append_settings(pgdata: &Path, settings: &str) {
    let path = pgdata.join("postgresql.conf");
    let mut conf = std::fs::read_to_string(&path).expect("read postgresql.conf");
    conf.push_str(settings);
    std::fs::write(&path, conf).expect("write postgresql.conf");
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

async fn session_is_encrypted(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_ssl")
        .get(0)
}

/// Whether a session opened with `url` is encrypted; the error's text when none opens.
async fn connect_with(url: &str) -> Result<bool, String> {
    let url = DatabaseUrl::parse(url)?;
    let (client, connection) = url
        .connect_client(url.config())
        .await
        .map_err(|err| format!("{err:?}"))?;
    tokio::spawn(connection);
    Ok(session_is_encrypted(&client).await)
}

/// The sessions of `application_name` on the server, and how many of them are encrypted.
pub(crate) async fn sessions_of(cluster: &TlsCluster, application_name: &str) -> (i64, i64) {
    let (client, connection) =
        tokio_postgres::connect(&cluster.socket_url("postgres"), tokio_postgres::NoTls)
            .await
            .expect("connect over the socket");
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
            &[&application_name],
        )
        .await
        .expect("pg_stat_activity");
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn every_connection_payorch_opens_is_encrypted_under_require_and_verify_full() {
    let server = TlsCluster::start("tls-all").await;
    let owner = |database: &str| {
        format!(
            "postgres://payorch@localhost:{}/{database}?{}",
            server.port,
            server.verify_full(&server.ca_file)
        )
    };
    // What `serve` does at start with a DATABASE_URL: create, migrate, as the owner.
    create_database_if_missing(&owner("postgres"), "payorch")
        .await
        .expect("create the database over TLS");
    let mut admin = payorch::db::connect(&owner("postgres"))
        .await
        .expect("the owner over verify-full");
    payorch::db::roles::create_runtime_login(&mut admin, CLUSTER_RUNTIME_USER)
        .await
        .expect("the runtime role");
    payorch::db::migrations::run_migrations(&owner("payorch"))
        .await
        .expect("migrate over TLS");

    // The pool, one host, `require`: encrypted without verifying anything.
    let require = server.tcp_url(CLUSTER_RUNTIME_USER, "127.0.0.1", "sslmode=require");
    let pool = payorch::db::build_pool(&require, &Default::default()).expect("a pool");
    let conn = pool.get().await.expect("a pooled connection");
    let (sessions, encrypted) = sessions_of(&server, "payorch").await;
    assert!(sessions >= 1, "the pool's session is there");
    assert_eq!(
        encrypted, sessions,
        "every session of the pool is encrypted"
    );
    drop(conn);
    drop(pool);

    // Several hosts: the primary watch and the pool it guides, under verify-full. The second
    // host listens nowhere: the watch finds it unreachable and the first the primary.
    let watched = format!(
        "postgres://{CLUSTER_RUNTIME_USER}@localhost:{},localhost:{}/payorch?{}",
        server.port,
        free_port(),
        server.verify_full(&server.ca_file)
    );
    let pool = payorch::db::build_pool(&watched, &Default::default()).expect("a watched pool");
    let mut conn = pool.get().await.expect("a connection to the primary");
    diesel::sql_query("SELECT 1 FROM merchants LIMIT 1")
        .execute(&mut conn)
        .await
        .expect("the runtime role reads a table through the watched pool");
    let (watch_sessions, watch_encrypted) = sessions_of(&server, "payorch-primary-watch").await;
    assert_eq!(
        (watch_sessions, watch_encrypted),
        (1, 1),
        "the watch's one session to the live host is encrypted"
    );
    let (sessions, encrypted) = sessions_of(&server, "payorch").await;
    assert!(sessions >= 1);
    assert_eq!(encrypted, sessions);
}

#[tokio::test]
async fn verify_full_takes_only_the_right_ca_and_host_and_require_refuses_a_server_without_tls() {
    let server = TlsCluster::start("tls-verify").await;
    create_database_if_missing(&server.socket_url("postgres"), "payorch")
        .await
        .expect("create the database over the socket");
    let user = "payorch";
    let right = server.verify_full(&server.ca_file);
    assert_eq!(
        connect_with(&server.tcp_url(user, "localhost", &right)).await,
        Ok(true),
        "verify-full, the CA that signed the certificate and the name it was issued for"
    );

    let wrong_ca = server.verify_full(&server.other_ca_file);
    let refused = connect_with(&server.tcp_url(user, "localhost", &wrong_ca))
        .await
        .expect_err("verify-full refuses a certificate another CA signed");
    assert!(refused.contains("UnknownIssuer"), "{refused}");

    // The certificate names localhost, not 127.0.0.1: the name is what verify-full adds.
    let refused = connect_with(&server.tcp_url(user, "127.0.0.1", &right))
        .await
        .expect_err("verify-full refuses a certificate for another name");
    assert!(refused.contains("NotValidForName"), "{refused}");
    let verify_ca = format!("sslmode=verify-ca&sslrootcert={}", server.ca_file.display());
    assert_eq!(
        connect_with(&server.tcp_url(user, "127.0.0.1", &verify_ca)).await,
        Ok(true),
        "verify-ca checks the chain, not the name"
    );
    let wrong_ca_only = format!(
        "sslmode=verify-ca&sslrootcert={}",
        server.other_ca_file.display()
    );
    assert!(
        connect_with(&server.tcp_url(user, "127.0.0.1", &wrong_ca_only))
            .await
            .is_err(),
        "verify-ca refuses another CA's certificate"
    );
    assert_eq!(
        connect_with(&server.tcp_url(user, "127.0.0.1", "sslmode=require")).await,
        Ok(true),
        "require encrypts and, without a CA file, verifies nothing (libpq's meaning)"
    );

    // A Unix socket has no TLS, and libpq does not ask for it there, verify-full or not.
    assert_eq!(
        connect_with(&format!(
            "{} sslmode=verify-full sslrootcert='{}'",
            server.socket_url("payorch"),
            server.ca_file.display()
        ))
        .await,
        Ok(false),
        "verify-full over the socket connects, in clear"
    );

    server.turn_tls_off().await;
    let refused = connect_with(&server.tcp_url(user, "localhost", "sslmode=require"))
        .await
        .expect_err("require refuses a server that offers no TLS");
    assert!(refused.contains("server does not support TLS"), "{refused}");
    assert!(
        connect_with(&server.tcp_url(user, "localhost", &right))
            .await
            .is_err(),
        "so does verify-full"
    );
    assert_eq!(
        connect_with(&server.tcp_url(user, "localhost", "sslmode=prefer")).await,
        Ok(false),
        "prefer goes on in clear, as libpq does"
    );
}

#[tokio::test]
async fn a_bad_sslmode_or_ca_file_stops_serve_and_migrate_at_start_with_the_reason() {
    let data_dir = temp_dir("tls-start");
    let ca = data_dir.join("missing-ca.pem");
    // Port 1: nothing is ever reached; the URL is refused before any connection.
    let cases = [
        (
            "sslmode=requre".to_string(),
            "sslmode `requre` is not one payorch knows",
        ),
        (
            "sslmode=verify-full".to_string(),
            "sslmode=verify-full needs sslrootcert",
        ),
        (
            format!("sslmode=verify-ca&sslrootcert={}", ca.display()),
            "missing-ca.pem",
        ),
    ];
    for (tls, reason) in &cases {
        for command in ["migrate", "serve"] {
            let out = tokio::process::Command::new(payorch_bin())
                .arg(command)
                .arg("--data-dir")
                .arg(&data_dir)
                .env(
                    "DATABASE_URL",
                    format!("postgres://payorch@127.0.0.1:1/payorch?{tls}"),
                )
                .env_remove("PAYORCH_MIGRATION_DATABASE_URL")
                .output()
                .await
                .expect("run payorch");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{command} with {tls}: {stderr}");
            assert!(stderr.contains(reason), "{command} with {tls}: {stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test]
async fn serve_migrates_as_the_owner_and_serves_as_the_runtime_role_both_over_verify_full() {
    let server = TlsCluster::start("tls-serve").await;
    create_database_if_missing(&server.socket_url("postgres"), "payorch")
        .await
        .expect("create the database");
    let mut admin = payorch::db::connect(&server.socket_url("postgres"))
        .await
        .expect("the superuser");
    payorch::db::roles::create_runtime_login(&mut admin, CLUSTER_RUNTIME_USER)
        .await
        .expect("the runtime role");
    let tls = server.verify_full(&server.ca_file);
    let data_dir = temp_dir("tls-serve-data");
    let mut serve = tokio::process::Command::new(payorch_bin())
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "1"])
        .arg("--data-dir")
        .arg(&data_dir)
        .env(
            "DATABASE_URL",
            server.tcp_url(CLUSTER_RUNTIME_USER, "localhost", &tls),
        )
        .env(
            "PAYORCH_MIGRATION_DATABASE_URL",
            server.tcp_url("payorch", "localhost", &tls),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch serve");
    let creds = crate::serve::wait_ready(&data_dir, "").await;
    let ready: serde_json::Value = reqwest::get(format!("{}/health/ready", creds.base_url))
        .await
        .expect("ready")
        .json()
        .await
        .expect("a JSON body");
    assert_eq!(ready["database_role"], "owns_nothing", "{ready}");
    let (sessions, encrypted) = sessions_of(&server, "payorch").await;
    assert!(sessions >= 1, "serve's pool is connected");
    assert_eq!(
        encrypted, sessions,
        "every session of serve's pool is encrypted"
    );
    let (client, connection) =
        tokio_postgres::connect(&server.socket_url("payorch"), tokio_postgres::NoTls)
            .await
            .expect("connect over the socket");
    tokio::spawn(connection);
    let owners: Vec<String> = client
        .query(
            "SELECT DISTINCT tableowner::text FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .await
        .expect("the tables' owners")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(owners, ["payorch"], "the migrations ran as the owner");
    serve.kill().await.expect("stop serve");
    let _ = std::fs::remove_dir_all(&data_dir);
}
