//! The sandbox's disputes (docs/guides/test-cards.md, "Disputes"): the payer's bank taking
//! a charge's money back, and the merchant answering, as both faces tell it.
//!
//! One book for both faces, as the ledger is one: a dispute belongs to one charge, which has
//! at most one open dispute at a time (several over its life; Adyen's second chargeback and
//! pre-arbitration are the same dispute moving on). Its status is one of Stripe's seven words
//! and its stage one of four (inquiry, chargeback, second chargeback, pre-arbitration); the
//! moves are the ones payorch's dispute state machine allows (docs/guides/disputes.md), so
//! whatever the sandbox tells is a move payorch must take: anything else is refused here, with
//! the reason, and nothing told.
//!
//! Money: while a dispute is `needs_response`, `under_review` or `lost` the payer has its
//! amount back. Each time a dispute starts or stops holding money the book records a
//! movement (`DisputeMoney`: withdrawn, or reinstated), with its time, for the providers'
//! settlement records (Stripe's balance transactions, Adyen's settlement details) to list.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// How long the merchant has to answer: the `evidence_due_by` (Stripe) and
/// `defensePeriodEndsAt` (Adyen) the sandbox gives, seven days after the dispute opened (the
/// networks allow between about a week and a month; the shortest is the one to test with).
pub(crate) const EVIDENCE_WINDOW_SECS: i64 = 7 * 24 * 3600;

/// A dispute's status: Stripe's seven words, which payorch uses too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisputeStatus {
    WarningNeedsResponse,
    WarningUnderReview,
    WarningClosed,
    NeedsResponse,
    UnderReview,
    Won,
    Lost,
}

impl DisputeStatus {
    pub fn word(self) -> &'static str {
        match self {
            Self::WarningNeedsResponse => "warning_needs_response",
            Self::WarningUnderReview => "warning_under_review",
            Self::WarningClosed => "warning_closed",
            Self::NeedsResponse => "needs_response",
            Self::UnderReview => "under_review",
            Self::Won => "won",
            Self::Lost => "lost",
        }
    }

    /// The payer has the dispute's amount back.
    pub fn holds_money(self) -> bool {
        matches!(self, Self::NeedsResponse | Self::UnderReview | Self::Lost)
    }

    /// Still waiting on the merchant or the bank: a charge has at most one such dispute.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            Self::WarningNeedsResponse
                | Self::WarningUnderReview
                | Self::NeedsResponse
                | Self::UnderReview
        )
    }

    /// Stripe's `charge.dispute.closed` is sent on entering one of these.
    pub fn is_closed(self) -> bool {
        matches!(self, Self::Won | Self::Lost | Self::WarningClosed)
    }

    fn is_warning(self) -> bool {
        matches!(
            self,
            Self::WarningNeedsResponse | Self::WarningUnderReview | Self::WarningClosed
        )
    }
}

/// How far a dispute has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisputeStage {
    Inquiry,
    Chargeback,
    SecondChargeback,
    PreArbitration,
}

impl DisputeStage {
    pub fn word(self) -> &'static str {
        match self {
            Self::Inquiry => "inquiry",
            Self::Chargeback => "chargeback",
            Self::SecondChargeback => "second_chargeback",
            Self::PreArbitration => "pre_arbitration",
        }
    }
}

/// What is done to a charge's dispute: by the bank (the knob `POST /__sandbox/disputes`, a
/// test payment method's script, `--dispute-rate`) or by the merchant (evidence, accept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// A chargeback opens: `needs_response`, the money taken.
    Open,
    /// An inquiry opens: `warning_needs_response`, no money taken yet. Through Adyen a
    /// `NOTIFICATION_OF_CHARGEBACK`, or with `rfi` a `REQUEST_FOR_INFORMATION`.
    Inquiry { rfi: bool },
    /// The inquiry becomes a chargeback.
    Escalate,
    /// The bank decides for the merchant: a chargeback `won` (Adyen `CHARGEBACK_REVERSED`),
    /// an inquiry `warning_closed`.
    Win,
    /// The bank decides for the payer: `lost`.
    Lose,
    /// Adyen only: a won chargeback charged back again, `lost` at `second_chargeback`.
    SecondChargeback,
    /// Adyen only: a lost dispute's pre-arbitration decided for the merchant, `won`.
    PrearbitrationWon,
    /// Adyen only: a lost dispute's pre-arbitration decided for the payer, still `lost`.
    PrearbitrationLost,
    /// The merchant submitted its evidence: under review.
    Submit,
    /// The merchant accepts the dispute (Stripe's close, Adyen's `acceptDispute`).
    Accept,
}

impl Move {
    /// The knob's words (`POST /__sandbox/disputes` `action`).
    pub(crate) const WORDS: [(&'static str, Move); 9] = [
        ("open", Move::Open),
        ("inquiry", Move::Inquiry { rfi: false }),
        ("request_for_information", Move::Inquiry { rfi: true }),
        ("escalate", Move::Escalate),
        ("win", Move::Win),
        ("lose", Move::Lose),
        ("second_chargeback", Move::SecondChargeback),
        ("prearbitration_won", Move::PrearbitrationWon),
        ("prearbitration_lost", Move::PrearbitrationLost),
    ];

    pub(crate) fn from_word(word: &str) -> Option<Move> {
        Self::WORDS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, m)| *m)
    }

    pub(crate) fn opens(self) -> bool {
        matches!(self, Move::Open | Move::Inquiry { .. })
    }

    /// Adyen has these stages; Stripe does not (its dispute ends at won or lost).
    fn adyen_only(self) -> bool {
        matches!(
            self,
            Move::SecondChargeback | Move::PrearbitrationWon | Move::PrearbitrationLost
        )
    }

    /// Where `self` takes a dispute that is `status` at `stage` through the face `adyen` or
    /// not; `Err` says why it may not.
    fn to(
        self,
        status: DisputeStatus,
        stage: DisputeStage,
        adyen: bool,
    ) -> Result<(DisputeStatus, DisputeStage), String> {
        use DisputeStatus as S;
        let moved = match (self, status) {
            (Move::Escalate, S::WarningNeedsResponse | S::WarningUnderReview) => {
                Some((S::NeedsResponse, DisputeStage::Chargeback))
            }
            (Move::Win, S::NeedsResponse | S::UnderReview) => Some((S::Won, stage)),
            (Move::Win, S::WarningNeedsResponse | S::WarningUnderReview) => {
                Some((S::WarningClosed, stage))
            }
            (Move::Lose, S::NeedsResponse | S::UnderReview) => Some((S::Lost, stage)),
            (Move::SecondChargeback, S::Won) if stage == DisputeStage::Chargeback => {
                Some((S::Lost, DisputeStage::SecondChargeback))
            }
            (Move::PrearbitrationWon, S::Lost) if stage != DisputeStage::PreArbitration => {
                Some((S::Won, DisputeStage::PreArbitration))
            }
            (Move::PrearbitrationLost, S::Lost) if stage != DisputeStage::PreArbitration => {
                Some((S::Lost, DisputeStage::PreArbitration))
            }
            (Move::Submit, S::NeedsResponse) => Some((S::UnderReview, stage)),
            (Move::Submit, S::WarningNeedsResponse) => Some((S::WarningUnderReview, stage)),
            (Move::Accept, S::NeedsResponse) => Some((S::Lost, stage)),
            // Adyen's notification of chargeback is a chargeback on its way: accepted, it is
            // booked (`CHARGEBACK`, `Accepted`) and the money taken. Stripe closes an inquiry.
            (Move::Accept, S::WarningNeedsResponse) if adyen => {
                Some((S::Lost, DisputeStage::Chargeback))
            }
            (Move::Accept, S::WarningNeedsResponse) => Some((S::WarningClosed, stage)),
            _ => None,
        };
        moved.ok_or_else(|| {
            format!(
                "a dispute {} at {} cannot {}",
                status.word(),
                stage.word(),
                self.what()
            )
        })
    }

    fn what(self) -> &'static str {
        match self {
            Move::Open => "open",
            Move::Inquiry { .. } => "open as an inquiry",
            Move::Escalate => "escalate",
            Move::Win => "be won",
            Move::Lose => "be lost",
            Move::SecondChargeback => "be charged back a second time",
            Move::PrearbitrationWon => "win a pre-arbitration",
            Move::PrearbitrationLost => "lose a pre-arbitration",
            Move::Submit => "take evidence for review",
            Move::Accept => "be accepted",
        }
    }
}

/// One move a dispute made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeTransition {
    /// `None` for the move that opened it.
    pub from: Option<DisputeStatus>,
    pub to: DisputeStatus,
    pub stage: DisputeStage,
    /// Unix seconds.
    pub at: i64,
}

/// Money a dispute moved at the provider: `withdrawn` from the merchant when it started
/// holding the amount (a negative `amount`), `reinstated` when a win gave it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeMoney {
    /// `txn_…`: the balance transaction Stripe would show.
    pub id: String,
    pub dispute: String,
    pub payment_intent: String,
    /// `stripe` or `adyen`.
    pub protocol: String,
    /// `withdrawn` or `reinstated`.
    pub kind: String,
    /// Signed, as the merchant's balance sees it: negative when withdrawn.
    pub amount: i64,
    pub currency: String,
    /// Unix seconds.
    pub created: i64,
}

/// One dispute as the sandbox keeps it and `GET /__sandbox/disputes` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeEntry {
    /// `stripe` or `adyen`: the face of the payment disputed.
    pub protocol: String,
    /// `du_…`: Stripe's dispute id; through Adyen the dispute's `pspReference`.
    pub id: String,
    /// The payment: Stripe's payment intent, Adyen's payment `pspReference`.
    pub payment_intent: String,
    /// Stripe's charge (`ch_…`) of the payment.
    pub charge: String,
    /// payorch's attempt id (Adyen's `merchantReference`).
    pub attempt_id: Option<String>,
    pub merchant_account: Option<String>,
    pub amount: i64,
    pub currency: String,
    /// Stripe's reason word.
    pub reason: String,
    /// The network's reason code (Visa's), Adyen's `chargebackReasonCode`: none for a
    /// reason no card network has a code for (a bank debit's, or `general`).
    pub reason_code: Option<String>,
    pub status: DisputeStatus,
    pub stage: DisputeStage,
    /// Unix seconds.
    pub created: i64,
    pub evidence_due_by: i64,
    /// The evidence given so far (Stripe's `evidence[…]` text, Adyen's documents by type).
    pub evidence: BTreeMap<String, String>,
    pub submission_count: u32,
    pub transitions: Vec<DisputeTransition>,
    pub money: Vec<DisputeMoney>,
}

impl DisputeEntry {
    pub fn is_adyen(&self) -> bool {
        self.protocol == "adyen"
    }
}

/// The payment a dispute is opened on, as the store has it.
#[derive(Debug, Clone)]
pub(crate) struct Disputed {
    pub protocol: String,
    pub payment_intent: String,
    pub charge: String,
    pub attempt_id: Option<String>,
    pub merchant_account: Option<String>,
    /// What the charge took: the most a dispute can take back.
    pub received: i64,
    pub currency: String,
}

/// What a dispute opens with besides its payment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Opening {
    /// Default: all the charge took.
    pub amount: Option<i64>,
    /// Default: `fraudulent` for a chargeback, `general` for an inquiry.
    pub reason: Option<String>,
}

/// What a move did, for the telling (`dispute_news`).
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub the_move: Move,
    /// `None` when the move opened it.
    pub from: Option<DisputeStatus>,
    /// The dispute after the move.
    pub dispute: DisputeEntry,
    /// The movement the move made, if any.
    pub money: Option<DisputeMoney>,
}

/// Stripe's reason words, and Visa's reason code for each where Visa has one (what Adyen's
/// `chargebackReasonCode` carries; docs/guides/test-cards.md, "Disputes"). A reason without
/// one (a bank debit's, `general`) is told by its words alone, in the item's `reason`.
pub const REASONS: [(&str, Option<&str>); 13] = [
    ("bank_cannot_process", Some("11.3")),
    ("credit_not_processed", Some("13.6")),
    ("customer_initiated", None),
    ("debit_not_authorized", None),
    ("duplicate", Some("12.6.1")),
    ("fraudulent", Some("10.4")),
    ("general", None),
    ("incorrect_account_details", Some("12.4")),
    ("insufficient_funds", None),
    ("product_not_received", Some("13.1")),
    ("product_unacceptable", Some("13.3")),
    ("subscription_canceled", Some("13.2")),
    ("unrecognized", Some("10.4")),
];

/// The reason's Visa code (`Some(None)`: a reason without one); `None` for a word that is
/// not Stripe's.
pub(crate) fn reason_code(reason: &str) -> Option<Option<&'static str>> {
    REASONS.iter().find(|(r, _)| *r == reason).map(|(_, c)| *c)
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, DisputeEntry>,
    /// Each payment's disputes, oldest first.
    by_payment: HashMap<String, Vec<String>>,
    /// Every dispute's id, oldest first: past `keep` the oldest is forgotten.
    order: VecDeque<String>,
}

/// Every dispute, bounded as the intents are (`--keep-intents`).
pub(crate) struct Book {
    inner: Mutex<Inner>,
    keep: usize,
}

impl Book {
    pub(crate) fn new(keep: usize) -> Book {
        Book {
            inner: Mutex::new(Inner::default()),
            keep: keep.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Opens a dispute on `payment` (`Move::Open` or `Move::Inquiry`): refused while the
    /// charge has an open one, or for more than the charge took.
    pub(crate) fn open(
        &self,
        payment: &Disputed,
        the_move: Move,
        opening: &Opening,
        id: String,
        now: i64,
    ) -> Result<Change, String> {
        let (status, stage, default_reason) = match the_move {
            Move::Open => (
                DisputeStatus::NeedsResponse,
                DisputeStage::Chargeback,
                "fraudulent",
            ),
            Move::Inquiry { .. } => (
                DisputeStatus::WarningNeedsResponse,
                DisputeStage::Inquiry,
                "general",
            ),
            other => return Err(format!("{other:?} does not open a dispute")),
        };
        let amount = opening.amount.unwrap_or(payment.received);
        if amount <= 0 || amount > payment.received {
            return Err(format!(
                "a dispute of {amount} on a charge of {}",
                payment.received
            ));
        }
        let reason = opening.reason.as_deref().unwrap_or(default_reason);
        let reason_code = reason_code(reason).ok_or_else(|| {
            let words: Vec<&str> = REASONS.iter().map(|(r, _)| *r).collect();
            format!("no reason {reason:?}: one of {}", words.join(", "))
        })?;
        let mut inner = self.lock();
        if let Some(open) = inner
            .by_payment
            .get(&payment.payment_intent)
            .into_iter()
            .flatten()
            .filter_map(|id| inner.by_id.get(id))
            .find(|d| d.status.is_open())
        {
            return Err(format!(
                "{} already has an open dispute, {} ({})",
                payment.payment_intent,
                open.id,
                open.status.word()
            ));
        }
        let mut dispute = DisputeEntry {
            protocol: payment.protocol.clone(),
            id: id.clone(),
            payment_intent: payment.payment_intent.clone(),
            charge: payment.charge.clone(),
            attempt_id: payment.attempt_id.clone(),
            merchant_account: payment.merchant_account.clone(),
            amount,
            currency: payment.currency.clone(),
            reason: reason.to_owned(),
            reason_code: reason_code.map(str::to_owned),
            status,
            stage,
            created: now,
            evidence_due_by: now + EVIDENCE_WINDOW_SECS,
            evidence: BTreeMap::new(),
            submission_count: 0,
            transitions: vec![DisputeTransition {
                from: None,
                to: status,
                stage,
                at: now,
            }],
            money: Vec::new(),
        };
        let money = status
            .holds_money()
            .then(|| movement(&mut dispute, "withdrawn", now));
        inner
            .by_payment
            .entry(payment.payment_intent.clone())
            .or_default()
            .push(id.clone());
        inner.by_id.insert(id.clone(), dispute.clone());
        inner.order.push_back(id);
        while inner.order.len() > self.keep {
            inner.forget_oldest();
        }
        Ok(Change {
            the_move,
            from: None,
            dispute,
            money,
        })
    }

    /// Moves dispute `id` by `the_move`; `evidence` is added to what it has (a submit's).
    pub(crate) fn apply(
        &self,
        id: &str,
        the_move: Move,
        evidence: BTreeMap<String, String>,
        now: i64,
    ) -> Result<Change, String> {
        let mut inner = self.lock();
        let dispute = inner
            .by_id
            .get_mut(id)
            .ok_or_else(|| format!("no dispute {id}"))?;
        if the_move.adyen_only() && !dispute.is_adyen() {
            return Err(format!(
                "Stripe has no {}: a Stripe dispute ends at won or lost",
                the_move.what()
            ));
        }
        let from = dispute.status;
        let (to, stage) = the_move.to(from, dispute.stage, dispute.is_adyen())?;
        dispute.status = to;
        dispute.stage = stage;
        dispute.evidence.extend(evidence);
        if the_move == Move::Submit {
            dispute.submission_count += 1;
        }
        dispute.transitions.push(DisputeTransition {
            from: Some(from),
            to,
            stage,
            at: now,
        });
        let money = match (from.holds_money(), to.holds_money()) {
            (false, true) => Some(movement(dispute, "withdrawn", now)),
            (true, false) => Some(movement(dispute, "reinstated", now)),
            _ => None,
        };
        Ok(Change {
            the_move,
            from: Some(from),
            dispute: dispute.clone(),
            money,
        })
    }

    /// Adds evidence to an open dispute without submitting it (Stripe's `submit=false`).
    pub(crate) fn add_evidence(
        &self,
        id: &str,
        evidence: BTreeMap<String, String>,
    ) -> Result<DisputeEntry, String> {
        let mut inner = self.lock();
        let dispute = inner
            .by_id
            .get_mut(id)
            .ok_or_else(|| format!("no dispute {id}"))?;
        if !matches!(
            dispute.status,
            DisputeStatus::NeedsResponse | DisputeStatus::WarningNeedsResponse
        ) {
            return Err(format!(
                "dispute {id} is {}: its evidence can no longer change",
                dispute.status.word()
            ));
        }
        dispute.evidence.extend(evidence);
        Ok(dispute.clone())
    }

    pub(crate) fn get(&self, id: &str) -> Option<DisputeEntry> {
        self.lock().by_id.get(id).cloned()
    }

    /// The payment's disputes, oldest first.
    pub(crate) fn of_payment(&self, payment: &str) -> Vec<DisputeEntry> {
        let inner = self.lock();
        inner
            .by_payment
            .get(payment)
            .into_iter()
            .flatten()
            .filter_map(|id| inner.by_id.get(id).cloned())
            .collect()
    }

    /// The payment's dispute that holds its money, if one does.
    pub(crate) fn holding(&self, payment: &str) -> Option<DisputeEntry> {
        self.of_payment(payment)
            .into_iter()
            .find(|d| d.status.holds_money())
    }

    /// Whether the payment was ever disputed.
    pub(crate) fn was_disputed(&self, payment: &str) -> bool {
        self.lock().by_payment.contains_key(payment)
    }

    /// Every dispute kept, oldest first.
    pub(crate) fn all(&self) -> Vec<DisputeEntry> {
        let inner = self.lock();
        inner
            .order
            .iter()
            .filter_map(|id| inner.by_id.get(id).cloned())
            .collect()
    }
}

impl Inner {
    fn forget_oldest(&mut self) {
        let Some(id) = self.order.pop_front() else {
            return;
        };
        if let Some(dispute) = self.by_id.remove(&id) {
            if let Some(ids) = self.by_payment.get_mut(&dispute.payment_intent) {
                ids.retain(|kept| *kept != id);
                if ids.is_empty() {
                    self.by_payment.remove(&dispute.payment_intent);
                }
            }
        }
    }
}

/// Records on `dispute` the money it moves now.
fn movement(dispute: &mut DisputeEntry, kind: &str, now: i64) -> DisputeMoney {
    let amount = if kind == "withdrawn" {
        -dispute.amount
    } else {
        dispute.amount
    };
    let money = DisputeMoney {
        id: super::random_id("txn"),
        dispute: dispute.id.clone(),
        payment_intent: dispute.payment_intent.clone(),
        protocol: dispute.protocol.clone(),
        kind: kind.to_owned(),
        amount,
        currency: dispute.currency.clone(),
        created: now,
    };
    dispute.money.push(money.clone());
    money
}

/// Whether `status` is one the sandbox tells in a warning's words (Adyen's notification of
/// chargeback or request for information).
pub(crate) fn is_warning(status: DisputeStatus) -> bool {
    status.is_warning()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payment(protocol: &str) -> Disputed {
        Disputed {
            protocol: protocol.into(),
            payment_intent: "pi_1".into(),
            charge: "ch_1".into(),
            attempt_id: Some("at_1".into()),
            merchant_account: None,
            received: 1000,
            currency: "eur".into(),
        }
    }

    fn open(book: &Book, protocol: &str, the_move: Move) -> Result<Change, String> {
        book.open(
            &payment(protocol),
            the_move,
            &Opening::default(),
            format!("du_{}", book.all().len()),
            1,
        )
    }

    fn apply(book: &Book, id: &str, the_move: Move) -> Result<Change, String> {
        book.apply(id, the_move, BTreeMap::new(), 2)
    }

    #[test]
    fn a_chargeback_takes_the_money_and_a_win_gives_it_back() {
        let book = Book::new(10);
        let opened = open(&book, "stripe", Move::Open).expect("opens");
        assert_eq!(opened.dispute.status, DisputeStatus::NeedsResponse);
        assert_eq!(opened.money.as_ref().map(|m| m.amount), Some(-1000));
        assert!(book.holding("pi_1").is_some());
        let submitted = apply(&book, "du_0", Move::Submit).expect("submits");
        assert_eq!(submitted.dispute.status, DisputeStatus::UnderReview);
        assert!(submitted.money.is_none(), "still held");
        let won = apply(&book, "du_0", Move::Win).expect("wins");
        assert_eq!(
            won.money.as_ref().map(|m| m.kind.as_str()),
            Some("reinstated")
        );
        assert!(book.holding("pi_1").is_none());
        assert_eq!(won.dispute.money.len(), 2);
        assert_eq!(won.dispute.transitions.len(), 3);
    }

    #[test]
    fn an_inquiry_takes_nothing_until_it_escalates() {
        let book = Book::new(10);
        let opened = open(&book, "adyen", Move::Inquiry { rfi: false }).expect("opens");
        assert_eq!(opened.dispute.status, DisputeStatus::WarningNeedsResponse);
        assert!(opened.money.is_none());
        assert!(
            apply(&book, "du_0", Move::Lose).is_err(),
            "an inquiry is not lost"
        );
        let escalated = apply(&book, "du_0", Move::Escalate).expect("escalates");
        assert_eq!(escalated.dispute.stage, DisputeStage::Chargeback);
        assert_eq!(escalated.money.map(|m| m.amount), Some(-1000));
    }

    #[test]
    fn one_open_dispute_per_charge_and_never_more_than_it_took() {
        let book = Book::new(10);
        open(&book, "stripe", Move::Open).expect("opens");
        assert!(open(&book, "stripe", Move::Inquiry { rfi: false }).is_err());
        apply(&book, "du_0", Move::Accept).expect("accepted: lost");
        assert_eq!(
            book.get("du_0").map(|d| d.status),
            Some(DisputeStatus::Lost)
        );
        // Closed: another may open (the sandbox does not check the money here; the charge's
        // amount bounds each one).
        open(&book, "stripe", Move::Inquiry { rfi: false }).expect("a second dispute");
        let too_much = book.open(
            &Disputed {
                payment_intent: "pi_2".into(),
                ..payment("stripe")
            },
            Move::Open,
            &Opening {
                amount: Some(1001),
                reason: None,
            },
            "du_x".into(),
            1,
        );
        assert!(too_much.is_err());
    }

    #[test]
    fn an_accepted_inquiry_is_booked_as_a_chargeback_through_adyen_and_closed_through_stripe() {
        let adyen = Book::new(10);
        open(&adyen, "adyen", Move::Inquiry { rfi: false }).expect("opens");
        let accepted = apply(&adyen, "du_0", Move::Accept).expect("accepted");
        assert_eq!(
            (accepted.dispute.status, accepted.dispute.stage),
            (DisputeStatus::Lost, DisputeStage::Chargeback)
        );
        assert_eq!(accepted.money.map(|m| m.amount), Some(-1000), "taken");

        let stripe = Book::new(10);
        open(&stripe, "stripe", Move::Inquiry { rfi: false }).expect("opens");
        let closed = apply(&stripe, "du_0", Move::Accept).expect("accepted");
        assert_eq!(closed.dispute.status, DisputeStatus::WarningClosed);
        assert!(closed.money.is_none(), "an inquiry takes nothing");
    }

    #[test]
    fn adyen_goes_on_after_a_win_and_a_loss_and_stripe_does_not() {
        let book = Book::new(10);
        open(&book, "adyen", Move::Open).expect("opens");
        apply(&book, "du_0", Move::Win).expect("reversed");
        let second = apply(&book, "du_0", Move::SecondChargeback).expect("second chargeback");
        assert_eq!(
            (second.dispute.status, second.dispute.stage),
            (DisputeStatus::Lost, DisputeStage::SecondChargeback)
        );
        assert_eq!(second.money.map(|m| m.kind), Some("withdrawn".to_owned()));
        let pre = apply(&book, "du_0", Move::PrearbitrationWon).expect("pre-arbitration won");
        assert_eq!(pre.dispute.stage, DisputeStage::PreArbitration);
        assert!(apply(&book, "du_0", Move::PrearbitrationLost).is_err());
        assert!(apply(&book, "du_0", Move::SecondChargeback).is_err());

        let stripe = Book::new(10);
        open(&stripe, "stripe", Move::Open).expect("opens");
        apply(&stripe, "du_0", Move::Win).expect("won");
        assert!(apply(&stripe, "du_0", Move::SecondChargeback).is_err());
        apply(&stripe, "du_0", Move::Lose).expect_err("won is final on Stripe");
    }

    #[test]
    fn every_refused_move_leaves_the_dispute_as_it_was() {
        let book = Book::new(10);
        open(&book, "adyen", Move::Open).expect("opens");
        apply(&book, "du_0", Move::Lose).expect("lost");
        let before = book.get("du_0");
        for refused in [
            Move::Submit,
            Move::Accept,
            Move::Escalate,
            Move::Win,
            Move::Lose,
        ] {
            assert!(apply(&book, "du_0", refused).is_err(), "{refused:?}");
        }
        assert_eq!(book.get("du_0"), before);
    }

    #[test]
    fn past_its_window_the_oldest_dispute_is_forgotten() {
        let book = Book::new(1);
        open(&book, "stripe", Move::Open).expect("opens");
        book.open(
            &Disputed {
                payment_intent: "pi_2".into(),
                ..payment("stripe")
            },
            Move::Open,
            &Opening::default(),
            "du_y".into(),
            1,
        )
        .expect("opens");
        assert_eq!(book.all().len(), 1);
        assert!(!book.was_disputed("pi_1"));
    }
}
