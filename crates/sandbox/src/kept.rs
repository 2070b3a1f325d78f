//! An intent as the store keeps it: every field of the wire `PaymentIntent`, in about a
//! quarter of the memory (its strings packed into one allocation, its status and constants
//! not spelled out), so that the window of intents the sandbox remembers (README, "The
//! sandbox's memory") can be long.

use std::collections::BTreeMap;

use super::packed::Packed;
use payorch_wire::stripe::{LastPaymentError, PaymentIntent};

/// The optional strings of an intent, in packing order after id, status and currency.
const PAYMENT_METHOD: u8 = 1;
const CLIENT_SECRET: u8 = 1 << 1;
const LATEST_CHARGE: u8 = 1 << 2;
const DESCRIPTION: u8 = 1 << 3;
const CANCELLATION_REASON: u8 = 1 << 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeptIntent {
    /// id, status, currency, the optional strings `present` names, the `keys` idempotency
    /// keys, then the metadata as key, value, key, value….
    strings: Packed,
    present: u8,
    keys: u32,
    /// Whether the request that last stored it carried a key (the last of the keys).
    keyed: bool,
    amount: i64,
    amount_received: i64,
    created: i64,
    canceled_at: Option<i64>,
    last_payment_error: Option<Box<LastPaymentError>>,
    /// Confirmed: in the ledger.
    pub confirmed: bool,
    /// What its refunds that have not failed hold of the charge.
    pub held: i64,
    /// Some of its refunds are forgotten: a list of its refunds is incomplete.
    pub refunds_forgotten: bool,
}

impl KeptIntent {
    /// `intent` as kept, made or last confirmed under `keys` (oldest first; the last one is
    /// the request's own when `keyed`).
    pub(super) fn new(intent: &PaymentIntent, keys: &[&str], keyed: bool, confirmed: bool) -> Self {
        let optional = [
            (PAYMENT_METHOD, intent.payment_method.as_deref()),
            (CLIENT_SECRET, intent.client_secret.as_deref()),
            (LATEST_CHARGE, intent.latest_charge.as_deref()),
            (DESCRIPTION, intent.description.as_deref()),
            (CANCELLATION_REASON, intent.cancellation_reason.as_deref()),
        ];
        let present = optional
            .iter()
            .filter(|(_, value)| value.is_some())
            .fold(0, |bits, (bit, _)| bits | bit);
        let strings = [
            intent.id.as_str(),
            intent.status.as_str(),
            intent.currency.as_str(),
        ]
        .into_iter()
        .chain(optional.into_iter().filter_map(|(_, value)| value))
        .chain(keys.iter().copied())
        .chain(
            intent
                .metadata
                .iter()
                .flat_map(|(key, value)| [key.as_str(), value.as_str()]),
        );
        KeptIntent {
            strings: Packed::new(strings),
            present,
            keys: keys.len() as u32,
            keyed,
            amount: intent.amount,
            amount_received: intent.amount_received,
            created: intent.created,
            canceled_at: intent.canceled_at,
            last_payment_error: intent.last_payment_error.clone().map(Box::new),
            confirmed,
            held: 0,
            refunds_forgotten: false,
        }
    }

    /// The wire intent, as it was stored.
    pub(super) fn intent(&self) -> PaymentIntent {
        let owned = |bit| self.optional(bit).map(str::to_owned);
        PaymentIntent {
            id: self.id().to_owned(),
            // What the sandbox writes on every intent (`routes::new_intent`).
            object: "payment_intent".into(),
            amount: self.amount,
            amount_received: self.amount_received,
            currency: self.currency().to_owned(),
            status: self.status().to_owned(),
            payment_method: owned(PAYMENT_METHOD),
            metadata: self
                .metadata_pairs()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect::<BTreeMap<_, _>>(),
            last_payment_error: self.last_payment_error.as_deref().cloned(),
            latest_charge: owned(LATEST_CHARGE),
            description: owned(DESCRIPTION),
            capture_method: "automatic".into(),
            confirmation_method: "automatic".into(),
            created: self.created,
            livemode: false,
            client_secret: owned(CLIENT_SECRET),
            payment_method_types: vec!["card".into()],
            amount_capturable: 0,
            next_action: None,
            canceled_at: self.canceled_at,
            cancellation_reason: owned(CANCELLATION_REASON),
        }
    }

    /// Stores `intent` in its place (a settlement, a cancel): same keys, same ledger state.
    pub(super) fn replace(&mut self, intent: &PaymentIntent) {
        let keys: Vec<&str> = self.keys().collect();
        *self = KeptIntent {
            held: self.held,
            refunds_forgotten: self.refunds_forgotten,
            ..KeptIntent::new(intent, &keys, self.keyed, self.confirmed)
        };
    }

    /// Stores `intent` in its place as a request stored it again (a confirm), adding the
    /// request's `key` to the keys.
    pub(super) fn restore(&mut self, intent: &PaymentIntent, key: Option<&str>, confirmed: bool) {
        let mut keys: Vec<&str> = self.keys().collect();
        keys.extend(key);
        *self = KeptIntent {
            held: self.held,
            refunds_forgotten: self.refunds_forgotten,
            ..KeptIntent::new(intent, &keys, key.is_some(), confirmed)
        };
    }

    pub(super) fn id(&self) -> &str {
        self.strings.iter().next().unwrap_or_default()
    }

    pub(super) fn status(&self) -> &str {
        self.strings.iter().nth(1).unwrap_or_default()
    }

    pub(super) fn currency(&self) -> &str {
        self.strings.iter().nth(2).unwrap_or_default()
    }

    pub(super) fn amount(&self) -> i64 {
        self.amount
    }

    pub(super) fn created(&self) -> i64 {
        self.created
    }

    /// The optional string `bit` names.
    fn optional(&self, bit: u8) -> Option<&str> {
        if self.present & bit == 0 {
            return None;
        }
        let before = (self.present & (bit - 1)).count_ones() as usize;
        self.strings.iter().nth(3 + before)
    }

    /// The idempotency keys it was made and confirmed under, oldest first.
    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        let skip = 3 + self.present.count_ones() as usize;
        self.strings.iter().skip(skip).take(self.keys as usize)
    }

    pub(super) fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata_pairs()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    fn metadata_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        let skip = 3 + self.present.count_ones() as usize + self.keys as usize;
        let mut items = self.strings.iter().skip(skip);
        std::iter::from_fn(move || Some((items.next()?, items.next()?)))
    }

    /// The key of the request that last stored it, as the ledger names it.
    pub(super) fn ledger_key(&self) -> Option<&str> {
        if self.keyed {
            self.keys().last()
        } else {
            None
        }
    }

    /// Money moved or is moving.
    pub(super) fn is_charged(&self) -> bool {
        matches!(self.status(), "succeeded" | "processing")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent() -> PaymentIntent {
        PaymentIntent {
            id: "pi_AAAAAAAB0123456789abcdef".into(),
            object: "payment_intent".into(),
            amount: 1999,
            amount_received: 1999,
            currency: "eur".into(),
            status: "succeeded".into(),
            payment_method: Some("pm_card_visa".into()),
            metadata: BTreeMap::from([
                ("attempt_id".into(), "pay_1".into()),
                ("order_id".into(), "ord_1".into()),
            ]),
            last_payment_error: None,
            latest_charge: Some("ch_1".into()),
            description: None,
            capture_method: "automatic".into(),
            confirmation_method: "automatic".into(),
            created: 1_790_000_000,
            livemode: false,
            client_secret: Some("pi_AAAAAAAB0123456789abcdef_secret_x".into()),
            payment_method_types: vec!["card".into()],
            amount_capturable: 0,
            next_action: None,
            canceled_at: None,
            cancellation_reason: None,
        }
    }

    #[test]
    fn a_kept_intent_is_the_intent_it_was_made_from() {
        let paid = intent();
        let kept = KeptIntent::new(&paid, &["k1"], true, true);
        assert_eq!(kept.intent(), paid);
        assert_eq!(kept.metadata("order_id"), Some("ord_1"));
        assert_eq!(kept.metadata("other"), None);
        assert_eq!(
            (kept.id(), kept.status(), kept.currency()),
            (paid.id.as_str(), "succeeded", "eur")
        );
        assert_eq!(kept.ledger_key(), Some("k1"));

        let mut declined = intent();
        declined.status = "requires_payment_method".into();
        declined.latest_charge = None;
        declined.payment_method = None;
        declined.description = Some("a description".into());
        declined.last_payment_error = Some(LastPaymentError {
            kind: "card_error".into(),
            code: Some("card_declined".into()),
            decline_code: Some("generic_decline".into()),
            message: Some("Your card was declined.".into()),
        });
        declined.metadata.clear();
        let kept = KeptIntent::new(&declined, &[], false, true);
        assert_eq!(kept.intent(), declined);
        assert_eq!(kept.ledger_key(), None);
    }

    #[test]
    fn a_settlement_keeps_the_keys_and_a_confirm_adds_its_own() {
        let mut unconfirmed = intent();
        unconfirmed.status = "requires_confirmation".into();
        let mut kept = KeptIntent::new(&unconfirmed, &["create"], true, false);
        kept.held = 500;
        let paid = intent();
        kept.restore(&paid, Some("confirm"), true);
        assert_eq!(kept.intent(), paid);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["create", "confirm"]);
        assert_eq!((kept.held, kept.confirmed), (500, true));
        assert_eq!(kept.ledger_key(), Some("confirm"));

        let mut canceled = intent();
        canceled.status = "canceled".into();
        canceled.canceled_at = Some(1_790_000_100);
        canceled.cancellation_reason = Some("requested_by_customer".into());
        kept.replace(&canceled);
        assert_eq!(kept.intent(), canceled);
        assert_eq!(kept.ledger_key(), Some("confirm"));
        kept.restore(&canceled, None, true);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["create", "confirm"]);
        assert_eq!((kept.ledger_key(), kept.held), (None, 500));
    }
}
