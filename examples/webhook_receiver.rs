//! A receiver of payorch's events, written to be copied: the merchant's side of a webhook
//! delivery (docs/guides/events.md, "Events and webhook endpoints").
//!
//! ```text
//! cargo run --example webhook_receiver -- \
//!     --listen 127.0.0.1:8090 \
//!     --database-url 'postgres://shop@localhost/shop' \
//!     --secret whsec_…        # the `secret` that POST /v1/webhook_endpoints answered
//! ```
//!
//! (or `RECEIVER_LISTEN`, `RECEIVER_DATABASE_URL`, `WEBHOOK_SECRET`). It answers
//! `POST /webhooks/payorch` and does three things, in this order:
//!
//! 1. **Verifies** the delivery as the Standard Webhooks specification v1 says: an HMAC-SHA256
//!    of `"{webhook-id}.{webhook-timestamp}.{raw body}"` under the secret's base64-decoded
//!    bytes, any one of the space-separated `v1,…` signatures matching, compared in constant
//!    time, and a timestamp within five minutes of our clock. This is its own code on
//!    `hmac`, `sha2` and `base64` alone, not payorch's signer: a receiver that shared the
//!    sender's code would agree with it even where both are wrong.
//! 2. **Applies it once**, as an inbox: the `webhook-id` is recorded in `received_webhooks`
//!    in the same transaction as the effect (here, the latest known state of each payment,
//!    order and refund in `known_objects`). payorch delivers at least once — a crash in the
//!    middle of a send sends again — so a second copy finds its id taken and changes nothing;
//!    and if the effect fails, the id is not recorded either, and payorch's retry applies it.
//! 3. **Orders by the object, not by arrival**: events are not delivered in order, so an
//!    event only replaces what we know when its object's `updated_at` is newer (on a tie, a
//!    final status wins: a final status never changes).
//!
//! It answers at once — one short transaction, nothing slow — because payorch waits 15 s for
//! an answer and counts anything slower as failed. Work that takes time (an e-mail, a
//! shipment) belongs in a job that reads `known_objects`, not in the request.
//!
//! Which answer when, and why:
//! - `200` for an applied event, for an older one that changed nothing (`stale`), for a type
//!   this receiver does not handle (`ignored`: new types must not break it), and for a
//!   duplicate. Any 2xx ends payorch's retries for that delivery.
//! - `401` when the delivery cannot be authenticated: a header missing, no signature that
//!   matches, or a timestamp outside the tolerance (a replay, or a clock that is off).
//!   It is logged, and payorch keeps retrying for about three days, so a receiver whose
//!   secret was wrong (say, after a rotation) gets every event once it has the right one.
//!   Never `410` here: payorch disables an endpoint that answers `410`.
//! - `400` for a delivery that is authentic but that this receiver cannot read.
//! - `500` when our database fails: the transaction rolled back, payorch retries.

use std::net::{SocketAddr, TcpListener};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use chrono::{DateTime, Utc};
use clap::Parser;
use diesel::sql_types::{Bool, Text, Timestamptz};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};
use serde::Deserialize;
use serde_json::{json, Value};

use payorch::db::PgConn;

#[derive(Debug, Parser)]
#[command(about = "Receives payorch's events: verifies, deduplicates, applies in order.")]
struct Args {
    /// Where to listen.
    #[arg(long, env = "RECEIVER_LISTEN", default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The receiver's own database (not payorch's): its two tables are created at start.
    #[arg(long, env = "RECEIVER_DATABASE_URL")]
    database_url: String,
    /// The endpoint's secret, `whsec_<base64>`. Give it twice (or space-separated in the
    /// variable) while moving from one secret to another: any of them verifies.
    #[arg(
        long = "secret",
        env = "WEBHOOK_SECRET",
        value_delimiter = ' ',
        required = true
    )]
    secrets: Vec<String>,
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let receiver = Receiver::connect(&args.database_url, &args.secrets).await?;
    let listener = TcpListener::bind(args.listen)?;
    tracing::info!(listen = %args.listen, "receiving payorch's events at POST /webhooks/payorch");
    serve(listener, receiver, None)?.await?;
    Ok(())
}

/// Runs the receiver on `listener` (`workers`: actix-web's default, one per core, if `None`).
fn serve(
    listener: TcpListener,
    receiver: Receiver,
    workers: Option<usize>,
) -> std::io::Result<actix_web::dev::Server> {
    let receiver = web::Data::new(receiver);
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(receiver.clone())
            // The body is read as raw bytes: the signature is over the bytes as sent, and JSON
            // parsed and written again would not match them.
            .app_data(web::PayloadConfig::new(1024 * 1024))
            .route("/webhooks/payorch", web::post().to(receive))
    })
    .listen(listener)?;
    if let Some(workers) = workers {
        server = server.workers(workers);
    }
    Ok(server.run())
}

/// What the handler needs: the secrets and the database.
struct Receiver {
    secrets: Vec<signature::Secret>,
    pool: Pool<PgConn>,
}

impl Receiver {
    /// Checks the secrets, connects, and creates the receiver's tables if they are missing.
    async fn connect(
        database_url: &str,
        secrets: &[String],
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let secrets = secrets
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| signature::Secret::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        if secrets.is_empty() {
            return Err("no webhook secret given".into());
        }
        let mut conn = PgConn::establish(database_url).await?;
        conn.batch_execute(SCHEMA).await?;
        let manager = AsyncDieselConnectionManager::<PgConn>::new(database_url);
        let pool = Pool::builder(manager).max_size(8).build()?;
        Ok(Receiver { secrets, pool })
    }
}

/// The receiver's own tables. `received_webhooks` is the inbox: one row per `webhook-id`
/// ever applied. `known_objects` is this example's effect: the newest state of each object.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS received_webhooks (
    webhook_id  text        PRIMARY KEY,
    event_type  text        NOT NULL,
    -- applied | stale (an older state than we knew) | ignored (a type we do not handle)
    outcome     text        NOT NULL,
    -- Copies that came again after the first; each changed nothing.
    duplicates  integer     NOT NULL DEFAULT 0,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS known_objects (
    id              text        PRIMARY KEY,  -- pay_…, ord_…, re_…
    object          text        NOT NULL,     -- payment, order, refund
    status          text        NOT NULL,
    final           boolean     NOT NULL,
    updated_at      timestamptz NOT NULL,
    last_event_id   text        NOT NULL,
    last_event_type text        NOT NULL,
    -- How many events changed this row: each event at most once.
    applied_events  integer     NOT NULL DEFAULT 1,
    body            jsonb       NOT NULL
);
";

/// `POST /webhooks/payorch`.
async fn receive(
    request: HttpRequest,
    body: web::Bytes,
    receiver: web::Data<Receiver>,
) -> HttpResponse {
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let now = Utc::now().timestamp();
    let verified = signature::verify(
        &receiver.secrets,
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
        &body,
        now,
    );
    let webhook_id = match verified {
        Ok(id) => id,
        Err(refused) => {
            // Logged without the secret or the body: the id and why are enough to look for
            // the delivery in payorch (GET /v1/events/{id}).
            tracing::warn!(webhook_id = ?header("webhook-id"), reason = %refused, "refused a delivery");
            return HttpResponse::Unauthorized()
                .json(json!({ "error": "signature_invalid", "reason": refused.to_string() }));
        }
    };
    let event: Envelope = match serde_json::from_slice(&body) {
        Ok(event) => event,
        Err(err) => {
            tracing::warn!(%webhook_id, error = %err, "an authentic delivery we cannot read");
            return HttpResponse::BadRequest().json(json!({ "error": "unreadable_event" }));
        }
    };
    if event.id != webhook_id {
        tracing::warn!(%webhook_id, event_id = %event.id, "the body's id is not the webhook-id");
        return HttpResponse::BadRequest().json(json!({ "error": "id_mismatch" }));
    }
    match record(&receiver.pool, &event).await {
        Ok(Recorded::Duplicate) => {
            tracing::info!(%webhook_id, "duplicate delivery: already applied");
            HttpResponse::Ok().json(json!({ "received": true, "duplicate": true }))
        }
        Ok(Recorded::New(outcome)) => {
            tracing::info!(%webhook_id, r#type = %event.event_type, outcome, "received");
            HttpResponse::Ok()
                .json(json!({ "received": true, "duplicate": false, "outcome": outcome }))
        }
        Err(err) => {
            tracing::error!(%webhook_id, error = %err, "could not record the event; payorch will retry");
            HttpResponse::InternalServerError().json(json!({ "error": "try_again" }))
        }
    }
}

/// The fields of an event this receiver reads; the rest of the body is kept as it came.
#[derive(Debug, Deserialize)]
struct Envelope {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    data: EventData,
}

#[derive(Debug, Deserialize)]
struct EventData {
    object: Value,
}

/// The part of a payment, order or refund that orders its versions.
#[derive(Debug, Deserialize)]
struct Versioned {
    id: String,
    object: String,
    status: String,
    updated_at: DateTime<Utc>,
}

impl Versioned {
    /// A final status never changes again, so it may win a tie of `updated_at`.
    fn is_final(&self) -> bool {
        match self.object.as_str() {
            "payment" | "refund" => matches!(self.status.as_str(), "succeeded" | "failed"),
            "order" => matches!(self.status.as_str(), "canceled" | "refunded"),
            _ => false,
        }
    }
}

enum Recorded {
    Duplicate,
    New(&'static str),
}

#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error(transparent)]
    Pool(#[from] diesel_async::pooled_connection::deadpool::PoolError),
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

/// Records the event's id and applies it, in one transaction: both or neither.
async fn record(pool: &Pool<PgConn>, event: &Envelope) -> Result<Recorded, RecordError> {
    let mut conn = pool.get().await?;
    let recorded = conn
        .transaction(async |conn| -> Result<Recorded, diesel::result::Error> {
            // Taking the id first: a copy arriving at the same instant waits here for our
            // commit, then finds the id taken.
            let taken = diesel::sql_query(
                "INSERT INTO received_webhooks (webhook_id, event_type, outcome)
                 VALUES ($1, $2, 'pending') ON CONFLICT (webhook_id) DO NOTHING",
            )
            .bind::<Text, _>(&event.id)
            .bind::<Text, _>(&event.event_type)
            .execute(conn)
            .await?;
            if taken == 0 {
                diesel::sql_query(
                    "UPDATE received_webhooks SET duplicates = duplicates + 1 WHERE webhook_id = $1",
                )
                .bind::<Text, _>(&event.id)
                .execute(conn)
                .await?;
                return Ok(Recorded::Duplicate);
            }
            let outcome = apply(conn, event).await?;
            diesel::sql_query("UPDATE received_webhooks SET outcome = $2 WHERE webhook_id = $1")
                .bind::<Text, _>(&event.id)
                .bind::<Text, _>(outcome)
                .execute(conn)
                .await?;
            Ok(Recorded::New(outcome))
        })
        .await?;
    Ok(recorded)
}

/// The effect: the object as the event shows it replaces what we knew only if it is newer.
async fn apply(conn: &mut PgConn, event: &Envelope) -> Result<&'static str, diesel::result::Error> {
    // Every type payorch sends today is about a payment, an order or a refund; a type added
    // later, or an object without these fields, is acknowledged and left alone.
    let Ok(object) = Versioned::deserialize(&event.data.object) else {
        return Ok("ignored");
    };
    if !matches!(object.object.as_str(), "payment" | "order" | "refund") {
        return Ok("ignored");
    }
    let changed = diesel::sql_query(
        "INSERT INTO known_objects AS known
             (id, object, status, final, updated_at, last_event_id, last_event_type, body)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
         ON CONFLICT (id) DO UPDATE SET
             status = EXCLUDED.status,
             final = EXCLUDED.final,
             updated_at = EXCLUDED.updated_at,
             last_event_id = EXCLUDED.last_event_id,
             last_event_type = EXCLUDED.last_event_type,
             applied_events = known.applied_events + 1,
             body = EXCLUDED.body
         WHERE known.updated_at < EXCLUDED.updated_at
            OR (known.updated_at = EXCLUDED.updated_at AND NOT known.final AND EXCLUDED.final)",
    )
    .bind::<Text, _>(&object.id)
    .bind::<Text, _>(&object.object)
    .bind::<Text, _>(&object.status)
    .bind::<Bool, _>(object.is_final())
    .bind::<Timestamptz, _>(object.updated_at)
    .bind::<Text, _>(&event.id)
    .bind::<Text, _>(&event.event_type)
    .bind::<Text, _>(event.data.object.to_string())
    .execute(conn)
    .await?;
    // No row written: what we know is newer (this event came late). Not an error.
    Ok(if changed == 1 { "applied" } else { "stale" })
}

/// Standard Webhooks v1 verification, on `hmac`, `sha2` and `base64` directly.
mod signature {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    /// How far a delivery's `webhook-timestamp` may be from our clock, either way. payorch
    /// signs each attempt when it sends it, so only a replay or a wrong clock is further off.
    pub const TOLERANCE_SECONDS: i64 = 5 * 60;

    /// A secret's key: the bytes that `whsec_<base64>` encodes (not the text itself).
    pub struct Secret(Vec<u8>);

    impl Secret {
        pub fn parse(text: &str) -> Result<Self, String> {
            let encoded = text.strip_prefix("whsec_").unwrap_or(text);
            STANDARD
                .decode(encoded)
                .map(Secret)
                .map_err(|_| "a webhook secret is `whsec_` and base64".to_string())
        }
    }

    #[derive(Debug, thiserror::Error, PartialEq, Eq)]
    pub enum Refused {
        #[error("the {0} header is missing")]
        Missing(&'static str),
        #[error("webhook-timestamp is not Unix seconds")]
        BadTimestamp,
        #[error(
            "webhook-timestamp is {0} s away from our clock (tolerance {TOLERANCE_SECONDS} s)"
        )]
        OutsideTolerance(i64),
        #[error("no signature matches")]
        NoMatch,
    }

    /// Verifies a delivery; its `webhook-id` when it is authentic.
    pub fn verify(
        secrets: &[Secret],
        id: Option<&str>,
        timestamp: Option<&str>,
        signatures: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<String, Refused> {
        let id = id.ok_or(Refused::Missing("webhook-id"))?;
        let timestamp = timestamp.ok_or(Refused::Missing("webhook-timestamp"))?;
        let signatures = signatures.ok_or(Refused::Missing("webhook-signature"))?;
        // Digits only: the text signed is the header as sent, so `+5` or ` 5` must not pass
        // as 5.
        if timestamp.is_empty() || !timestamp.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Refused::BadTimestamp);
        }
        let sent_at: i64 = timestamp.parse().map_err(|_| Refused::BadTimestamp)?;
        // The signature first: only then is the timestamp the sender's and not anyone's.
        let authentic = secrets.iter().any(|secret| {
            let mut mac = Hmac::<Sha256>::new_from_slice(&secret.0).expect("HMAC takes any key");
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.as_bytes());
            mac.update(b".");
            mac.update(body);
            // After a rotation payorch sends one signature per secret, space-separated; an
            // entry of another version than v1 is skipped, as the specification says.
            signatures.split(' ').any(|entry| {
                let Some(("v1", encoded)) = entry.split_once(',') else {
                    return false;
                };
                let Ok(candidate) = STANDARD.decode(encoded) else {
                    return false;
                };
                // verify_slice compares in constant time: how much of a guess matched must
                // not show in how long the answer took.
                mac.clone().verify_slice(&candidate).is_ok()
            })
        });
        if !authentic {
            return Err(Refused::NoMatch);
        }
        let off_by = now - sent_at;
        if off_by.abs() > TOLERANCE_SECONDS {
            return Err(Refused::OutsideTolerance(off_by));
        }
        Ok(id.to_string())
    }
}

/// The receiver run for real: a real PostgreSQL (payorch's private-cluster launcher, or the
/// server of `DATABASE_URL`), a database of its own per test, the server on port 0, and
/// deliveries posted over HTTP, signed as payorch signs them.
#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use diesel::QueryableByName;
    use serde_json::json;

    use super::*;

    /// A secret as payorch hands one out: `whsec_` and the base64 of random bytes.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const OTHER_SECRET: &str = "whsec_dGhpcyBpcyBub3QgdGhlIHNlY3JldCBhdCBhbGw=";

    /// `v1,<signature>` of a delivery under `secret`, by payorch's own signer: the receiver's
    /// code above shares nothing with it.
    fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
        payorch::events::signing::Secret::parse(secret)
            .expect("a test secret")
            .sign(id, timestamp, body)
    }

    /// The admin URL of the test server: `DATABASE_URL`, or a private cluster of this test
    /// binary's own, stopped and removed when the process exits.
    fn server_url() -> &'static str {
        static URL: OnceLock<String> = OnceLock::new();
        static CLUSTER: OnceLock<payorch::db::PrivateCluster> = OnceLock::new();
        extern "C" fn stop_cluster() {
            if let Some(cluster) = CLUSTER.get() {
                let _ = cluster.stop();
                if let Some(dir) = cluster.root().parent() {
                    let _ = std::fs::remove_dir_all(dir);
                }
            }
        }
        URL.get_or_init(|| {
            if let Ok(url) = std::env::var("DATABASE_URL") {
                return url;
            }
            // The temp dir: reachable by the `postgres` user when tests run as root, and
            // short enough for the socket's path. Named like tests/api's clusters, so a run
            // that died before its exit hook is cleaned up by theirs.
            let data_dir = std::env::temp_dir().join(format!(
                "payorch-test-{}-webhook-receiver-{}",
                std::process::id(),
                uuid::Uuid::now_v7().simple()
            ));
            let cluster = payorch::db::PrivateCluster::start(&payorch::db::ClusterOptions {
                data_dir,
                ephemeral: true,
            })
            .expect("start the test cluster");
            let url = cluster.database_url("postgres");
            CLUSTER.set(cluster).expect("one cluster");
            // SAFETY: registers a plain function to run at process exit.
            unsafe { libc::atexit(stop_cluster) };
            url
        })
    }

    /// `url` with its database replaced by `name` (a libpq key-value string or a URL).
    fn url_of(url: &str, name: &str) -> String {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let (base, query) = url
                .split_once('?')
                .map_or((url, None), |(b, q)| (b, Some(q)));
            let scheme_end = base.find("://").expect("a scheme") + 3;
            let host_end = base[scheme_end..]
                .find('/')
                .map_or(base.len(), |i| i + scheme_end);
            let query = query.map(|q| format!("?{q}")).unwrap_or_default();
            return format!("{}/{name}{query}", &base[..host_end]);
        }
        let mut parts: Vec<String> = url
            .split_whitespace()
            .filter(|part| !part.starts_with("dbname="))
            .map(str::to_string)
            .collect();
        parts.push(format!("dbname={name}"));
        parts.join(" ")
    }

    /// One test's receiver: its own empty database, the server on port 0.
    struct Running {
        base: String,
        database_url: String,
        database: String,
        client: reqwest::Client,
        handle: actix_web::dev::ServerHandle,
    }

    impl Running {
        async fn start() -> Self {
            let admin_url = server_url();
            let database = format!("webhook_receiver_{}", uuid::Uuid::now_v7().simple());
            let mut admin = PgConn::establish(admin_url)
                .await
                .expect("connect to the test server");
            diesel::sql_query(format!("CREATE DATABASE {database}"))
                .execute(&mut admin)
                .await
                .expect("create the test database");
            let database_url = url_of(admin_url, &database);
            let receiver = Receiver::connect(&database_url, &[SECRET.to_string()])
                .await
                .expect("start the receiver");
            let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
            let base = format!("http://{}", listener.local_addr().expect("its address"));
            let server = serve(listener, receiver, Some(1)).expect("serve");
            let handle = server.handle();
            actix_web::rt::spawn(server);
            Running {
                base,
                database_url,
                database,
                client: reqwest::Client::new(),
                handle,
            }
        }

        /// Posts `body` with these headers; the answer's status and JSON.
        async fn post(&self, headers: &[(&str, String)], body: &[u8]) -> (u16, Value) {
            let mut request = self
                .client
                .post(format!("{}/webhooks/payorch", self.base))
                .header("content-type", "application/json")
                .body(body.to_vec());
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            let response = request.send().await.expect("the receiver answers");
            let status = response.status().as_u16();
            (status, response.json().await.expect("a JSON answer"))
        }

        /// Posts `body` as payorch delivers event `id`: signed now under `SECRET`.
        async fn deliver(&self, id: &str, body: &[u8]) -> (u16, Value) {
            let now = Utc::now().timestamp();
            self.post(&signed(SECRET, id, now, body), body).await
        }

        async fn connect(&self) -> PgConn {
            PgConn::establish(&self.database_url)
                .await
                .expect("connect to the test database")
        }

        async fn inbox(&self, id: &str) -> Option<(String, i32)> {
            #[derive(QueryableByName)]
            struct Row {
                #[diesel(sql_type = Text)]
                outcome: String,
                #[diesel(sql_type = diesel::sql_types::Integer)]
                duplicates: i32,
            }
            let rows: Vec<Row> = diesel::sql_query(
                "SELECT outcome, duplicates FROM received_webhooks WHERE webhook_id = $1",
            )
            .bind::<Text, _>(id)
            .load(&mut self.connect().await)
            .await
            .expect("read the inbox");
            rows.into_iter().next().map(|r| (r.outcome, r.duplicates))
        }

        async fn inbox_size(&self) -> i64 {
            #[derive(QueryableByName)]
            struct Row {
                #[diesel(sql_type = diesel::sql_types::BigInt)]
                rows: i64,
            }
            diesel::sql_query("SELECT count(*) AS rows FROM received_webhooks")
                .load::<Row>(&mut self.connect().await)
                .await
                .expect("count the inbox")[0]
                .rows
        }

        /// What the receiver knows of object `id`: status, last event, events applied.
        async fn known(&self, id: &str) -> Option<(String, String, i32)> {
            #[derive(QueryableByName)]
            struct Row {
                #[diesel(sql_type = Text)]
                status: String,
                #[diesel(sql_type = Text)]
                last_event_id: String,
                #[diesel(sql_type = diesel::sql_types::Integer)]
                applied_events: i32,
            }
            let rows: Vec<Row> = diesel::sql_query(
                "SELECT status, last_event_id, applied_events FROM known_objects WHERE id = $1",
            )
            .bind::<Text, _>(id)
            .load(&mut self.connect().await)
            .await
            .expect("read known_objects");
            rows.into_iter()
                .next()
                .map(|r| (r.status, r.last_event_id, r.applied_events))
        }

        async fn stop(self) {
            self.handle.stop(true).await;
            let mut admin = PgConn::establish(server_url())
                .await
                .expect("connect to the test server");
            diesel::sql_query(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.database
            ))
            .execute(&mut admin)
            .await
            .expect("drop the test database");
        }
    }

    /// The three headers of a delivery signed under `secret` at `timestamp`.
    fn signed(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
        vec![
            ("webhook-id", id.to_string()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", sign(secret, id, timestamp, body)),
        ]
    }

    fn new_id(prefix: &str) -> String {
        format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
    }

    /// An event's body as payorch sends it, about payment `payment_id` in `status` as of
    /// `updated_at`.
    fn payment_event(id: &str, payment_id: &str, status: &str, updated_at: &str) -> Vec<u8> {
        let event_type = match status {
            "succeeded" => "payment.succeeded",
            "failed" => "payment.failed",
            _ => "payment.pending",
        };
        serde_json::to_vec(&json!({
            "id": id,
            "object": "event",
            "type": event_type,
            "created": Utc::now().timestamp(),
            "data": { "object": {
                "id": payment_id,
                "object": "payment",
                "merchant_id": new_id("mer"),
                "order_id": new_id("ord"),
                "status": status,
                "amount": 1250,
                "currency": "EUR",
                "payment_method": "pm_card_visa",
                "provider": "stripe",
                "provider_idempotency_key": new_id("pik"),
                "provider_payment_id": null,
                "failure_code": null,
                "failure_message": null,
                "next_check_at": null,
                "created_at": "2026-11-24T10:00:00.000000Z",
                "updated_at": updated_at,
                "finished_at": null,
                "amount_refunded": 0,
                "refunds": []
            }},
            "request": { "id": "req_test", "idempotency_key": "key-1" }
        }))
        .expect("JSON")
    }

    #[actix_web::test]
    async fn a_delivery_is_applied_once_and_its_copy_is_counted_as_a_duplicate() {
        let receiver = Running::start().await;
        let (event, payment) = (new_id("evt"), new_id("pay"));
        let body = payment_event(&event, &payment, "succeeded", "2026-11-24T10:00:01.000000Z");

        let (status, answer) = receiver.deliver(&event, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["duplicate"], false);
        assert_eq!(answer["outcome"], "applied");
        assert_eq!(
            receiver.known(&payment).await,
            Some(("succeeded".into(), event.clone(), 1))
        );

        // payorch sends again (it did not see our answer): a new timestamp and signature,
        // the same webhook-id.
        let (status, answer) = receiver.deliver(&event, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["duplicate"], true);
        assert_eq!(receiver.inbox(&event).await, Some(("applied".into(), 1)));
        assert_eq!(
            receiver.known(&payment).await,
            Some(("succeeded".into(), event.clone(), 1)),
            "the copy changed nothing"
        );
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn copies_arriving_at_once_are_applied_once() {
        let receiver = Running::start().await;
        let (event, payment) = (new_id("evt"), new_id("pay"));
        let body = payment_event(&event, &payment, "pending", "2026-11-24T10:00:01.000000Z");
        let answers =
            futures_util::future::join_all((0..8).map(|_| receiver.deliver(&event, &body))).await;
        assert!(
            answers.iter().all(|(status, _)| *status == 200),
            "{answers:?}"
        );
        let firsts = answers
            .iter()
            .filter(|(_, answer)| answer["duplicate"] == false)
            .count();
        assert_eq!(firsts, 1, "{answers:?}");
        assert_eq!(receiver.inbox(&event).await, Some(("applied".into(), 7)));
        assert_eq!(
            receiver.known(&payment).await,
            Some(("pending".into(), event.clone(), 1))
        );
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn a_bad_signature_is_refused_and_nothing_is_recorded() {
        let receiver = Running::start().await;
        let (event, payment) = (new_id("evt"), new_id("pay"));
        let body = payment_event(&event, &payment, "succeeded", "2026-11-24T10:00:01.000000Z");
        let now = Utc::now().timestamp();

        // Signed under another secret.
        let (status, answer) = receiver
            .post(&signed(OTHER_SECRET, &event, now, &body), &body)
            .await;
        assert_eq!(status, 401, "{answer}");
        assert_eq!(answer["reason"], "no signature matches");

        // Signed right, then the body changed.
        let mut headers = signed(SECRET, &event, now, &body);
        let tampered = payment_event(&event, &payment, "failed", "2026-11-24T10:00:01.000000Z");
        let (status, _) = receiver.post(&headers, &tampered).await;
        assert_eq!(status, 401);

        // Signed right, then another webhook-id put on it.
        headers[0].1 = new_id("evt");
        let (status, _) = receiver.post(&headers, &body).await;
        assert_eq!(status, 401);

        // No signature at all.
        let (status, answer) = receiver.post(&headers[..2], &body).await;
        assert_eq!(status, 401);
        assert_eq!(answer["reason"], "the webhook-signature header is missing");

        assert_eq!(receiver.inbox_size().await, 0);
        assert_eq!(receiver.known(&payment).await, None);
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn a_timestamp_outside_the_tolerance_is_refused_even_when_signed() {
        let receiver = Running::start().await;
        let (event, payment) = (new_id("evt"), new_id("pay"));
        let body = payment_event(&event, &payment, "succeeded", "2026-11-24T10:00:01.000000Z");
        let now = Utc::now().timestamp();
        // A delivery recorded an hour ago and replayed; and one from a clock an hour ahead.
        for timestamp in [now - 3600, now + 3600] {
            let (status, answer) = receiver
                .post(&signed(SECRET, &event, timestamp, &body), &body)
                .await;
            assert_eq!(status, 401, "{answer}");
            assert!(
                answer["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("away from our clock")),
                "{answer}"
            );
        }
        assert_eq!(receiver.inbox_size().await, 0);
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn an_older_event_arriving_late_does_not_overwrite_a_newer_status() {
        let receiver = Running::start().await;
        let payment = new_id("pay");
        let (pending, succeeded) = (new_id("evt"), new_id("evt"));
        let pending_body =
            payment_event(&pending, &payment, "pending", "2026-11-24T10:00:01.000000Z");
        let succeeded_body = payment_event(
            &succeeded,
            &payment,
            "succeeded",
            "2026-11-24T10:00:02.000000Z",
        );

        // The newer event first, the older one after it.
        let (_, answer) = receiver.deliver(&succeeded, &succeeded_body).await;
        assert_eq!(answer["outcome"], "applied");
        let (status, answer) = receiver.deliver(&pending, &pending_body).await;
        assert_eq!(
            status, 200,
            "acknowledged, or payorch would send it again: {answer}"
        );
        assert_eq!(answer["outcome"], "stale");
        assert_eq!(
            receiver.known(&payment).await,
            Some(("succeeded".into(), succeeded.clone(), 1))
        );
        assert_eq!(receiver.inbox(&pending).await, Some(("stale".into(), 0)));

        // In order, the newer one replaces the older.
        let other = new_id("pay");
        let (first, second) = (new_id("evt"), new_id("evt"));
        receiver
            .deliver(
                &first,
                &payment_event(&first, &other, "pending", "2026-11-24T10:00:01.000000Z"),
            )
            .await;
        let (_, answer) = receiver
            .deliver(
                &second,
                &payment_event(&second, &other, "failed", "2026-11-24T10:00:02.000000Z"),
            )
            .await;
        assert_eq!(answer["outcome"], "applied");
        assert_eq!(
            receiver.known(&other).await,
            Some(("failed".into(), second, 2))
        );
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn on_a_tie_of_updated_at_the_final_status_wins() {
        let receiver = Running::start().await;
        let at = "2026-11-24T10:00:01.000000Z";
        let (early_final, late_final) = (new_id("pay"), new_id("pay"));

        // Final first: the pending of the same instant does not undo it.
        let (a, b) = (new_id("evt"), new_id("evt"));
        receiver
            .deliver(&a, &payment_event(&a, &early_final, "succeeded", at))
            .await;
        let (_, answer) = receiver
            .deliver(&b, &payment_event(&b, &early_final, "pending", at))
            .await;
        assert_eq!(answer["outcome"], "stale");
        assert_eq!(
            receiver.known(&early_final).await,
            Some(("succeeded".into(), a, 1))
        );

        // Pending first: the final of the same instant replaces it.
        let (c, d) = (new_id("evt"), new_id("evt"));
        receiver
            .deliver(&c, &payment_event(&c, &late_final, "pending", at))
            .await;
        let (_, answer) = receiver
            .deliver(&d, &payment_event(&d, &late_final, "succeeded", at))
            .await;
        assert_eq!(answer["outcome"], "applied");
        assert_eq!(
            receiver.known(&late_final).await,
            Some(("succeeded".into(), d, 2))
        );
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn after_a_rotation_one_matching_signature_of_several_is_enough() {
        let receiver = Running::start().await;
        let payment = new_id("pay");
        let now = Utc::now().timestamp();
        // payorch signs with the old and the new secret; this receiver knows one of them.
        // Ours second, ours first, and beside an entry of a version it does not know.
        let shapes: [fn(String, String) -> String; 3] = [
            |ours, theirs| format!("{theirs} {ours}"),
            |ours, theirs| format!("{ours} {theirs}"),
            |ours, _| format!("v2,bm90IGEgdjEgc2lnbmF0dXJl {ours}"),
        ];
        for shape in shapes {
            let event = new_id("evt");
            let body = payment_event(&event, &payment, "succeeded", "2026-11-24T10:00:01.000000Z");
            let header = shape(
                sign(SECRET, &event, now, &body),
                sign(OTHER_SECRET, &event, now, &body),
            );
            let headers = vec![
                ("webhook-id", event.clone()),
                ("webhook-timestamp", now.to_string()),
                ("webhook-signature", header.clone()),
            ];
            let (status, answer) = receiver.post(&headers, &body).await;
            assert_eq!(status, 200, "{header}: {answer}");
            assert_eq!(receiver.inbox(&event).await.map(|(_, d)| d), Some(0));
        }
        // Only signatures under secrets it does not know: refused.
        let event = new_id("evt");
        let body = payment_event(&event, &payment, "succeeded", "2026-11-24T10:00:01.000000Z");
        let third = "whsec_YW5vdGhlciBzZWNyZXQsIG5vdCBvdXJz";
        let headers = vec![
            ("webhook-id", event.clone()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                format!(
                    "{} {}",
                    sign(OTHER_SECRET, &event, now, &body),
                    sign(third, &event, now, &body)
                ),
            ),
        ];
        assert_eq!(receiver.post(&headers, &body).await.0, 401);
        receiver.stop().await;
    }

    /// The header as payorch's signer writes it while a rotation's old secret still signs: a
    /// receiver that has only the old secret keeps verifying until the old one stops.
    #[actix_web::test]
    async fn payorchs_header_during_a_rotation_verifies_under_the_old_secret() {
        use payorch::events::signing::{Secret, SigningSecrets};
        let receiver = Running::start().await;
        let now = Utc::now();
        let secrets = SigningSecrets {
            current: Secret::parse(OTHER_SECRET).expect("the new secret"),
            previous: Some((
                Secret::parse(SECRET).expect("the old one, the receiver's"),
                now + chrono::Duration::hours(24),
            )),
        };
        let deliver = |signing_time: DateTime<Utc>| {
            let event = new_id("evt");
            let body = payment_event(&event, &new_id("pay"), "pending", "2026-11-24T10:00:01Z");
            let timestamp = now.timestamp();
            let headers = vec![
                ("webhook-id", event.clone()),
                ("webhook-timestamp", timestamp.to_string()),
                (
                    "webhook-signature",
                    secrets.header(&event, timestamp, &body, signing_time),
                ),
            ];
            (headers, body)
        };
        let (headers, body) = deliver(now);
        assert_eq!(headers[2].1.split(' ').count(), 2, "{}", headers[2].1);
        let (status, answer) = receiver.post(&headers, &body).await;
        assert_eq!(status, 200, "{answer}");
        // Once the old secret has stopped signing, only the new one's signature is sent.
        let (headers, body) = deliver(now + chrono::Duration::hours(25));
        assert_eq!(headers[2].1.split(' ').count(), 1, "{}", headers[2].1);
        let (status, answer) = receiver.post(&headers, &body).await;
        assert_eq!(status, 401, "{answer}");
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn a_type_it_does_not_handle_is_acknowledged_and_left_alone() {
        let receiver = Running::start().await;
        let event = new_id("evt");
        let body = serde_json::to_vec(&json!({
            "id": event, "object": "event", "type": "payout.paid", "created": 0,
            "data": { "object": { "id": "po_1", "object": "payout" } }, "request": null
        }))
        .expect("JSON");
        let (status, answer) = receiver.deliver(&event, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["outcome"], "ignored");
        assert_eq!(receiver.inbox(&event).await, Some(("ignored".into(), 0)));
        receiver.stop().await;
    }

    #[actix_web::test]
    async fn a_restart_finds_its_tables_and_its_inbox() {
        let receiver = Running::start().await;
        let (event, payment) = (new_id("evt"), new_id("pay"));
        let body = payment_event(&event, &payment, "succeeded", "2026-11-24T10:00:01.000000Z");
        receiver.deliver(&event, &body).await;
        // CREATE TABLE IF NOT EXISTS again, on the same database.
        let again = Receiver::connect(&receiver.database_url, &[SECRET.to_string()])
            .await
            .expect("start again");
        let event_again = Envelope {
            id: event.clone(),
            event_type: "payment.succeeded".into(),
            data: EventData {
                object: serde_json::from_slice::<Value>(&body).expect("JSON")["data"]["object"]
                    .clone(),
            },
        };
        assert!(matches!(
            record(&again.pool, &event_again).await,
            Ok(Recorded::Duplicate)
        ));
        receiver.stop().await;
    }

    /// The verification alone, with the clock given: the edges of the tolerance exactly.
    #[test]
    fn the_tolerance_is_five_minutes_either_way() {
        let secrets = [signature::Secret::parse(SECRET).expect("a secret")];
        let body = br#"{"id":"evt_1"}"#;
        let sent_at = 1_700_000_000;
        let header = sign(SECRET, "evt_1", sent_at, body);
        let verify = |now: i64| {
            signature::verify(
                &secrets,
                Some("evt_1"),
                Some(&sent_at.to_string()),
                Some(&header),
                body,
                now,
            )
        };
        for now in [sent_at - 300, sent_at, sent_at + 300] {
            assert_eq!(verify(now), Ok("evt_1".to_string()), "now {now}");
        }
        assert_eq!(
            verify(sent_at + 301),
            Err(signature::Refused::OutsideTolerance(301))
        );
        assert_eq!(
            verify(sent_at - 301),
            Err(signature::Refused::OutsideTolerance(-301))
        );
        let with_timestamp = |timestamp: &str| {
            signature::verify(
                &secrets,
                Some("evt_1"),
                Some(timestamp),
                Some(&header),
                body,
                sent_at,
            )
        };
        for bad in ["", "+1700000000", " 1700000000", "1.7e9", "-5"] {
            assert_eq!(
                with_timestamp(bad),
                Err(signature::Refused::BadTimestamp),
                "{bad:?}"
            );
        }
    }

    /// The example of the Standard Webhooks libraries' own test suites (their `whsec_MfKQ…`
    /// secret, `msg_p5jX…` id and `{"test": 2432232314}` body): this receiver agrees with
    /// them, and not only with the signer of the tests above.
    #[test]
    fn the_reference_vector_of_the_specification_verifies() {
        let secrets = [
            signature::Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
                .expect("the reference secret"),
        ];
        let verify = |body: &[u8]| {
            signature::verify(
                &secrets,
                Some("msg_p5jXN8AQM9LWM0D4loKWxJek"),
                Some("1614265330"),
                Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
                body,
                1614265330,
            )
        };
        assert_eq!(
            verify(br#"{"test": 2432232314}"#),
            Ok("msg_p5jXN8AQM9LWM0D4loKWxJek".to_string())
        );
        assert_eq!(
            verify(br#"{"test": 2432232315}"#),
            Err(signature::Refused::NoMatch)
        );
    }

    #[test]
    fn a_secret_is_whsec_and_base64() {
        assert!(signature::Secret::parse(SECRET).is_ok());
        assert!(signature::Secret::parse("whsec_not base64!").is_err());
    }
}
