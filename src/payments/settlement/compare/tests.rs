//! Each finding, each left unfound, on books written by hand.

use super::*;

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn entry(n: &str, kind: EntryKind, payment: &str, amount: i64, secs: i64) -> Entry {
    Entry {
        provider_entry_id: format!("txn_{n}"),
        kind,
        provider_payment_id: Some(payment.into()),
        provider_source_id: Some(format!("src_{n}")),
        amount,
        currency: "eur".into(),
        booked_at: at(secs),
        occurred_at: at(secs),
        reference: None,
    }
}

fn attempt(n: u128, payment: &str, status: &str, amount: i64, secs: i64) -> Attempt {
    Attempt {
        merchant_id: id(1),
        id: id(n),
        provider_payment_id: Some(payment.into()),
        status: status.into(),
        amount,
        amount_captured: None,
        currency: "eur".into(),
        finished_at: (status != "pending").then(|| at(secs)),
    }
}

fn refund(n: u128, payment: u128, provider_id: &str, status: &str, amount: i64) -> Refund {
    Refund {
        merchant_id: id(1),
        id: id(n),
        payment_id: id(payment),
        provider_refund_id: Some(provider_id.into()),
        status: status.into(),
        amount,
        finished_at: Some(at(20)),
    }
}

/// The stretch [0, 100); payorch keeps disputes.
fn books(entries: Vec<Entry>, attempts: Vec<Attempt>, refunds: Vec<Refund>) -> Books {
    Books {
        from: at(0),
        to: at(100),
        entries,
        attempts,
        refunds,
        late: vec![],
        disputes: Some(vec![]),
        fresh: BTreeSet::new(),
    }
}

fn kinds(found: &[Found]) -> Vec<(FindingKind, String)> {
    found.iter().map(|f| (f.kind, f.subject.clone())).collect()
}

#[test]
fn clean_books_find_nothing() {
    let b = books(
        vec![
            entry("1", EntryKind::Charge, "pi_1", 1500, 10),
            entry("2", EntryKind::Refund, "pi_1", -500, 30),
            entry("3", EntryKind::Other, "pi_1", -20, 30),
        ],
        vec![attempt(10, "pi_1", "succeeded", 1500, 10)],
        vec![refund(20, 10, "src_2", "succeeded", 500)],
    );
    assert_eq!(kinds(&compare(&b)), vec![]);
}

#[test]
fn a_charge_payorch_does_not_know_or_holds_as_not_succeeded() {
    let ours = |e: Entry| Entry {
        reference: Some("pay_0190b5e2c1a87c3d9e0f112233445566".into()),
        ..e
    };
    let b = books(
        vec![
            ours(entry("1", EntryKind::Charge, "pi_1", 1500, 10)),
            entry("2", EntryKind::Charge, "pi_2", 1500, 10),
        ],
        vec![attempt(10, "pi_2", "failed", 1500, 5)],
        vec![],
    );
    let found = compare(&b);
    assert_eq!(
        kinds(&found),
        vec![
            (FindingKind::UnknownCharge, "pi_1".into()),
            (FindingKind::UnknownCharge, "pi_2".into())
        ]
    );
    assert_eq!(found[1].attempt_id, Some(id(10)));
    assert_eq!((found[0].expected, found[0].found), (None, Some(1500)));
}

#[test]
fn another_systems_sales_are_other_never_findings() {
    // An invoice's charge and its refund, a dashboard sale with no payment at all: no
    // payment payorch knows, none of its references.
    let mut no_payment = entry("3", EntryKind::Charge, "x", 700, 10);
    no_payment.provider_payment_id = None;
    let b = books(
        vec![
            entry("1", EntryKind::Charge, "pi_inv", 1500, 10),
            entry("2", EntryKind::Refund, "pi_inv", -500, 20),
            no_payment,
        ],
        vec![],
        vec![],
    );
    let compared = comparison(&b);
    assert_eq!(kinds(&compared.found), vec![]);
    assert_eq!(compared.other.len(), 3, "{:?}", compared.other);
}

#[test]
fn a_refund_payorch_still_waits_on_is_not_unknown() {
    let mut pending = refund(20, 10, "src_2", "pending", 500);
    pending.finished_at = None;
    let b = books(
        vec![
            entry("1", EntryKind::Charge, "pi_1", 1500, -50),
            entry("2", EntryKind::Refund, "pi_1", -500, 30),
        ],
        vec![attempt(10, "pi_1", "succeeded", 1500, -50)],
        vec![pending],
    );
    assert_eq!(kinds(&compare(&b)), vec![]);
}

#[test]
fn a_late_approvals_refund_must_be_booked() {
    let late = |undone: i64| Late {
        id: id(30),
        provider_payment_id: "pi_2".into(),
        approved_as: "succeeded".into(),
        status: "refunded".into(),
        amount: 900,
        provider_undo_id: Some("src_3".into()),
        undone_at: Some(at(undone)),
    };
    let charged = || {
        vec![
            entry("2", EntryKind::Charge, "pi_2", 900, -60),
            entry("3", EntryKind::Refund, "pi_2", -900, 12),
        ]
    };
    let la = crate::ids::LateApprovalId(id(30)).to_string();
    // Booked: nothing.
    let mut b = books(
        charged(),
        vec![attempt(11, "pi_2", "failed", 900, -60)],
        vec![],
    );
    b.late = vec![late(10)];
    assert_eq!(kinds(&compare(&b)), vec![]);
    // Never booked, given back within the stretch (past the grace): refund_not_booked.
    b.entries.pop();
    assert_eq!(
        kinds(&compare(&b)),
        vec![(FindingKind::RefundNotBooked, la.clone())]
    );
    assert_eq!(compare(&b)[0].expected, Some(900));
    // Given back after the stretch: not yet.
    b.late = vec![late(150)];
    assert_eq!(kinds(&compare(&b)), vec![]);
    // Booked for less.
    let mut less = books(
        charged(),
        vec![attempt(11, "pi_2", "failed", 900, -60)],
        vec![],
    );
    less.entries[1].amount = -400;
    less.late = vec![late(10)];
    assert_eq!(
        kinds(&compare(&less)),
        vec![(FindingKind::AmountMismatch, la)]
    );
}

#[test]
fn a_second_capture_and_a_different_amount() {
    let mut held = attempt(11, "pi_2", "succeeded", 2000, 10);
    held.amount_captured = Some(1200);
    let b = books(
        vec![
            entry("1", EntryKind::Charge, "pi_1", 1500, 10),
            entry("2", EntryKind::Charge, "pi_1", 1500, 12),
            entry("3", EntryKind::Charge, "pi_2", 2000, 10),
        ],
        vec![attempt(10, "pi_1", "succeeded", 1500, 10), held],
        vec![],
    );
    let found = compare(&b);
    assert_eq!(
        kinds(&found),
        vec![
            (FindingKind::CapturedTwice, "pi_1".into()),
            (FindingKind::AmountMismatch, "pi_2".into())
        ]
    );
    assert_eq!(
        (found[1].expected, found[1].found),
        (Some(1200), Some(2000))
    );
}

#[test]
fn a_charge_not_booked_only_once_its_stretch_is_read() {
    let b = books(
        vec![],
        vec![
            attempt(10, "pi_1", "succeeded", 1500, 50),
            // Finished after the stretch: compared with the next one.
            attempt(11, "pi_2", "succeeded", 1500, 150),
            // A hold: nothing is booked until it is captured.
            attempt(12, "pi_3", "authorized", 1500, 50),
        ],
        vec![],
    );
    assert_eq!(
        kinds(&compare(&b)),
        vec![(FindingKind::ChargeNotBooked, "pi_1".into())]
    );
}

#[test]
fn a_refund_never_booked_another_amount_or_unknown() {
    let b = books(
        vec![
            entry("1", EntryKind::Charge, "pi_1", 3000, -50),
            entry("2", EntryKind::Refund, "pi_1", -400, 30),
            entry("3", EntryKind::Refund, "pi_1", -700, 30),
            // Booked, then failed: nothing went back.
            entry("4", EntryKind::Refund, "pi_1", -100, 30),
            Entry {
                amount: 100,
                provider_entry_id: "txn_5".into(),
                ..entry("4", EntryKind::Refund, "pi_1", 100, 31)
            },
        ],
        vec![attempt(10, "pi_1", "succeeded", 3000, -50)],
        vec![
            refund(20, 10, "src_x", "succeeded", 300),
            refund(21, 10, "src_2", "succeeded", 500),
        ],
    );
    assert_eq!(
        kinds(&compare(&b)),
        vec![
            (
                FindingKind::RefundNotBooked,
                crate::ids::RefundId(id(20)).to_string()
            ),
            (
                FindingKind::AmountMismatch,
                crate::ids::RefundId(id(21)).to_string()
            ),
            (FindingKind::UnknownRefund, "src_3".into()),
        ]
    );
}

#[test]
fn a_refund_payorch_holds_as_failed_is_unknown_a_late_approvals_is_not() {
    let mut b = books(
        vec![
            entry("1", EntryKind::Refund, "pi_1", -400, 30),
            entry("2", EntryKind::Charge, "pi_2", 900, 10),
            entry("3", EntryKind::Refund, "pi_2", -900, 12),
        ],
        vec![
            attempt(10, "pi_1", "succeeded", 3000, -50),
            attempt(11, "pi_2", "failed", 900, 5),
        ],
        vec![refund(20, 10, "src_1", "failed", 400)],
    );
    b.late = vec![Late {
        id: id(30),
        provider_payment_id: "pi_2".into(),
        approved_as: "succeeded".into(),
        status: "refunded".into(),
        amount: 900,
        provider_undo_id: Some("src_3".into()),
        undone_at: Some(at(12)),
    }];
    let found = compare(&b);
    assert_eq!(
        kinds(&found),
        vec![(FindingKind::UnknownRefund, "src_1".into())]
    );
    assert_eq!(found[0].refund_id, Some(id(20)));
}

#[test]
fn dispute_money_is_what_payorchs_disputes_hold() {
    let entries = vec![
        entry("1", EntryKind::Charge, "pi_1", 1000, -50),
        entry("2", EntryKind::DisputeWithdrawal, "pi_1", -1000, 30),
    ];
    let attempts = vec![attempt(10, "pi_1", "succeeded", 1000, -50)];
    let mut b = books(entries.clone(), attempts.clone(), vec![]);
    b.disputes = Some(vec![Dispute {
        provider_payment_id: "pi_1".into(),
        held: 1000,
        changed_at: at(31),
    }]);
    assert_eq!(kinds(&compare(&b)), vec![]);
    // Won and given back: nothing held, nothing withdrawn in the end.
    b.entries.push(entry(
        "3",
        EntryKind::DisputeReinstatement,
        "pi_1",
        1000,
        60,
    ));
    b.disputes = Some(vec![]);
    assert_eq!(kinds(&compare(&b)), vec![]);
    // A withdrawal no dispute of payorch's explains.
    let unexplained = books(entries.clone(), attempts.clone(), vec![]);
    assert_eq!(
        kinds(&compare(&unexplained)),
        vec![(FindingKind::UnexplainedDispute, "pi_1".into())]
    );
    // payorch keeps no disputes at all.
    let mut none = books(entries.clone(), attempts.clone(), vec![]);
    none.disputes = None;
    assert_eq!(compare(&none)[0].kind, FindingKind::UnexplainedDispute);
    // Withdrawn in the stretch, its news applied after it (within the grace): looked at in
    // the next stretch, where the news falls, not now.
    let mut late_news = books(entries.clone(), attempts.clone(), vec![]);
    late_news.disputes = Some(vec![Dispute {
        provider_payment_id: "pi_1".into(),
        held: 0,
        changed_at: at(120),
    }]);
    assert_eq!(kinds(&compare(&late_news)), vec![]);
    late_news.from = at(100);
    late_news.to = at(200);
    late_news.disputes.as_mut().unwrap()[0].held = 1000;
    assert_eq!(kinds(&compare(&late_news)), vec![]);
    // Reinstated after the stretch (a won dispute payorch already knows of): the next one.
    let mut won = books(entries, attempts, vec![]);
    won.entries.push(entry(
        "3",
        EntryKind::DisputeReinstatement,
        "pi_1",
        1000,
        150,
    ));
    won.disputes = Some(vec![Dispute {
        provider_payment_id: "pi_1".into(),
        held: 0,
        changed_at: at(40),
    }]);
    assert_eq!(kinds(&compare(&won)), vec![]);
    won.from = at(100);
    won.to = at(200);
    assert_eq!(kinds(&compare(&won)), vec![]);
}

#[test]
fn what_was_compared_before_is_not_again() {
    // Booked and finished before the stretch, refunded within it: only the refund counts.
    // The two charges were compared in their own stretch (a second capture found then); read
    // for the first time now, they would be compared again
    // (an_entry_read_late_is_compared_when_it_comes).
    let b = books(
        vec![
            entry("1", EntryKind::Charge, "pi_1", 1500, -10),
            entry("2", EntryKind::Charge, "pi_1", 1500, -9),
            entry("3", EntryKind::Refund, "pi_1", -1500, 30),
        ],
        vec![attempt(10, "pi_1", "succeeded", 1500, -10)],
        vec![refund(20, 10, "src_3", "succeeded", 1500)],
    );
    assert_eq!(kinds(&compare(&b)), vec![]);
}

#[test]
fn an_entry_read_late_is_compared_when_it_comes() {
    // pi_1 was compared in an earlier stretch; an Adyen batch settled late (or a line
    // planted) brings a second charge dated before this stretch, read for the first time
    // now: a second capture. pi_2's charge, compared before, arrives again for another
    // amount; pi_3's is a charge payorch never made, carrying its reference shape.
    let mut stranger = entry("5", EntryKind::Charge, "pi_3", 999, -300);
    stranger.reference = Some("pay_0190b5e2c1a87c3d9e0f112233445599".into());
    let mut b = books(
        vec![
            entry("1", EntryKind::Charge, "pi_1", 1500, -200),
            entry("2", EntryKind::Charge, "pi_1", 1500, -100),
            entry("3", EntryKind::Charge, "pi_2", 1500, -200),
            entry("4", EntryKind::Charge, "pi_2", -100, -100),
            stranger,
        ],
        vec![
            attempt(10, "pi_1", "succeeded", 1500, -200),
            attempt(11, "pi_2", "succeeded", 1500, -200),
        ],
        vec![],
    );
    assert_eq!(kinds(&compare(&b)), vec![], "none of it is news");
    b.fresh = ["txn_2", "txn_4", "txn_5"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        kinds(&compare(&b)),
        vec![
            (FindingKind::CapturedTwice, "pi_1".into()),
            (FindingKind::CapturedTwice, "pi_2".into()),
            (FindingKind::UnknownCharge, "pi_3".into()),
        ]
    );
}
