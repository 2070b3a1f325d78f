//! Holds and challenges in the database (docs/DESIGN.md, "Holds and challenges"): every move
//! of the attempt machine's table is allowed, every other is refused by name, whatever
//! writes the row; a capture never takes more than was authorized, and a hold has at most
//! one capture or void.

use diesel_async::RunQueryDsl;

use crate::helpers::{assert_refused_by, TestApp};
use payorch::db::PgConn;

const STATUSES: [&str; 6] = [
    "created",
    "pending",
    "authorized",
    "succeeded",
    "failed",
    "canceled",
];

/// The table of docs/DESIGN.md, "Holds and challenges": every move an attempt may make.
const MOVES: [(&str, &str); 11] = [
    ("created", "pending"),
    ("created", "authorized"),
    ("created", "succeeded"),
    ("created", "failed"),
    ("created", "canceled"),
    ("pending", "authorized"),
    ("pending", "succeeded"),
    ("pending", "failed"),
    ("pending", "canceled"),
    ("authorized", "succeeded"),
    ("authorized", "canceled"),
];

/// The columns that go with a status, so that a move is judged by the machine and not by
/// the row's other rules.
fn set_status(status: &str) -> String {
    let open = matches!(status, "created" | "pending" | "authorized");
    format!(
        "status = '{status}', failure_code = {code}, cancellation_reason = {reason}, \
         next_check_at = {check}",
        code = if status == "failed" { "'x'" } else { "NULL" },
        reason = if status == "canceled" {
            "'voided'"
        } else {
            "NULL"
        },
        check = if open { "now()" } else { "NULL" },
    )
}

/// A new order of the test merchant and a manual-capture attempt for it, `created`, made by
/// hand; its id.
async fn hand_made_attempt(app: &TestApp, conn: &mut PgConn) -> String {
    let order = app.new_order().await;
    let id = uuid::Uuid::now_v7().to_string();
    diesel::sql_query(format!(
        "INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method, \
         provider, provider_idempotency_key, next_check_at, capture_method) \
         SELECT merchant_id, '{id}', id, 'created', 'pm_card_visa', 'sandbox', 'hand-{id}', \
         now(), 'manual' FROM orders WHERE id = '{order}'",
        order = &order[4..]
    ))
    .execute(conn)
    .await
    .expect("a hand-made attempt");
    id
}

async fn move_to(conn: &mut PgConn, id: &str, status: &str) -> Result<usize, String> {
    diesel::sql_query(format!(
        "UPDATE payment_attempts SET {} WHERE id = '{id}'",
        set_status(status)
    ))
    .execute(conn)
    .await
    .map_err(|e| e.to_string())
}

/// An attempt brought to `status` along the table.
async fn attempt_in(app: &TestApp, conn: &mut PgConn, status: &str) -> String {
    let id = hand_made_attempt(app, conn).await;
    if status != "created" {
        move_to(conn, &id, status)
            .await
            .expect("a move of the table");
    }
    id
}

async fn order_status_of(conn: &mut PgConn, attempt: &str) -> String {
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Text)]
        status: String,
    }
    let row: Row = diesel::sql_query(format!(
        "SELECT o.status FROM orders o JOIN payment_attempts a \
         ON a.merchant_id = o.merchant_id AND a.order_id = o.id WHERE a.id = '{attempt}'"
    ))
    .get_result(conn)
    .await
    .expect("the attempt's order");
    row.status
}

#[tokio::test]
async fn the_database_allows_exactly_the_moves_of_the_table() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    for from in STATUSES {
        for to in STATUSES.iter().copied().filter(|to| *to != from) {
            let id = attempt_in(&app, &mut conn, from).await;
            let allowed = MOVES.contains(&(from, to));
            if allowed {
                move_to(&mut conn, &id, to)
                    .await
                    .unwrap_or_else(|e| panic!("{from} → {to} is in the table: {e}"));
            } else {
                let constraint = if matches!(from, "succeeded" | "failed" | "canceled") {
                    "payment_attempts_final"
                } else {
                    "payment_attempts_status_transition"
                };
                let sql = format!(
                    "UPDATE payment_attempts SET {} WHERE id = '{id}'",
                    set_status(to)
                );
                assert_refused_by(&mut conn, &sql, constraint).await;
            }
        }
    }
}

#[tokio::test]
async fn the_order_follows_its_hold() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let held = attempt_in(&app, &mut conn, "authorized").await;
    assert_eq!(order_status_of(&mut conn, &held).await, "authorized");
    // An open hold is an open attempt: the order takes no second one.
    let second = format!(
        "INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method, \
         provider, provider_idempotency_key, next_check_at) \
         SELECT merchant_id, gen_random_uuid(), order_id, 'created', 'pm_card_visa', \
         provider, 'second', now() FROM payment_attempts WHERE id = '{held}'"
    );
    assert_refused_by(&mut conn, &second, "payment_attempts_order_payable").await;

    move_to(&mut conn, &held, "succeeded").await.unwrap();
    assert_eq!(order_status_of(&mut conn, &held).await, "paid");

    let voided = attempt_in(&app, &mut conn, "authorized").await;
    move_to(&mut conn, &voided, "canceled").await.unwrap();
    assert_eq!(
        order_status_of(&mut conn, &voided).await,
        "awaiting_payment"
    );

    let abandoned = attempt_in(&app, &mut conn, "pending").await;
    move_to(&mut conn, &abandoned, "canceled").await.unwrap();
    assert_eq!(
        order_status_of(&mut conn, &abandoned).await,
        "awaiting_payment"
    );
}

#[tokio::test]
async fn an_automatic_capture_holds_nothing() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let id = hand_made_attempt(&app, &mut conn).await;
    diesel::sql_query(format!(
        "UPDATE payment_attempts SET capture_method = 'automatic' WHERE id = '{id}'"
    ))
    .execute(&mut conn)
    .await
    .expect_err("the capture method never changes");
    let order = app.new_order().await;
    let auto = uuid::Uuid::now_v7();
    diesel::sql_query(format!(
        "INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method, \
         provider, provider_idempotency_key, next_check_at) \
         SELECT merchant_id, '{auto}', id, 'created', 'pm_card_visa', 'sandbox', 'auto-{auto}', \
         now() FROM orders WHERE id = '{}'",
        &order[4..]
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let sql = format!(
        "UPDATE payment_attempts SET {} WHERE id = '{auto}'",
        set_status("authorized")
    );
    assert_refused_by(&mut conn, &sql, "payment_attempts_status_transition").await;
}

#[tokio::test]
async fn a_capture_takes_at_most_what_was_authorized_and_once() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let held = attempt_in(&app, &mut conn, "authorized").await;
    let operation = |kind: &str, amount: &str| {
        format!(
            "INSERT INTO hold_operations (merchant_id, id, payment_id, order_id, kind, status, \
             amount, currency, provider, provider_idempotency_key, source, next_check_at) \
             SELECT merchant_id, gen_random_uuid(), id, order_id, '{kind}', 'created', {amount}, \
             currency, provider, gen_random_uuid()::text, 'api', now() \
             FROM payment_attempts WHERE id = '{held}'"
        )
    };
    // More than the hold: refused by the trigger, whatever the writer.
    assert_refused_by(
        &mut conn,
        &operation("capture", "amount + 1"),
        "hold_operations_capture_within_hold",
    )
    .await;
    // A partial capture, then a second capture and a void of the same hold: refused.
    diesel::sql_query(operation("capture", "amount - 1"))
        .execute(&mut conn)
        .await
        .expect("a capture within the hold");
    for second in [operation("capture", "1"), operation("void", "NULL")] {
        assert_refused_by(&mut conn, &second, "hold_operations_one_per_hold").await;
    }
    // The attempt records what the live capture took, and no more than it authorized.
    move_to(&mut conn, &held, "succeeded").await.unwrap();
    #[derive(diesel::QueryableByName)]
    struct Taken {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        amount: i64,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        amount_captured: i64,
    }
    let taken: Taken = diesel::sql_query(format!(
        "SELECT amount, amount_captured FROM payment_attempts WHERE id = '{held}'"
    ))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(taken.amount_captured, taken.amount - 1);
    // Nothing moves a capture's amount afterwards.
    assert_refused_by(
        &mut conn,
        &format!("UPDATE payment_attempts SET amount_captured = amount WHERE id = '{held}'"),
        "payment_attempts_final",
    )
    .await;
    // No operation on a payment that holds nothing any more.
    assert_refused_by(
        &mut conn,
        &operation("void", "NULL"),
        "hold_operations_payment_held",
    )
    .await;
}
