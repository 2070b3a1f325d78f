//! History partitioned by time (docs/DESIGN.md, "History partitioned by time"): the keeper
//! makes the months ahead, a row lands in its month, a month past its retention goes when
//! its payments are final and waits while one is open, the webhook dedup holds across a
//! month boundary, and the migration takes a table with rows without changing what the API
//! answers about them.

use std::time::Duration;

use diesel::sql_types::{Bool, Text};
use diesel::QueryableByName;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::{AsyncConnection, RunQueryDsl};
use diesel_migrations::MigrationHarness;
use serde_json::Value;

use payorch::db::migrations::MIGRATIONS;
use payorch::db::partitions::{self, Family};
use payorch::db::PgConn;

use crate::helpers::{assert_refused_by, TestApp, TestConfig, TestDatabase};
use crate::payments::Route;
use crate::webhooks::event;

async fn connect(url: &str) -> PgConn {
    PgConn::establish(url).await.expect("connect")
}

async fn run_sql(conn: &mut PgConn, sql: &str) -> usize {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[derive(QueryableByName)]
struct One {
    #[diesel(sql_type = Text)]
    value: String,
}

async fn text(conn: &mut PgConn, sql: &str) -> String {
    diesel::sql_query(sql)
        .load::<One>(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .pop()
        .unwrap_or_else(|| panic!("{sql}: no row"))
        .value
}

#[derive(QueryableByName)]
struct Yes {
    #[diesel(sql_type = Bool)]
    yes: bool,
}

async fn exists(conn: &mut PgConn, relation: &str) -> bool {
    diesel::sql_query(format!(
        "SELECT to_regclass('public.{relation}') IS NOT NULL AS yes"
    ))
    .load::<Yes>(conn)
    .await
    .unwrap()[0]
        .yes
}

/// `YYYY_MM` of the month `offset` months from this one (UTC).
async fn month(conn: &mut PgConn, offset: i32) -> String {
    text(
        conn,
        &format!(
            "SELECT to_char(date_trunc('month', now(), 'UTC') + interval '{offset} months', \
             'YYYY_MM') AS value"
        ),
    )
    .await
}

/// Migrates `db` up to (not including) the migration whose name contains `stop`; returns
/// the connection's owner, as `payorch migrate` would have.
async fn migrate_until(db: &TestDatabase, stop: &'static str) {
    let conn = db.connect().await;
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<PgConn>::from(conn);
        loop {
            let pending = conn.pending_migrations(MIGRATIONS).unwrap();
            let Some(next) = <[_]>::first(&pending) else {
                return;
            };
            if next.name().to_string().contains(stop) {
                return;
            }
            conn.run_migration(next.as_ref()).unwrap();
        }
    })
    .await
    .unwrap();
}

async fn migrate_rest(db: &TestDatabase) {
    payorch::db::migrations::run_migrations(&db.url)
        .await
        .unwrap();
}

/// A database where the partitioning began `months` ago: 000031 is run, then its bound is
/// moved back (the tables are empty, so the CHECKs hold at once), and the rest migrate — the
/// legacy partitions end `months` ago and each month since has its own, as on a deployment
/// that has run that long.
async fn partitioned_months_ago(months: i32) -> TestDatabase {
    let db = TestDatabase::empty().await;
    migrate_until(&db, "000031-1_").await;
    let mut conn = db.connect().await;
    run_sql(
        &mut conn,
        &format!(
            "UPDATE history_tables SET legacy_until = date_trunc('month', now(), 'UTC') \
             - interval '{months} months'"
        ),
    )
    .await;
    run_sql(
        &mut conn,
        "DO $$
        DECLARE
            until timestamptz := (SELECT legacy_until FROM history_tables LIMIT 1);
            t record;
        BEGIN
            FOR t IN SELECT name, key_kind FROM history_tables LOOP
                EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t.name, t.name || '_legacy_bound');
                EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%s)', t.name,
                    t.name || '_legacy_bound',
                    CASE WHEN t.name = 'provider_webhooks'
                         THEN format('provider_created_at IS NOT NULL AND provider_created_at < %L::timestamptz', until)
                         WHEN t.key_kind = 'time' THEN format('created_at < %L::timestamptz', until)
                         WHEN t.name = 'merchant_events' THEN format('id < %L::uuid', history_uuid_at(until))
                         ELSE format('event_id < %L::uuid', history_uuid_at(until)) END);
            END LOOP;
        END $$",
    )
    .await;
    migrate_rest(&db).await;
    // The months the keeper made as they came (it makes last month on, not older ones).
    run_sql(
        &mut conn,
        "DO $$
        DECLARE
            m timestamptz;
            t record;
            s text;
        BEGIN
            FOR m IN SELECT generate_series((SELECT legacy_until FROM history_tables LIMIT 1),
                         date_trunc('month', now(), 'UTC') - interval '2 months', interval '1 month') LOOP
                s := to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
                FOR t IN SELECT name, key_kind FROM history_tables ORDER BY array_position(
                         ARRAY['merchant_events', 'event_deliveries', 'delivery_attempts'], name) LOOP
                    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                        t.name || '_' || s, t.name,
                        CASE t.key_kind WHEN 'event_id' THEN history_uuid_at(m)::text ELSE m::text END,
                        CASE t.key_kind WHEN 'event_id' THEN history_uuid_at(m + interval '1 month')::text
                             ELSE (m + interval '1 month')::text END);
                END LOOP;
                EXECUTE format('ALTER TABLE %I ADD FOREIGN KEY (event_id) REFERENCES %I (id) ON DELETE CASCADE',
                    'event_deliveries_' || s, 'merchant_events_' || s);
                EXECUTE format('ALTER TABLE %I ADD FOREIGN KEY (event_id, endpoint_id) REFERENCES %I (event_id, endpoint_id) ON DELETE CASCADE',
                    'delivery_attempts_' || s, 'event_deliveries_' || s);
            END LOOP;
        END $$",
    )
    .await;
    db
}

/// An app on `db` whose payments stay as they are told (no provider webhooks of its own, no
/// reconciler round): the test decides which are open.
async fn quiet_app_on(db: TestDatabase) -> TestApp {
    let mut config = TestConfig::default();
    config.sandbox.processing_ms = 3_600_000;
    config.settings.reconciler.interval = Duration::from_secs(3600);
    // The app's own keepers make the months ahead but drop nothing: the test's calls are the
    // rounds it judges.
    config.settings.event_reaper.retention = Duration::from_secs(3650 * 24 * 3600);
    config.settings.webhook_reaper.retention = Duration::from_secs(3650 * 24 * 3600);
    let app = TestApp::spawn_configured(db, config).await;
    app.sandbox.set_webhook_url(None);
    app
}

/// The uuid v7 of `id` made as if `months` months ago (its 48-bit time moved, the rest kept).
fn moved_back(id: &str, months: i32) -> String {
    moved_back_expr(&format!("'{id}'::uuid"), months)
}

/// [`moved_back`] of a uuid expression.
fn moved_back_expr(id: &str, months: i32) -> String {
    format!(
        "encode(overlay(uuid_send({id}) placing substring(int8send((extract(epoch FROM \
         (date_trunc('month', now(), 'UTC') - interval '{months} months' + interval '1 day')) \
         * 1000)::bigint) FROM 3) FROM 1 FOR 6), 'hex')::uuid"
    )
}

#[tokio::test]
async fn the_keeper_makes_the_months_ahead_once_as_the_runtime_role_and_a_row_lands_in_its_month() {
    let db = TestDatabase::migrated().await;
    let mut runtime = connect(&db.runtime_url).await;
    // The migration made them; a keeper round finds nothing to make.
    assert_eq!(
        partitions::create_ahead(&mut runtime, &partitions::TABLES)
            .await
            .unwrap(),
        0
    );
    let listed = partitions::list(&mut runtime).await.unwrap();
    let last = month(&mut runtime, partitions::MONTHS_AHEAD).await;
    for table in [
        "merchant_events",
        "event_deliveries",
        "delivery_attempts",
        "provider_webhooks",
        "attempt_transitions",
        "refund_transitions",
    ] {
        let mine: Vec<_> = listed.iter().filter(|p| p.table_name == table).collect();
        assert_eq!(
            mine[0].partition_name,
            format!("{table}_legacy"),
            "{listed:?}"
        );
        assert!(mine[0].from_at.is_none());
        assert_eq!(
            mine.last().unwrap().partition_name,
            format!("{table}_{last}"),
            "{listed:?}"
        );
    }

    // The furthest month gone (as the owner), the runtime role's keeper makes it again, with
    // its month's foreign keys; twice at once makes it once.
    let mut owner = db.connect().await;
    run_sql(
        &mut owner,
        &format!(
            "DROP TABLE delivery_attempts_{last}, event_deliveries_{last}, merchant_events_{last}, \
             provider_webhooks_{last}"
        ),
    )
    .await;
    let mut other = connect(&db.runtime_url).await;
    let (a, b) = tokio::join!(
        partitions::create_ahead(&mut runtime, &partitions::TABLES),
        partitions::create_ahead(&mut other, &partitions::TABLES)
    );
    assert_eq!(a.unwrap() + b.unwrap(), 4);
    for table in [
        "merchant_events",
        "event_deliveries",
        "delivery_attempts",
        "provider_webhooks",
    ] {
        assert!(
            exists(&mut owner, &format!("{table}_{last}")).await,
            "{table}"
        );
    }

    // A webhook dated in that month lands in its partition, through the parent.
    run_sql(
        &mut owner,
        &format!(
            "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, \
             payload, provider_created_at) VALUES (gen_random_uuid(), 'stripe', 'evt_ahead', \
             'charge.updated', 'ignored', '{{}}', date_trunc('month', now(), 'UTC') \
             + interval '{} months' + interval '3 days')",
            partitions::MONTHS_AHEAD
        ),
    )
    .await;
    let home = text(
        &mut owner,
        "SELECT tableoid::regclass::text AS value FROM provider_webhooks \
         WHERE provider_event_id = 'evt_ahead'",
    )
    .await;
    assert_eq!(home, format!("provider_webhooks_{last}"));
}

#[tokio::test]
async fn a_month_past_the_retention_goes_with_its_deliveries_when_its_payments_are_final_and_waits_while_one_is_open(
) {
    let app = quiet_app_on(partitioned_months_ago(3).await).await;
    let mut owner = app.db.connect().await;
    let (status, paid) = app.pay(Route::Checkout, "part-final", "pm_card_visa").await;
    assert_eq!(status, 201, "{paid}");
    let open = app.pending_attempt("part-open").await;

    // The events of the final payment's order, moved three months back; the open payment's,
    // two months back (by hand: the database dates an event when it writes it).
    for (order, months) in [(&paid["order_id"], 3), (&open["order_id"], 2)] {
        let order = order.as_str().unwrap().trim_start_matches("ord_");
        let order = uuid_of_prefixed(order);
        let ids: Vec<String> = diesel::sql_query(format!(
            "SELECT id::text AS value FROM merchant_events WHERE order_id = '{order}'"
        ))
        .load::<One>(&mut owner)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.value)
        .collect();
        assert!(!ids.is_empty(), "events of {order}");
        let _ = ids;
        run_sql(&mut owner, "DROP TABLE IF EXISTS moving").await;
        run_sql(
            &mut owner,
            &format!("CREATE TEMP TABLE moving AS SELECT * FROM merchant_events WHERE order_id = '{order}'"),
        )
        .await;
        run_sql(
            &mut owner,
            &format!("DELETE FROM merchant_events WHERE order_id = '{order}'"),
        )
        .await;
        run_sql(
            &mut owner,
            &format!(
                "INSERT INTO merchant_events (id, merchant_id, type, resource_id, order_id, \
                     snapshot, request, created_at) \
                 SELECT {}, merchant_id, type, resource_id, order_id, snapshot, request, \
                     created_at FROM moving",
                moved_back_expr("id", months)
            ),
        )
        .await;
    }
    let three_ago = month(&mut owner, -3).await;
    let two_ago = month(&mut owner, -2).await;
    let one_ago = month(&mut owner, -1).await;
    assert!(app.db.count(&format!("merchant_events_{three_ago}")).await > 0);
    assert!(app.db.count(&format!("merchant_events_{two_ago}")).await > 0);

    // A moment's retention: every month before this one is past it. The legacy partition
    // and the months with only final payments go, one a transaction; the month with the open
    // one stays, and last month too: the keeper makes it again each round (a provider may
    // date a webhook a moment before it arrives), so it never drops it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut runtime = connect(&app.db.runtime_url).await;
    let expired = partitions::drop_expired(&mut runtime, Family::Events, Duration::from_millis(10))
        .await
        .unwrap();
    let dropped: Vec<_> = expired
        .iter()
        .filter(|p| p.dropped)
        .map(|p| p.partition_name.clone())
        .collect();
    let kept: Vec<_> = expired
        .iter()
        .filter(|p| !p.dropped)
        .map(|p| (p.partition_name.clone(), p.reason.clone()))
        .collect();
    assert_eq!(
        dropped,
        [
            "merchant_events_legacy".to_string(),
            format!("merchant_events_{three_ago}"),
        ],
        "{expired:?}"
    );
    assert_eq!(
        kept,
        [(
            format!("merchant_events_{two_ago}"),
            Some("open payment".to_string())
        )]
    );
    for gone in [
        format!("event_deliveries_{three_ago}"),
        format!("delivery_attempts_{three_ago}"),
        "event_deliveries_legacy".into(),
        "delivery_attempts_legacy".into(),
    ] {
        assert!(!exists(&mut owner, &gone).await, "{gone}");
    }
    // Nor this month nor last month, whatever the retention; a keeper round after finds
    // nothing to make again.
    let this = month(&mut owner, 0).await;
    assert!(exists(&mut owner, &format!("merchant_events_{this}")).await);
    assert!(exists(&mut owner, &format!("merchant_events_{one_ago}")).await);
    let again = partitions::keep(&mut runtime, Family::Events, Duration::from_millis(10))
        .await
        .unwrap();
    assert!(again.iter().all(|p| !p.dropped), "{again:?}");
    assert!(exists(&mut owner, &format!("merchant_events_{one_ago}")).await);
    assert_eq!(
        partitions::create_ahead(&mut runtime, &partitions::TABLES)
            .await
            .unwrap(),
        0
    );

    // The API lists what is left: the open payment's events, none of the dropped month's.
    let listed: Value = app
        .get_as(&app.merchant_key, "/v1/events?limit=100")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["data"].as_array().unwrap().len() as i64,
        app.db.count(&format!("merchant_events_{two_ago}")).await,
        "{listed}"
    );

    // Its payment final, the waiting month goes on the next round.
    let done = app
        .deliver_signed(&dated_now(event("succeeded", "evt_part_done", &open)))
        .await;
    assert_eq!(done["outcome"], "applied", "{done}");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let expired = partitions::drop_expired(&mut runtime, Family::Events, Duration::from_millis(10))
        .await
        .unwrap();
    assert!(
        expired
            .iter()
            .any(|p| p.dropped && p.partition_name == format!("merchant_events_{two_ago}")),
        "{expired:?}"
    );
}

/// A fixture event dated now, as the provider dates it: the fixtures' own dates are older
/// than every month a database partitioned months ago keeps (a webhook dated before every
/// partition lands in `provider_webhooks_outside`; docs/DESIGN.md, "History partitioned by
/// time"), and the test judges the months.
fn dated_now(body: String) -> String {
    let mut body: Value = serde_json::from_str(&body).unwrap();
    body["created"] = chrono::Utc::now().timestamp().into();
    body.to_string()
}

/// The uuid of a prefixed id (`pay_…`, `ord_…`): its simple hex after the prefix.
fn uuid_of_prefixed(id: &str) -> uuid::Uuid {
    let hex = id.rsplit('_').next().unwrap();
    uuid::Uuid::parse_str(hex).unwrap_or_else(|_| panic!("{id}"))
}

#[tokio::test]
async fn the_webhook_dedup_holds_across_a_month_boundary_and_a_month_with_an_open_payment_waits() {
    let app = quiet_app_on(partitioned_months_ago(2).await).await;
    let open = app.pending_attempt("dedup-open").await;
    // The provider dated the event in the last second of the month before last; its copies
    // arrive this month, dated the same: one row, in that month's partition, counted three
    // times.
    let mut body: Value =
        serde_json::from_str(&event("processing", "evt_boundary", &open)).unwrap();
    let mut owner = app.db.connect().await;
    let boundary = text(
        &mut owner,
        "SELECT (extract(epoch FROM date_trunc('month', now(), 'UTC') - interval '1 month') - 1)\
         ::bigint::text AS value",
    )
    .await;
    body["created"] = boundary.parse::<i64>().unwrap().into();
    let body = body.to_string();
    let first = app.deliver_signed(&body).await;
    assert_eq!(first["outcome"], "applied", "{first}");
    for _ in 0..2 {
        let again = app.deliver_signed(&body).await;
        assert_ne!(again["outcome"], "conflict", "{again}");
    }
    let last = month(&mut owner, -2).await;
    assert_eq!(
        app.db
            .count("provider_webhooks WHERE provider_event_id = 'evt_boundary'")
            .await,
        1
    );
    let home = text(
        &mut owner,
        "SELECT tableoid::regclass::text || ' ' || deliveries AS value FROM provider_webhooks \
         WHERE provider_event_id = 'evt_boundary'",
    )
    .await;
    assert_eq!(home, format!("provider_webhooks_{last} 3"));
    // Refused by the database too: the same event, same time, written by hand.
    let copy = diesel::sql_query(
        "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, \
         payload, provider_created_at) SELECT gen_random_uuid(), provider, provider_event_id, \
         event_type, 'ignored', payload, provider_created_at FROM provider_webhooks \
         WHERE provider_event_id = 'evt_boundary'",
    )
    .execute(&mut owner)
    .await;
    // Skipped by the database too, as `ON CONFLICT DO NOTHING` would skip it (the trigger
    // `provider_webhooks_once`, migration 2026-11-28-000037_webhook_dedup).
    assert_eq!(copy.expect("a copy written by hand is skipped"), 0);

    // That month is past a moment's retention, but its webhook's payment is open: kept.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut runtime = connect(&app.db.runtime_url).await;
    let expired = partitions::drop_expired(
        &mut runtime,
        Family::ProviderWebhooks,
        Duration::from_millis(10),
    )
    .await
    .unwrap();
    assert!(
        expired.iter().any(|p| !p.dropped
            && p.partition_name == format!("provider_webhooks_{last}")
            && p.reason.as_deref() == Some("open payment")),
        "{expired:?}"
    );
    assert!(expired
        .iter()
        .any(|p| p.dropped && p.partition_name == "provider_webhooks_legacy"));
}

#[tokio::test]
async fn one_event_per_change_is_still_refused_in_any_month() {
    let app = quiet_app_on(partitioned_months_ago(1).await).await;
    let (status, paid) = app.pay(Route::Checkout, "once", "pm_card_visa").await;
    assert_eq!(status, 201, "{paid}");
    let mut owner = app.db.connect().await;
    // A second `payment.succeeded` of the same payment dated last month: refused, though
    // the first is in this month's partition.
    assert_refused_by(
        &mut owner,
        &format!(
            "INSERT INTO merchant_events (id, merchant_id, type, resource_id, order_id, snapshot) \
             SELECT {}, merchant_id, type, resource_id, order_id, snapshot FROM merchant_events \
             WHERE type = 'payment.succeeded'",
            moved_back("00000000-0000-7000-8000-000000000000", 1)
        ),
        "merchant_events_once",
    )
    .await;
}

#[tokio::test]
async fn a_database_with_rows_migrates_and_the_api_answers_the_same_about_them() {
    // Rows written under the schema before the partitioning, by the app itself.
    let db = TestDatabase::empty().await;
    migrate_until(&db, "000031_").await;
    let before = quiet_app_on(TestDatabase::external(&db.url)).await;
    let mut orders = Vec::new();
    for n in 0..3 {
        let (status, paid) = before
            .pay(Route::Checkout, &format!("legacy-{n}"), "pm_card_visa")
            .await;
        assert_eq!(status, 201, "{paid}");
        orders.push(paid["order_id"].as_str().unwrap().to_string());
    }
    let key = before.merchant_key.clone();
    let read = |app: &TestApp| {
        let app_url = app.base_url.clone();
        let client = app.client.clone();
        let key = key.clone();
        let orders = orders.clone();
        async move {
            let mut bodies = Vec::new();
            let mut paths = vec!["/v1/events?limit=100".to_string()];
            paths.extend(orders.iter().map(|o| format!("/v1/orders/{o}")));
            for path in paths {
                let response = client
                    .get(format!("{app_url}{path}"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200, "{path}");
                bodies.push(response.text().await.unwrap());
            }
            bodies
        }
    };
    let answered = read(&before).await;
    before.crash().await;
    drop(before);
    // A webhook a provider dated years ahead, past the legacy partition's bound: it takes
    // its arrival's time, and the upgrade goes through.
    let mut owner = db.connect().await;
    run_sql(
        &mut owner,
        "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, \
         payload, provider_created_at) VALUES (gen_random_uuid(), 'stripe', 'evt_ahead', \
         'charge.updated', 'ignored', '{}', now() + interval '5 years')",
    )
    .await;

    migrate_rest(&db).await;
    let after = quiet_app_on(TestDatabase::external(&db.url)).await;
    assert_eq!(read(&after).await, answered);
    let ahead = text(
        &mut owner,
        "SELECT tableoid::regclass::text || ' ' || (provider_created_at = received_at)::text \
         AS value FROM provider_webhooks WHERE provider_event_id = 'evt_ahead'",
    )
    .await;
    assert_eq!(ahead, "provider_webhooks_legacy true");
    let homes = text(
        &mut owner,
        "SELECT string_agg(DISTINCT tableoid::regclass::text, ',') AS value FROM merchant_events",
    )
    .await;
    assert_eq!(homes, "merchant_events_legacy");
    // New writes continue the old sequence: the events list's cursor keeps its order.
    let (status, _) = after.pay(Route::Checkout, "after", "pm_card_visa").await;
    assert_eq!(status, 201);
    let ordered = text(
        &mut owner,
        "SELECT (max(seq) FILTER (WHERE tableoid::regclass::text = 'merchant_events_legacy') \
         < min(seq) FILTER (WHERE tableoid::regclass::text <> 'merchant_events_legacy') \
         OR count(*) FILTER (WHERE tableoid::regclass::text <> 'merchant_events_legacy') = 0)::text \
         AS value FROM merchant_events",
    )
    .await;
    assert_eq!(ordered, "true");
    drop(after);
    drop(db);
}

#[tokio::test]
async fn rows_dated_next_month_land_in_next_months_partitions() {
    let db = partitioned_months_ago(1).await;
    let mut owner = db.connect().await;
    let next = month(&mut owner, 1).await;
    run_sql(
        &mut owner,
        "INSERT INTO merchants (id, name) VALUES ('00000000-0000-4000-8000-000000000001', 'm')",
    )
    .await;
    run_sql(
        &mut owner,
        &format!(
            "INSERT INTO merchant_events (id, merchant_id, type, resource_id, order_id, snapshot) \
             VALUES ({}, '00000000-0000-4000-8000-000000000001', 'order.paid', \
             gen_random_uuid(), gen_random_uuid(), '{{}}')",
            moved_back(&uuid::Uuid::now_v7().to_string(), -1)
        ),
    )
    .await;
    run_sql(
        &mut owner,
        "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, \
         payload, provider_created_at) VALUES (gen_random_uuid(), 'adyen', 'evt_next', \
         'AUTHORISATION', 'ignored', '{}', date_trunc('month', now(), 'UTC') \
         + interval '1 month' + interval '1 hour')",
    )
    .await;
    let homes = text(
        &mut owner,
        "SELECT (SELECT tableoid::regclass::text FROM merchant_events) || ' ' || \
         (SELECT tableoid::regclass::text FROM provider_webhooks) AS value",
    )
    .await;
    assert_eq!(
        homes,
        format!("merchant_events_{next} provider_webhooks_{next}")
    );
}

/// Adyen's HMAC does not cover `eventDate`, and a notification without one is dated on
/// arrival: two copies of one event may carry two times, even in two months. Still one row,
/// the copies counted on it (migration 2026-11-28-000037_webhook_dedup), and the legacy
/// partition's older unique index never answers `500`.
#[tokio::test]
async fn copies_of_one_event_dated_in_two_months_are_one_row() {
    let app = quiet_app_on(partitioned_months_ago(2).await).await;
    let open = app.pending_attempt("dedup-two-times").await;
    let mut owner = app.db.connect().await;
    let this_month = text(
        &mut owner,
        "SELECT extract(epoch FROM date_trunc('month', now(), 'UTC'))::bigint::text AS value",
    )
    .await
    .parse::<i64>()
    .unwrap();
    let mut body: Value =
        serde_json::from_str(&event("processing", "evt_two_times", &open)).unwrap();
    // Last month, this month, and before every partition (the legacy one's time).
    for (created, outcome) in [
        (this_month - 3600, "applied"),
        (this_month + 3600, "duplicate"),
        (1_600_000_000, "duplicate"),
    ] {
        body["created"] = created.into();
        let answer = app.deliver_signed(&body.to_string()).await;
        if outcome == "applied" {
            assert_eq!(answer["outcome"], "applied", "{answer}");
        } else {
            assert_ne!(answer["outcome"], "applied", "{answer}");
        }
    }
    assert_eq!(
        app.db
            .count("provider_webhooks WHERE provider_event_id = 'evt_two_times'")
            .await,
        1
    );
    let counted = text(
        &mut owner,
        "SELECT deliveries::text AS value FROM provider_webhooks \
         WHERE provider_event_id = 'evt_two_times'",
    )
    .await;
    assert_eq!(counted, "3");
    // The database holds it itself, under the handlers' own look: a copy dated next month,
    // written by hand, is skipped.
    let copy = run_sql(
        &mut owner,
        "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, \
         payload, provider_created_at) SELECT gen_random_uuid(), provider, provider_event_id, \
         event_type, 'ignored', payload, now() + interval '1 month' FROM provider_webhooks \
         WHERE provider_event_id = 'evt_two_times'",
    )
    .await;
    assert_eq!(copy, 0);
    assert_eq!(
        app.db
            .count("provider_webhooks WHERE provider_event_id = 'evt_two_times'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_keeper_finds_another_replicas_at_work_and_waits_for_the_next_round() {
    let db = partitioned_months_ago(2).await;
    let mut owner = db.connect().await;
    let mut runtime = connect(&db.runtime_url).await;
    let two_ago = month(&mut owner, -2).await;
    // Another replica's keeper holds the keeper's advisory lock (a session lock stands in
    // for its transaction's): no error, nothing made nor dropped, however long it holds it.
    run_sql(&mut owner, "SELECT pg_advisory_lock(1751741300, 0)").await;
    let started = std::time::Instant::now();
    assert_eq!(
        partitions::create_ahead(&mut runtime, &partitions::TABLES)
            .await
            .unwrap(),
        0
    );
    let expired = partitions::drop_expired(&mut runtime, Family::Events, Duration::from_millis(1))
        .await
        .unwrap();
    assert!(expired.is_empty(), "{expired:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(exists(&mut owner, "merchant_events_legacy").await);
    run_sql(&mut owner, "SELECT pg_advisory_unlock(1751741300, 0)").await;
    // A transaction reading the deliveries (as the delivery worker does, before their
    // events) holds the drop off: 'busy' within its short lock timeout, not an error, and
    // no write queues behind the drop for longer.
    run_sql(&mut owner, "BEGIN").await;
    run_sql(&mut owner, "SELECT count(*) FROM event_deliveries").await;
    let started = std::time::Instant::now();
    let expired = partitions::drop_expired(&mut runtime, Family::Events, Duration::from_millis(1))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].partition_name, "merchant_events_legacy");
    assert_eq!(expired[0].reason.as_deref(), Some("busy"));
    run_sql(&mut owner, "ROLLBACK").await;
    // Let go, the next round drops what is past the retention.
    let expired = partitions::drop_expired(&mut runtime, Family::Events, Duration::from_millis(1))
        .await
        .unwrap();
    let dropped: Vec<_> = expired
        .iter()
        .filter(|p| p.dropped)
        .map(|p| p.partition_name.clone())
        .collect();
    assert_eq!(
        dropped,
        [
            "merchant_events_legacy".to_string(),
            format!("merchant_events_{two_ago}")
        ],
        "{expired:?}"
    );
}
