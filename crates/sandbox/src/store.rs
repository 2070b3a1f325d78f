//! The sandbox's memory: payment intents, refunds, the ledger and the idempotency keys,
//! bounded (docs/operations/running.md, "The sandbox's memory"):
//!
//! - the last `intents` intents (`KeptIntent`: every field, compactly) and the last `intents`
//!   refunds; an older one is forgotten, and counted in `Forgotten`, which the ledger shows so
//!   that "no longer kept" never reads as "never made";
//! - an idempotency key for as long as what its request made (an intent or a refund) is kept,
//!   and a key whose request made nothing (a refusal) for as long as its answer is;
//! - the answers recorded under keys, byte for byte, for the last `answers` keys to finish;
//!   past that a replay answers what the key made as it is now: the very same bytes unless it
//!   changed since (a `processing` intent that succeeded, a pending refund that settled). A
//!   key whose first result was a `500` replays that `500` (`Replay::Failed`), never what it
//!   made: Stripe saves a key's first result "whatever it was, including 500 errors".
//!
//! The bounds are counts, not ages: memory is what they bound, and at a given rate a count
//! is a time. Ids carry their serial number (`serial`), so a lookup of an intent or refund
//! tells "forgotten" (`Lookup::Forgotten`) from "never made" exactly.
//!
//! One `std::sync::Mutex` guards it all and is never held across an `.await`, so every
//! operation here is atomic; that is what makes 50 concurrent same-key requests charge once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use actix_web::web::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::kept::KeptIntent;
use super::listing::Cursor;
use super::protocol::protocol_of;
use super::serial;
use payorch_wire::stripe::{PaymentIntent, Refund};

mod holds;

pub(super) use holds::{Ask, Challenged, Modified, Refusal, ADYEN_CANCELABLE, CANCELABLE};
pub use holds::{CaptureEntry, HoldEntry, VoidEntry};

/// One confirmed PaymentIntent, as `GET /__sandbox/ledger` lists it: the ground truth of
/// what the simulated card network saw. `status` says whether money moved (`succeeded`),
/// will move (`processing`) or was declined (`requires_payment_method`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The protocol the charge came through: `stripe` or `adyen`.
    pub protocol: String,
    pub provider_id: String,
    pub idempotency_key: Option<String>,
    pub attempt_id: Option<String>,
    pub order_id: Option<String>,
    pub merchant_id: Option<String>,
    pub amount: i64,
    pub currency: String,
    pub payment_method: Option<String>,
    pub status: String,
    pub created: i64,
}

impl LedgerEntry {
    /// Money moved or is moving.
    pub fn is_charged(&self) -> bool {
        matches!(self.status.as_str(), "succeeded" | "processing")
    }
}

/// One refund, as `GET /__sandbox/ledger` lists it under `refunds`: with the charges, what
/// each payment netted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundEntry {
    /// The protocol the refund came through: `stripe` or `adyen`.
    pub protocol: String,
    pub provider_id: String,
    pub payment_intent: String,
    pub idempotency_key: Option<String>,
    pub refund_id: Option<String>,
    pub amount: i64,
    pub currency: String,
    pub status: String,
    pub created: i64,
}

impl RefundEntry {
    /// Money went, or is going, back.
    pub fn is_refunded(&self) -> bool {
        matches!(self.status.as_str(), "succeeded" | "pending")
    }
}

/// How much the sandbox keeps (`--keep-intents`, `--keep-answers`), as the ledger shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// The last this many intents, and the last this many refunds.
    pub intents: usize,
    /// The last this many answers recorded under idempotency keys, byte for byte.
    pub answers: usize,
}

/// What the sandbox no longer keeps, as `GET /__sandbox/ledger` shows it under `forgotten`:
/// with the lists, everything it ever did. Nothing forgotten: all zero and `null`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forgotten {
    /// Intents forgotten, confirmed or not.
    pub intents: u64,
    /// Of those, the confirmed ones: entries the ledger's `data` no longer lists.
    pub entries: u64,
    /// Of those, the ones that had moved money (or were moving it).
    pub charged: u64,
    /// Refunds the ledger's `refunds` no longer lists.
    pub refunds: u64,
    /// When the first was forgotten (Unix seconds).
    pub since: Option<i64>,
    /// The newest `created` among the forgotten intents: from then back, the ledger is not
    /// the whole story.
    pub created_up_to: Option<i64>,
}

/// Why a refund was refused, as Stripe words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RefundRefused {
    NoSuchIntent,
    /// The intent is no longer kept: whether it can be refunded is unknown here.
    Forgotten,
    /// The intent has not charged anything (yet).
    NotCharged {
        status: String,
    },
    /// More than what is left of the charge; `left` is what is.
    TooLarge {
        left: i64,
    },
    /// The charge's dispute holds its money (Stripe's `charge_disputed`; `disputes`).
    Disputed {
        dispute: String,
    },
}

/// An answer recorded under an idempotency key, replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StoredResponse {
    pub status: u16,
    pub body: Bytes,
}

/// What a replay answers: the recorded answer, or what the key made, as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Replay {
    Recorded(StoredResponse),
    /// The first result was a `500`, no longer kept byte for byte: answer the `500` again
    /// (every fault's `500` is the same bytes).
    Failed,
    Intent(Box<PaymentIntent>),
    Refund(Box<Refund>),
}

/// What to do with a request that carries an idempotency key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Begin {
    /// First use: the key is now marked in flight and the caller must `finish` or `abandon` it.
    Fresh,
    Replay(Replay),
    /// Same key, other parameters.
    Mismatch,
    /// Same key, first request still running.
    InFlight,
}

/// An intent or refund looked up by id.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Lookup<T> {
    Found(T),
    /// Made here, and no longer kept.
    Forgotten,
    /// Never made here.
    Missing,
}

impl<T> Lookup<T> {
    pub(super) fn found(self) -> Option<T> {
        match self {
            Lookup::Found(value) => Some(value),
            Lookup::Forgotten | Lookup::Missing => None,
        }
    }

    fn map<U>(self, f: impl FnOnce(T) -> U) -> Lookup<U> {
        match self {
            Lookup::Found(value) => Lookup::Found(f(value)),
            Lookup::Forgotten => Lookup::Forgotten,
            Lookup::Missing => Lookup::Missing,
        }
    }
}

/// What a key's request made, by serial number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Made {
    Nothing,
    Intent(u64),
    Refund(u64),
}

enum Answer {
    InFlight,
    /// The `number`th answer recorded: replayed as it is while among the last `answers`.
    Recorded {
        number: u64,
        response: Box<StoredResponse>,
    },
    /// No longer kept: a replay answers what the key made.
    Dropped,
    /// No longer kept, and it was a `500`: a replay answers a `500`, whatever the key made.
    Failed,
}

struct KeyEntry {
    /// Of the first request's parameters.
    digest: [u8; 16],
    made: Made,
    answer: Answer,
}

struct KeptRefund {
    refund: Refund,
    key: Option<Box<str>>,
    /// The serial of the intent it refunds.
    intent: Option<u64>,
}

struct Inner {
    window: Window,
    /// Oldest first; the first has serial `first_intent`.
    intents: VecDeque<KeptIntent>,
    first_intent: u64,
    refunds: VecDeque<KeptRefund>,
    first_refund: u64,
    keys: HashMap<Box<str>, KeyEntry>,
    /// Keys whose answer is recorded, oldest first, with the answer's number.
    answers: VecDeque<(Box<str>, u64)>,
    recorded: u64,
    forgotten: Forgotten,
}

pub(super) struct Store {
    inner: Mutex<Inner>,
}

fn digest(fingerprint: &str) -> [u8; 16] {
    let full = Sha256::digest(fingerprint.as_bytes());
    let mut digest = [0; 16];
    digest.copy_from_slice(&full[..16]);
    digest
}

impl Store {
    pub(super) fn new(window: Window) -> Store {
        Store {
            inner: Mutex::new(Inner {
                window: Window {
                    intents: window.intents.max(1),
                    answers: window.answers,
                },
                intents: VecDeque::new(),
                first_intent: 0,
                refunds: VecDeque::new(),
                first_refund: 0,
                keys: HashMap::new(),
                answers: VecDeque::new(),
                recorded: 0,
                forgotten: Forgotten::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind, still consistent per
        // operation; keep serving rather than poison the simulator.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn begin(&self, key: &str, fingerprint: &str) -> Begin {
        let digest = digest(fingerprint);
        let mut inner = self.lock();
        let Some(entry) = inner.keys.get(key) else {
            inner.keys.insert(
                key.into(),
                KeyEntry {
                    digest,
                    made: Made::Nothing,
                    answer: Answer::InFlight,
                },
            );
            return Begin::Fresh;
        };
        if entry.digest != digest {
            return Begin::Mismatch;
        }
        let made = entry.made;
        match &entry.answer {
            Answer::InFlight => Begin::InFlight,
            Answer::Recorded { response, .. } => {
                Begin::Replay(Replay::Recorded((**response).clone()))
            }
            Answer::Failed => Begin::Replay(Replay::Failed),
            Answer::Dropped => match inner.made(made) {
                Some(replay) => Begin::Replay(replay),
                // Keys go with what they made, so this does not happen; were it to, the key
                // is as good as new.
                None => {
                    inner.keys.remove(key);
                    drop(inner);
                    self.begin(key, fingerprint)
                }
            },
        }
    }

    /// Record the answer of a key begun with [`Store::begin`].
    pub(super) fn finish(&self, key: &str, response: StoredResponse) {
        let mut inner = self.lock();
        let number = inner.recorded + 1;
        let Some(entry) = inner.keys.get_mut(key) else {
            return;
        };
        entry.answer = Answer::Recorded {
            number,
            response: Box::new(response),
        };
        inner.recorded = number;
        inner.answers.push_back((key.into(), number));
        while inner.answers.len() > inner.window.answers {
            inner.drop_oldest_answer();
        }
    }

    /// Release a key whose request did not run (Stripe saves no result for those).
    pub(super) fn abandon(&self, key: &str) {
        let mut inner = self.lock();
        if matches!(
            inner.keys.get(key),
            Some(KeyEntry {
                answer: Answer::InFlight,
                ..
            })
        ) {
            inner.keys.remove(key);
        }
    }

    /// Makes a new intent, `make` given its id, under `key` (begun) if any.
    pub(super) fn create(
        &self,
        key: Option<&str>,
        confirmed: bool,
        make: impl FnOnce(String) -> PaymentIntent,
    ) -> PaymentIntent {
        let mut inner = self.lock();
        let serial = inner.first_intent + inner.intents.len() as u64;
        let intent = make(serial::make("pi", serial));
        let keys: Vec<&str> = key.into_iter().collect();
        inner
            .intents
            .push_back(KeptIntent::new(&intent, &keys, key.is_some(), confirmed));
        inner.made_under(key, Made::Intent(serial));
        while inner.intents.len() > inner.window.intents {
            inner.forget_oldest_intent();
        }
        intent
    }

    /// Stores `intent`, made earlier, again (a confirm), under `key` (begun) if any; false if
    /// it was forgotten meanwhile.
    pub(super) fn restore(
        &self,
        intent: &PaymentIntent,
        key: Option<&str>,
        confirmed: bool,
    ) -> bool {
        let mut inner = self.lock();
        let Lookup::Found(at) = inner.find_intent(&intent.id) else {
            return false;
        };
        inner.intents[at].restore(intent, key, confirmed);
        let serial = inner.first_intent + at as u64;
        inner.made_under(key, Made::Intent(serial));
        true
    }

    /// Move an intent from `from` to `to`; `None` if it was not in `from` (someone else
    /// moved it first) or is no longer kept.
    pub(super) fn transition(&self, id: &str, from: &str, to: &str) -> Option<PaymentIntent> {
        let mut inner = self.lock();
        let at = inner.find_intent(id).found()?;
        let kept = &mut inner.intents[at];
        if kept.status() != from {
            return None;
        }
        let mut intent = kept.intent();
        intent.status = to.to_owned();
        if to == "succeeded" {
            intent.amount_received = intent.amount;
        }
        if matches!(to, "succeeded" | "requires_capture") {
            // The charge exists from now on (authorised, for a hold): retrieve shows it, like
            // the webhook does.
            intent.latest_charge = Some(super::random_id("ch"));
        }
        kept.replace(&intent);
        // As stored: `amount_capturable` follows the new status.
        Some(kept.intent())
    }

    pub(super) fn get(&self, id: &str) -> Lookup<PaymentIntent> {
        let inner = self.lock();
        inner.find_intent(id).map(|at| inner.intents[at].intent())
    }

    /// Kept intents for which `keep` holds, newest first: the `take` after the first `skip`,
    /// and how many there are in all (what `forgotten` counts is not searched).
    pub(super) fn search(
        &self,
        keep: impl Fn(&KeptIntent) -> bool,
        skip: usize,
        take: usize,
    ) -> (Vec<PaymentIntent>, usize) {
        let inner = self.lock();
        let mut total = 0;
        let mut page = Vec::new();
        for kept in inner.intents.iter().rev().filter(|kept| keep(kept)) {
            if (skip..skip.saturating_add(take)).contains(&total) {
                page.push(kept.intent());
            }
            total += 1;
        }
        (page, total)
    }

    /// Up to `limit` kept intents for which `keep` holds from `cursor` on, newest first, and
    /// whether more follow that way.
    pub(super) fn list(
        &self,
        cursor: &Cursor,
        limit: usize,
        keep: impl Fn(&KeptIntent) -> bool,
    ) -> Lookup<(Vec<PaymentIntent>, bool)> {
        let inner = self.lock();
        let from = match cursor {
            Cursor::Newest => Lookup::Found(From::Newest),
            Cursor::After(id) => inner.find_intent(id).map(From::After),
            Cursor::Before(id) => inner.find_intent(id).map(From::Before),
        };
        from.map(|from| page(&inner.intents, from, limit, keep, KeptIntent::intent))
    }

    /// Where a list of intent `id`'s refunds starts: the intent's serial; `Forgotten` also
    /// when some of its refunds are, as such a list would be short.
    pub(super) fn refunds_listable(&self, id: &str) -> Lookup<u64> {
        let inner = self.lock();
        match inner.find_intent(id) {
            Lookup::Found(at) if inner.intents[at].refunds_forgotten => Lookup::Forgotten,
            Lookup::Found(at) => Lookup::Found(inner.first_intent + at as u64),
            Lookup::Forgotten => Lookup::Forgotten,
            Lookup::Missing => Lookup::Missing,
        }
    }

    /// Up to `limit` kept refunds (of the intent with serial `intent`, if given) for which
    /// `keep` holds, from `cursor` on, newest first, and whether more follow that way.
    pub(super) fn list_refunds(
        &self,
        intent: Option<u64>,
        cursor: &Cursor,
        limit: usize,
        keep: impl Fn(&Refund) -> bool,
    ) -> Lookup<(Vec<Refund>, bool)> {
        let inner = self.lock();
        let from = match cursor {
            Cursor::Newest => Lookup::Found(From::Newest),
            Cursor::After(id) => inner.find_refund(id).map(From::After),
            Cursor::Before(id) => inner.find_refund(id).map(From::Before),
        };
        let keep =
            |kept: &KeptRefund| intent.is_none_or(|i| kept.intent == Some(i)) && keep(&kept.refund);
        from.map(|from| {
            page(&inner.refunds, from, limit, keep, |kept| {
                kept.refund.clone()
            })
        })
    }

    /// Refunds `amount` (default: what is left) of `intent_id`'s charge, if that much is
    /// left: what is left and the new refund are one decision under the store's lock. `make`
    /// is given the refund's id.
    pub(super) fn refund(
        &self,
        intent_id: &str,
        amount: Option<i64>,
        make: impl FnOnce(String, i64, &PaymentIntent) -> Refund,
        key: Option<&str>,
    ) -> Result<Refund, RefundRefused> {
        let mut inner = self.lock();
        let at = match inner.find_intent(intent_id) {
            Lookup::Found(at) => at,
            Lookup::Forgotten => return Err(RefundRefused::Forgotten),
            Lookup::Missing => return Err(RefundRefused::NoSuchIntent),
        };
        let kept = &inner.intents[at];
        if kept.status() != "succeeded" {
            return Err(RefundRefused::NotCharged {
                status: kept.status().to_owned(),
            });
        }
        // What was taken: all of it, or what a capture took of a hold.
        let left = kept.amount_received() - kept.held;
        let amount = amount.unwrap_or(left);
        if amount <= 0 || amount > left {
            return Err(RefundRefused::TooLarge { left });
        }
        let serial = inner.first_refund + inner.refunds.len() as u64;
        let refund = make(serial::make("re", serial), amount, &kept.intent());
        inner.intents[at].held += amount;
        let intent = Some(inner.first_intent + at as u64);
        inner.refunds.push_back(KeptRefund {
            refund: refund.clone(),
            key: key.map(Into::into),
            intent,
        });
        inner.made_under(key, Made::Refund(serial));
        while inner.refunds.len() > inner.window.intents {
            inner.forget_oldest_refund();
        }
        Ok(refund)
    }

    /// Move a refund from `from` to `to` (with `failure_reason` for `failed`); `None` if it
    /// was not in `from` or is no longer kept. A refund that fails holds nothing any more.
    pub(super) fn settle_refund(
        &self,
        id: &str,
        from: &str,
        to: &str,
        failure_reason: Option<&str>,
    ) -> Option<Refund> {
        let mut inner = self.lock();
        let at = inner.find_refund(id).found()?;
        let kept = &mut inner.refunds[at];
        if kept.refund.status != from {
            return None;
        }
        kept.refund.status = to.to_owned();
        kept.refund.failure_reason = failure_reason.map(str::to_owned);
        let settled = kept.refund.clone();
        let released =
            matches!(to, "failed" | "canceled") && !matches!(from, "failed" | "canceled");
        if let (true, Some(serial)) = (released, kept.intent) {
            if let Some(intent) = inner.intent_mut(serial) {
                intent.held -= settled.amount;
            }
        }
        Some(settled)
    }

    pub(super) fn get_refund(&self, id: &str) -> Lookup<Refund> {
        let inner = self.lock();
        inner
            .find_refund(id)
            .map(|at| inner.refunds[at].refund.clone())
    }

    pub(super) fn refund_ledger(&self) -> Vec<RefundEntry> {
        let inner = self.lock();
        inner
            .refunds
            .iter()
            .map(|kept| {
                let refund = &kept.refund;
                RefundEntry {
                    protocol: protocol_of(&refund.metadata).to_owned(),
                    provider_id: refund.id.clone(),
                    payment_intent: refund.payment_intent.clone().unwrap_or_default(),
                    idempotency_key: kept.key.as_deref().map(str::to_owned),
                    refund_id: refund.metadata.get("refund_id").cloned(),
                    amount: refund.amount,
                    currency: refund.currency.clone(),
                    status: refund.status.clone(),
                    created: refund.created,
                }
            })
            .collect()
    }

    pub(super) fn ledger(&self) -> Vec<LedgerEntry> {
        let inner = self.lock();
        inner
            .intents
            .iter()
            .filter(|kept| kept.confirmed)
            .map(|kept| {
                let pi = kept.intent();
                LedgerEntry {
                    protocol: protocol_of(&pi.metadata).to_owned(),
                    idempotency_key: kept.ledger_key().map(str::to_owned),
                    attempt_id: pi.metadata.get("attempt_id").cloned(),
                    order_id: pi.metadata.get("order_id").cloned(),
                    merchant_id: pi.metadata.get("merchant_id").cloned(),
                    provider_id: pi.id,
                    amount: pi.amount,
                    currency: pi.currency,
                    payment_method: pi.payment_method,
                    status: pi.status,
                    created: pi.created,
                }
            })
            .collect()
    }

    pub(super) fn forgotten(&self) -> Forgotten {
        self.lock().forgotten.clone()
    }

    pub(super) fn window(&self) -> Window {
        self.lock().window
    }
}

impl Inner {
    /// Where the intent `id` is kept.
    fn find_intent(&self, id: &str) -> Lookup<usize> {
        find(
            serial::serial_of("pi", id),
            self.first_intent,
            self.intents.len(),
            |at| self.intents[at].id() == id,
        )
    }

    fn find_refund(&self, id: &str) -> Lookup<usize> {
        find(
            serial::serial_of("re", id),
            self.first_refund,
            self.refunds.len(),
            |at| self.refunds[at].refund.id == id,
        )
    }

    fn intent_mut(&mut self, serial: u64) -> Option<&mut KeptIntent> {
        let at = serial.checked_sub(self.first_intent)?;
        self.intents.get_mut(usize::try_from(at).ok()?)
    }

    /// What a replay of a key that made `made` answers now.
    fn made(&self, made: Made) -> Option<Replay> {
        match made {
            Made::Nothing => None,
            Made::Intent(serial) => {
                let at = usize::try_from(serial.checked_sub(self.first_intent)?).ok()?;
                Some(Replay::Intent(Box::new(self.intents.get(at)?.intent())))
            }
            Made::Refund(serial) => {
                let at = usize::try_from(serial.checked_sub(self.first_refund)?).ok()?;
                Some(Replay::Refund(Box::new(
                    self.refunds.get(at)?.refund.clone(),
                )))
            }
        }
    }

    /// `key` (begun), if any, made `made`: it lives as long as that does.
    fn made_under(&mut self, key: Option<&str>, made: Made) {
        if let Some(entry) = key.and_then(|key| self.keys.get_mut(key)) {
            entry.made = made;
        }
    }

    /// Forgets `key` if it is the key of `made` (a key can be used afresh once forgotten),
    /// unless its request still runs or its answer is still kept: a duplicate must wait for
    /// the one, and gets the other; the key goes when that answer does.
    fn forget_key(&mut self, key: &str, made: Made) {
        if self.keys.get(key).is_some_and(|entry| {
            entry.made == made && matches!(entry.answer, Answer::Dropped | Answer::Failed)
        }) {
            self.keys.remove(key);
        }
    }

    /// Whether what a key made is no longer kept.
    fn is_forgotten(&self, made: Made) -> bool {
        match made {
            Made::Nothing => false,
            Made::Intent(serial) => serial < self.first_intent,
            Made::Refund(serial) => serial < self.first_refund,
        }
    }

    fn forget_oldest_intent(&mut self) {
        let Some(kept) = self.intents.pop_front() else {
            return;
        };
        let made = Made::Intent(self.first_intent);
        self.first_intent += 1;
        for key in kept.keys() {
            self.forget_key(key, made);
        }
        let forgotten = &mut self.forgotten;
        forgotten.intents += 1;
        forgotten.entries += u64::from(kept.confirmed);
        forgotten.charged += u64::from(kept.confirmed && kept.is_charged());
        forgotten
            .since
            .get_or_insert_with(|| chrono::Utc::now().timestamp());
        forgotten.created_up_to = forgotten.created_up_to.max(Some(kept.created()));
    }

    fn forget_oldest_refund(&mut self) {
        let Some(kept) = self.refunds.pop_front() else {
            return;
        };
        let made = Made::Refund(self.first_refund);
        self.first_refund += 1;
        if let Some(key) = &kept.key {
            self.forget_key(key, made);
        }
        // A list of that intent's refunds would now miss this one.
        if let Some(intent) = kept.intent.and_then(|serial| self.intent_mut(serial)) {
            intent.refunds_forgotten = true;
        }
        self.forgotten.refunds += 1;
        self.forgotten
            .since
            .get_or_insert_with(|| chrono::Utc::now().timestamp());
    }

    /// The oldest recorded answer is no longer kept: its key replays what it made, or, if it
    /// made nothing or what it made is forgotten, is forgotten too.
    fn drop_oldest_answer(&mut self) {
        let Some((key, number)) = self.answers.pop_front() else {
            return;
        };
        let Some(entry) = self.keys.get_mut(&key) else {
            return;
        };
        // The key may have been forgotten and used afresh since: that answer is not this one.
        let failed = match &entry.answer {
            Answer::Recorded {
                number: n,
                response,
            } if *n == number => response.status >= 500,
            _ => return,
        };
        let made = entry.made;
        if made == Made::Nothing || self.is_forgotten(made) {
            self.keys.remove(&key);
        } else if let Some(entry) = self.keys.get_mut(&key) {
            entry.answer = if failed {
                Answer::Failed
            } else {
                Answer::Dropped
            };
        }
    }
}

/// Where a page of a list starts, as a place among the items kept.
enum From {
    Newest,
    /// The items before (older than) this place.
    After(usize),
    /// The items after (newer than) this place.
    Before(usize),
}

/// Up to `limit` of `items` (kept oldest first) for which `keep` holds, from `from` on,
/// newest first, shown by `show`, and whether more follow that way: Stripe's list pages.
fn page<T, U>(
    items: &VecDeque<T>,
    from: From,
    limit: usize,
    keep: impl Fn(&T) -> bool,
    show: impl Fn(&T) -> U,
) -> (Vec<U>, bool) {
    let candidates: Box<dyn Iterator<Item = &T>> = match from {
        From::Newest => Box::new(items.iter().rev()),
        From::After(at) => Box::new(items.range(..at).rev()),
        From::Before(at) => Box::new(items.range(at + 1..)),
    };
    let mut found: Vec<&T> = candidates
        .filter(|item| keep(item))
        .take(limit + 1)
        .collect();
    let more = found.len() > limit;
    found.truncate(limit);
    if matches!(from, From::Before(_)) {
        // Taken from the cursor up: the page still reads newest first.
        found.reverse();
    }
    (found.into_iter().map(show).collect(), more)
}

/// The place of the item with `serial` among `len` kept from serial `first` on, if `is_it`
/// agrees that the item there is the one asked for.
fn find(
    serial: Option<u64>,
    first: u64,
    len: usize,
    is_it: impl Fn(usize) -> bool,
) -> Lookup<usize> {
    let Some(serial) = serial else {
        return Lookup::Missing;
    };
    if serial < first {
        return Lookup::Forgotten;
    }
    match usize::try_from(serial - first) {
        Ok(at) if at < len && is_it(at) => Lookup::Found(at),
        _ => Lookup::Missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(intents: usize, answers: usize) -> Store {
        Store::new(Window { intents, answers })
    }

    fn answer(body: &'static str) -> StoredResponse {
        StoredResponse {
            status: 200,
            body: Bytes::from_static(body.as_bytes()),
        }
    }

    fn intent(id: String) -> PaymentIntent {
        serde_json::from_value(serde_json::json!({
            "id": id, "amount": 500, "amount_received": 500, "currency": "usd",
            "status": "succeeded", "created": 1,
            "metadata": {"attempt_id": "a"}, "payment_method_types": ["card"],
        }))
        .expect("an intent")
    }

    fn refund(id: String, amount: i64, intent: &PaymentIntent) -> Refund {
        Refund {
            id,
            object: "refund".into(),
            amount,
            currency: intent.currency.clone(),
            status: "succeeded".into(),
            payment_intent: Some(intent.id.clone()),
            reason: None,
            failure_reason: None,
            metadata: Default::default(),
            created: 1,
        }
    }

    #[test]
    fn key_lifecycle_fresh_in_flight_mismatch_replay() {
        let store = store(10, 10);
        assert_eq!(store.begin("k", "a"), Begin::Fresh);
        assert_eq!(store.begin("k", "a"), Begin::InFlight);
        assert_eq!(store.begin("k", "b"), Begin::Mismatch);
        store.finish("k", answer("{}"));
        assert_eq!(
            store.begin("k", "a"),
            Begin::Replay(Replay::Recorded(answer("{}")))
        );
        assert_eq!(store.begin("k", "b"), Begin::Mismatch);
    }

    #[test]
    fn abandoned_key_can_be_used_afresh() {
        let store = store(10, 10);
        assert_eq!(store.begin("k", "a"), Begin::Fresh);
        store.abandon("k");
        assert_eq!(store.begin("k", "b"), Begin::Fresh);
    }

    #[test]
    fn past_the_answers_a_key_replays_what_it_made_and_a_refusal_is_forgotten() {
        let store = store(10, 1);
        assert_eq!(store.begin("made", "a"), Begin::Fresh);
        let made = store.create(Some("made"), true, intent);
        store.finish("made", answer("first"));
        assert_eq!(store.begin("refused", "a"), Begin::Fresh);
        store.finish("refused", answer("refused"));
        // "made"'s answer is no longer kept; "refused" still is.
        assert_eq!(
            store.begin("made", "a"),
            Begin::Replay(Replay::Intent(Box::new(made)))
        );
        assert_eq!(store.begin("made", "b"), Begin::Mismatch);
        assert_eq!(
            store.begin("refused", "a"),
            Begin::Replay(Replay::Recorded(answer("refused")))
        );
        assert_eq!(store.begin("other", "a"), Begin::Fresh);
        store.finish("other", answer("other"));
        assert_eq!(store.begin("refused", "b"), Begin::Fresh);
    }

    #[test]
    fn past_the_answers_a_key_whose_first_result_was_a_500_replays_a_500_not_what_it_made() {
        let store = store(10, 1);
        assert_eq!(store.begin("failed", "a"), Begin::Fresh);
        store.create(Some("failed"), true, intent);
        store.finish(
            "failed",
            StoredResponse {
                status: 500,
                body: Bytes::from_static(b"{}"),
            },
        );
        assert_eq!(store.begin("other", "a"), Begin::Fresh);
        store.finish("other", answer("other"));
        assert_eq!(store.begin("failed", "a"), Begin::Replay(Replay::Failed));
        assert_eq!(store.begin("failed", "b"), Begin::Mismatch);
        // The key still goes with what it made.
        store.create(None, true, intent);
        for _ in 0..10 {
            store.create(None, true, intent);
        }
        assert_eq!(store.begin("failed", "a"), Begin::Fresh);
    }

    #[test]
    fn past_the_window_an_intent_its_key_and_its_refunds_are_forgotten_and_counted() {
        let store = store(2, 0);
        assert_eq!(store.begin("k0", "a"), Begin::Fresh);
        let first = store.create(Some("k0"), true, intent);
        store.finish("k0", answer("first"));
        let refunded = store
            .refund(&first.id, Some(100), refund, None)
            .expect("refunded");
        let second = store.create(None, false, intent);
        assert_eq!(store.forgotten(), Forgotten::default());
        let third = store.create(None, true, intent);

        assert_eq!(store.get(&first.id), Lookup::Forgotten);
        assert_eq!(store.get(&second.id).found(), Some(second.clone()));
        assert_eq!(store.get("pi_AAAAAAAAzzzzzzzzzzzzzzzz"), Lookup::Forgotten);
        assert_eq!(store.get(&third.id.replace("pi_", "pi_x")), Lookup::Missing);
        assert_eq!(
            store.refund(&first.id, None, refund, None),
            Err(RefundRefused::Forgotten)
        );
        // The refund outlives its charge: refunds have their own window.
        assert_eq!(store.get_refund(&refunded.id).found(), Some(refunded));
        let forgotten = store.forgotten();
        assert_eq!(
            (
                forgotten.intents,
                forgotten.entries,
                forgotten.charged,
                forgotten.refunds
            ),
            (1, 1, 1, 0)
        );
        assert_eq!(forgotten.created_up_to, Some(1));
        assert!(forgotten.since.is_some());
        assert_eq!(store.ledger().len(), 1);
        assert_eq!(
            store.begin("k0", "b"),
            Begin::Fresh,
            "the key went with its intent"
        );
    }

    #[test]
    fn a_key_outlives_its_forgotten_intent_while_it_runs_and_while_its_answer_is_kept() {
        let store = store(1, 1);
        assert_eq!(store.begin("slow", "a"), Begin::Fresh);
        store.create(Some("slow"), true, intent);
        store.create(None, true, intent);
        // Its intent is forgotten, but the request has not answered: a duplicate waits.
        assert_eq!(store.begin("slow", "a"), Begin::InFlight);
        store.finish("slow", answer("first"));
        assert_eq!(
            store.begin("slow", "a"),
            Begin::Replay(Replay::Recorded(answer("first")))
        );
        // Once that answer goes too, so does the key.
        assert_eq!(store.begin("next", "a"), Begin::Fresh);
        store.finish("next", answer("next"));
        assert_eq!(store.begin("slow", "a"), Begin::Fresh);
        assert_eq!(store.lock().keys.len(), 2, "slow (afresh) and next");
    }

    #[test]
    fn what_refunds_hold_outlives_them_and_a_list_missing_one_says_so() {
        let store = store(2, 10);
        let paid = store.create(None, true, intent);
        let make = |id, amount, pi: &PaymentIntent| refund(id, amount, pi);
        for _ in 0..3 {
            store
                .refund(&paid.id, Some(100), make, None)
                .expect("refunded");
        }
        assert_eq!(store.refund_ledger().len(), 2);
        assert_eq!(store.forgotten().refunds, 1);
        assert_eq!(store.refunds_listable(&paid.id), Lookup::Forgotten);
        assert_eq!(
            store.refund(&paid.id, Some(201), make, None),
            Err(RefundRefused::TooLarge { left: 200 })
        );
    }

    #[test]
    fn list_pages_through_kept_intents_newest_first() {
        let store = store(4, 0);
        let ids: Vec<String> = (0..5)
            .map(|_| store.create(None, false, intent).id)
            .collect();
        let page = |cursor| {
            store
                .list(&cursor, 2, |_| true)
                .map(|(data, more)| (data.into_iter().map(|pi| pi.id).collect::<Vec<_>>(), more))
        };
        assert_eq!(
            page(Cursor::Newest),
            Lookup::Found((vec![ids[4].clone(), ids[3].clone()], true))
        );
        assert_eq!(
            page(Cursor::After(ids[3].clone())),
            Lookup::Found((vec![ids[2].clone(), ids[1].clone()], false))
        );
        assert_eq!(
            page(Cursor::Before(ids[1].clone())),
            Lookup::Found((vec![ids[3].clone(), ids[2].clone()], true))
        );
        assert_eq!(
            page(Cursor::Before(ids[3].clone())),
            Lookup::Found((vec![ids[4].clone()], false))
        );
        assert_eq!(page(Cursor::After(ids[0].clone())), Lookup::Forgotten);
    }

    #[test]
    fn a_filtered_list_pages_through_what_the_filter_keeps() {
        let store = store(10, 0);
        let ids: Vec<String> = (0..7)
            .map(|_| store.create(None, false, intent).id)
            .collect();
        // Every other intent, as a `created` window or a filter would keep them.
        let even: Vec<&String> = ids.iter().step_by(2).collect();
        let keep = |kept: &KeptIntent| even.iter().any(|id| *id == kept.id());
        let page = |cursor: Cursor| {
            store
                .list(&cursor, 2, keep)
                .map(|(data, more)| (data.into_iter().map(|pi| pi.id).collect::<Vec<_>>(), more))
        };
        assert_eq!(
            page(Cursor::Newest),
            Lookup::Found((vec![ids[6].clone(), ids[4].clone()], true))
        );
        assert_eq!(
            page(Cursor::After(ids[4].clone())),
            Lookup::Found((vec![ids[2].clone(), ids[0].clone()], false))
        );
        assert_eq!(
            page(Cursor::Before(ids[0].clone())),
            Lookup::Found((vec![ids[4].clone(), ids[2].clone()], true))
        );
        // A cursor the filter does not keep still places the page.
        assert_eq!(
            page(Cursor::Before(ids[3].clone())),
            Lookup::Found((vec![ids[6].clone(), ids[4].clone()], false))
        );
    }
}
