//! The sandbox's memory: payment intents, the ledger and the idempotency keys.
//!
//! One `std::sync::Mutex` guards it all and is never held across an `.await`, so every
//! operation here is atomic; that is what makes 50 concurrent same-key requests charge once.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use actix_web::web::Bytes;
use serde::{Deserialize, Serialize};

use super::random_id;
use crate::providers::stripe::wire::{PaymentIntent, Refund};

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

/// Why a refund was refused, as Stripe words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RefundRefused {
    NoSuchIntent,
    /// The intent has not charged anything (yet).
    NotCharged {
        status: String,
    },
    /// More than what is left of the charge; `left` is what is.
    TooLarge {
        left: i64,
    },
}

/// An answer recorded under an idempotency key, replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StoredResponse {
    pub status: u16,
    pub body: Bytes,
}

enum KeyEntry {
    InFlight {
        fingerprint: String,
    },
    Done {
        fingerprint: String,
        response: StoredResponse,
    },
}

/// What to do with a request that carries an idempotency key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Begin {
    /// First use: the key is now marked in flight and the caller must `finish` or `abandon` it.
    Fresh,
    Replay(StoredResponse),
    /// Same key, other parameters.
    Mismatch,
    /// Same key, first request still running.
    InFlight,
}

struct Stored {
    intent: PaymentIntent,
    idempotency_key: Option<String>,
    confirmed: bool,
}

struct StoredRefund {
    refund: Refund,
    idempotency_key: Option<String>,
}

#[derive(Default)]
struct Inner {
    refunds: HashMap<String, StoredRefund>,
    /// Refund ids in creation order.
    refund_order: Vec<String>,
    intents: HashMap<String, Stored>,
    /// Intent ids in creation order, for the ledger and search.
    order: Vec<String>,
    keys: HashMap<String, KeyEntry>,
}

#[derive(Default)]
pub(super) struct Store {
    inner: Mutex<Inner>,
}

impl Store {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind, still consistent per
        // operation; keep serving rather than poison the simulator.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn begin(&self, key: &str, fingerprint: &str) -> Begin {
        let mut inner = self.lock();
        match inner.keys.get(key) {
            None => {
                inner.keys.insert(
                    key.to_owned(),
                    KeyEntry::InFlight {
                        fingerprint: fingerprint.to_owned(),
                    },
                );
                Begin::Fresh
            }
            Some(KeyEntry::InFlight { fingerprint: first })
            | Some(KeyEntry::Done {
                fingerprint: first, ..
            }) if first != fingerprint => Begin::Mismatch,
            Some(KeyEntry::InFlight { .. }) => Begin::InFlight,
            Some(KeyEntry::Done { response, .. }) => Begin::Replay(response.clone()),
        }
    }

    /// Record the answer of a key begun with [`Store::begin`].
    pub(super) fn finish(&self, key: &str, response: StoredResponse) {
        let mut inner = self.lock();
        if let Some(entry) = inner.keys.get_mut(key) {
            let fingerprint = match entry {
                KeyEntry::InFlight { fingerprint } | KeyEntry::Done { fingerprint, .. } => {
                    std::mem::take(fingerprint)
                }
            };
            *entry = KeyEntry::Done {
                fingerprint,
                response,
            };
        }
    }

    /// Release a key whose request did not run (Stripe saves no result for those).
    pub(super) fn abandon(&self, key: &str) {
        let mut inner = self.lock();
        if matches!(inner.keys.get(key), Some(KeyEntry::InFlight { .. })) {
            inner.keys.remove(key);
        }
    }

    pub(super) fn insert(
        &self,
        intent: PaymentIntent,
        idempotency_key: Option<String>,
        confirmed: bool,
    ) {
        let mut inner = self.lock();
        // A confirm stores the same intent again: it keeps its place in the order.
        if !inner.intents.contains_key(&intent.id) {
            inner.order.push(intent.id.clone());
        }
        inner.intents.insert(
            intent.id.clone(),
            Stored {
                intent,
                idempotency_key,
                confirmed,
            },
        );
    }

    /// Move an intent from `from` to `to`; `None` if it was not in `from` (someone else
    /// moved it first).
    pub(super) fn transition(&self, id: &str, from: &str, to: &str) -> Option<PaymentIntent> {
        let mut inner = self.lock();
        let stored = inner.intents.get_mut(id)?;
        if stored.intent.status != from {
            return None;
        }
        stored.intent.status = to.to_owned();
        if to == "succeeded" {
            stored.intent.amount_received = stored.intent.amount;
            // The charge exists from now on: retrieve shows it, like the webhook does.
            stored.intent.latest_charge = Some(random_id("ch"));
        }
        Some(stored.intent.clone())
    }

    /// Cancels an intent that has not started to move money; the intent as it is after, or
    /// the status that forbids it.
    pub(super) fn cancel(
        &self,
        id: &str,
        reason: Option<String>,
    ) -> Option<Result<PaymentIntent, String>> {
        let mut inner = self.lock();
        let stored = inner.intents.get_mut(id)?;
        let intent = &mut stored.intent;
        let cancelable = matches!(
            intent.status.as_str(),
            "requires_payment_method"
                | "requires_confirmation"
                | "requires_action"
                | "requires_capture"
        );
        if !cancelable {
            return Some(Err(intent.status.clone()));
        }
        intent.status = "canceled".into();
        intent.canceled_at = Some(chrono::Utc::now().timestamp());
        intent.cancellation_reason = reason;
        Some(Ok(intent.clone()))
    }

    pub(super) fn get(&self, id: &str) -> Option<PaymentIntent> {
        self.lock().intents.get(id).map(|s| s.intent.clone())
    }

    /// Intents, oldest first, for which `keep` holds.
    pub(super) fn filter(&self, keep: impl Fn(&PaymentIntent) -> bool) -> Vec<PaymentIntent> {
        let inner = self.lock();
        inner
            .order
            .iter()
            .filter_map(|id| inner.intents.get(id))
            .map(|s| &s.intent)
            .filter(|intent| keep(intent))
            .cloned()
            .collect()
    }

    /// Refunds `amount` (default: what is left) of `intent_id`'s charge, if that much is
    /// left: what is left and the new refund are one decision under the store's lock.
    pub(super) fn refund(
        &self,
        intent_id: &str,
        amount: Option<i64>,
        make: impl FnOnce(i64, &PaymentIntent) -> Refund,
        idempotency_key: Option<String>,
    ) -> Result<Refund, RefundRefused> {
        let mut inner = self.lock();
        let intent = match inner.intents.get(intent_id) {
            Some(stored) => stored.intent.clone(),
            None => return Err(RefundRefused::NoSuchIntent),
        };
        if intent.status != "succeeded" {
            return Err(RefundRefused::NotCharged {
                status: intent.status,
            });
        }
        let held: i64 = inner
            .refunds
            .values()
            .map(|r| &r.refund)
            .filter(|r| r.payment_intent.as_deref() == Some(intent_id))
            .filter(|r| !matches!(r.status.as_str(), "failed" | "canceled"))
            .map(|r| r.amount)
            .sum();
        let left = intent.amount - held;
        let amount = amount.unwrap_or(left);
        if amount <= 0 || amount > left {
            return Err(RefundRefused::TooLarge { left });
        }
        let refund = make(amount, &intent);
        inner.refund_order.push(refund.id.clone());
        inner.refunds.insert(
            refund.id.clone(),
            StoredRefund {
                refund: refund.clone(),
                idempotency_key,
            },
        );
        Ok(refund)
    }

    /// Move a refund from `from` to `to` (with `failure_reason` for `failed`); `None` if it
    /// was not in `from`.
    pub(super) fn settle_refund(
        &self,
        id: &str,
        from: &str,
        to: &str,
        failure_reason: Option<&str>,
    ) -> Option<Refund> {
        let mut inner = self.lock();
        let stored = inner.refunds.get_mut(id)?;
        if stored.refund.status != from {
            return None;
        }
        stored.refund.status = to.to_owned();
        stored.refund.failure_reason = failure_reason.map(str::to_owned);
        Some(stored.refund.clone())
    }

    /// The refunds of one intent, newest first, as Stripe lists them.
    pub(super) fn refunds_of_intent(&self, intent_id: &str) -> Vec<Refund> {
        let inner = self.lock();
        inner
            .refund_order
            .iter()
            .rev()
            .filter_map(|id| inner.refunds.get(id))
            .map(|stored| stored.refund.clone())
            .filter(|refund| refund.payment_intent.as_deref() == Some(intent_id))
            .collect()
    }

    pub(super) fn get_refund(&self, id: &str) -> Option<Refund> {
        self.lock().refunds.get(id).map(|r| r.refund.clone())
    }

    pub(super) fn refund_ledger(&self) -> Vec<RefundEntry> {
        let inner = self.lock();
        inner
            .refund_order
            .iter()
            .filter_map(|id| inner.refunds.get(id))
            .map(|stored| {
                let refund = &stored.refund;
                RefundEntry {
                    protocol: super::adyen::protocol_of(&refund.metadata).to_owned(),
                    provider_id: refund.id.clone(),
                    payment_intent: refund.payment_intent.clone().unwrap_or_default(),
                    idempotency_key: stored.idempotency_key.clone(),
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
            .order
            .iter()
            .filter_map(|id| inner.intents.get(id))
            .filter(|s| s.confirmed)
            .map(|s| {
                let pi = &s.intent;
                LedgerEntry {
                    protocol: super::adyen::protocol_of(&pi.metadata).to_owned(),
                    provider_id: pi.id.clone(),
                    idempotency_key: s.idempotency_key.clone(),
                    attempt_id: pi.metadata.get("attempt_id").cloned(),
                    order_id: pi.metadata.get("order_id").cloned(),
                    merchant_id: pi.metadata.get("merchant_id").cloned(),
                    amount: pi.amount,
                    currency: pi.currency.clone(),
                    payment_method: pi.payment_method.clone(),
                    status: pi.status.clone(),
                    created: pi.created,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lifecycle_fresh_in_flight_mismatch_replay() {
        let store = Store::default();
        assert_eq!(store.begin("k", "a"), Begin::Fresh);
        assert_eq!(store.begin("k", "a"), Begin::InFlight);
        assert_eq!(store.begin("k", "b"), Begin::Mismatch);
        let response = StoredResponse {
            status: 200,
            body: Bytes::from_static(b"{}"),
        };
        store.finish("k", response.clone());
        assert_eq!(store.begin("k", "a"), Begin::Replay(response));
        assert_eq!(store.begin("k", "b"), Begin::Mismatch);
    }

    #[test]
    fn abandoned_key_can_be_used_afresh() {
        let store = Store::default();
        assert_eq!(store.begin("k", "a"), Begin::Fresh);
        store.abandon("k");
        assert_eq!(store.begin("k", "b"), Begin::Fresh);
    }
}
