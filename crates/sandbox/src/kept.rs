//! An intent as the store keeps it: every field of the wire `PaymentIntent`, in about a
//! quarter of the memory (its strings packed into one allocation, its status and constants
//! not spelled out), so that the window of intents the sandbox remembers (docs/operations/running.md, "The
//! sandbox's memory") can be long. Its captures and cancels are kept with it, and go with it.

use std::collections::BTreeMap;

use super::modification::Modification;
use super::packed::Packed;
use payorch_wire::stripe::{LastPaymentError, NextAction, PaymentIntent, RedirectToUrl};

/// The optional strings of an intent, in packing order after id, status and currency.
const PAYMENT_METHOD: u8 = 1;
const CLIENT_SECRET: u8 = 1 << 1;
const LATEST_CHARGE: u8 = 1 << 2;
const DESCRIPTION: u8 = 1 << 3;
const CANCELLATION_REASON: u8 = 1 << 4;
/// Only when it is not `automatic`, the default.
const CAPTURE_METHOD: u8 = 1 << 5;
/// The 3-D Secure challenge's page, and where it sends the customer back.
const CHALLENGE_URL: u8 = 1 << 6;
const RETURN_URL: u8 = 1 << 7;

/// What happened to an intent that its fields do not show: `flags` bits.
/// It was authorised for a later capture: a hold was placed.
pub(super) const HELD: u8 = 1;
/// Its customer passed the 3-D Secure challenge.
pub(super) const AUTHENTICATED: u8 = 1 << 1;
/// Its customer failed the 3-D Secure challenge.
pub(super) const AUTHENTICATION_FAILED: u8 = 1 << 2;
/// The fault of its `pm_sandbox_capture_*` token has happened (it happens once).
pub(super) const FAULT_SPENT: u8 = 1 << 3;

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
    /// `HELD`, `AUTHENTICATED`, … .
    flags: u8,
    /// Its captures and cancels, oldest first; few intents have any, and an empty slice
    /// allocates nothing.
    modifications: Box<[Modification]>,
}

/// A 3-D Secure challenge's page and return URL.
struct Challenge<'a> {
    url: &'a str,
    return_url: Option<&'a str>,
}

/// The challenge `intent`'s `next_action` names, if any.
fn challenge_of(intent: &PaymentIntent) -> Option<(String, Option<String>)> {
    let action: NextAction = serde_json::from_value(intent.next_action.clone()?).ok()?;
    let redirect = action.redirect_to_url?;
    Some((redirect.url, redirect.return_url))
}

impl KeptIntent {
    /// `intent` as kept, made or last confirmed under `keys` (oldest first; the last one is
    /// the request's own when `keyed`).
    pub(super) fn new(intent: &PaymentIntent, keys: &[&str], keyed: bool, confirmed: bool) -> Self {
        let challenge = challenge_of(intent);
        let challenge = challenge.as_ref().map(|(url, return_url)| Challenge {
            url,
            return_url: return_url.as_deref(),
        });
        Self::packed(intent, keys, keyed, confirmed, challenge)
    }

    fn packed(
        intent: &PaymentIntent,
        keys: &[&str],
        keyed: bool,
        confirmed: bool,
        challenge: Option<Challenge>,
    ) -> Self {
        let capture_method = Some(intent.capture_method.as_str()).filter(|m| *m != "automatic");
        let optional = [
            (PAYMENT_METHOD, intent.payment_method.as_deref()),
            (CLIENT_SECRET, intent.client_secret.as_deref()),
            (LATEST_CHARGE, intent.latest_charge.as_deref()),
            (DESCRIPTION, intent.description.as_deref()),
            (CANCELLATION_REASON, intent.cancellation_reason.as_deref()),
            (CAPTURE_METHOD, capture_method),
            (CHALLENGE_URL, challenge.as_ref().map(|c| c.url)),
            (RETURN_URL, challenge.as_ref().and_then(|c| c.return_url)),
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
        let flags = if intent.status == "requires_capture" {
            HELD
        } else {
            0
        };
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
            flags,
            modifications: Box::default(),
        }
    }

    /// `intent` stored in this one's place under `keys`: what the wire intent does not carry
    /// (its refunds, what happened to it, its challenge once it is over) stays.
    fn successor(
        &self,
        intent: &PaymentIntent,
        keys: &[&str],
        keyed: bool,
        confirmed: bool,
    ) -> Self {
        let mut next = if challenge_of(intent).is_some() {
            KeptIntent::new(intent, keys, keyed, confirmed)
        } else {
            let challenge = self.optional(CHALLENGE_URL).map(|url| Challenge {
                url,
                return_url: self.optional(RETURN_URL),
            });
            KeptIntent::packed(intent, keys, keyed, confirmed, challenge)
        };
        next.held = self.held;
        next.refunds_forgotten = self.refunds_forgotten;
        next.flags |= self.flags;
        next.modifications = self.modifications.clone();
        next
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
            capture_method: self.capture_method().to_owned(),
            confirmation_method: "automatic".into(),
            created: self.created,
            livemode: false,
            client_secret: owned(CLIENT_SECRET),
            payment_method_types: vec!["card".into()],
            // What a hold would give the merchant: all of it, until it is captured or
            // released.
            amount_capturable: if self.status() == "requires_capture" {
                self.amount
            } else {
                0
            },
            next_action: self.next_action(),
            canceled_at: self.canceled_at,
            cancellation_reason: owned(CANCELLATION_REASON),
        }
    }

    /// Stripe shows the redirect only while the intent waits for it.
    fn next_action(&self) -> Option<serde_json::Value> {
        if self.status() != "requires_action" {
            return None;
        }
        let action = NextAction {
            kind: "redirect_to_url".into(),
            redirect_to_url: Some(RedirectToUrl {
                url: self.optional(CHALLENGE_URL)?.to_owned(),
                return_url: self.return_url().map(str::to_owned),
            }),
        };
        serde_json::to_value(action).ok()
    }

    pub(super) fn capture_method(&self) -> &str {
        self.optional(CAPTURE_METHOD).unwrap_or("automatic")
    }

    /// Where the 3-D Secure challenge sends the customer back, if it has one.
    pub(super) fn return_url(&self) -> Option<&str> {
        self.optional(RETURN_URL)
    }

    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub(super) fn mark(&mut self, flag: u8) {
        self.flags |= flag;
    }

    /// Its captures and cancels, oldest first.
    pub(super) fn modifications(&self) -> &[Modification] {
        &self.modifications
    }

    pub(super) fn add_modification(&mut self, modification: Modification) {
        let mut modifications = std::mem::take(&mut self.modifications).into_vec();
        modifications.push(modification);
        self.modifications = modifications.into_boxed_slice();
    }

    pub(super) fn amount_received(&self) -> i64 {
        self.amount_received
    }

    /// Stores `intent` in its place (a settlement, a cancel): same keys, same ledger state.
    pub(super) fn replace(&mut self, intent: &PaymentIntent) {
        let keys: Vec<&str> = self.keys().collect();
        *self = self.successor(intent, &keys, self.keyed, self.confirmed);
    }

    /// Stores `intent` in its place as a request stored it again (a confirm), adding the
    /// request's `key` to the keys.
    pub(super) fn restore(&mut self, intent: &PaymentIntent, key: Option<&str>, confirmed: bool) {
        let mut keys: Vec<&str> = self.keys().collect();
        keys.extend(key);
        *self = self.successor(intent, &keys, key.is_some(), confirmed);
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
    fn a_challenge_a_hold_and_their_history_outlive_the_moves_that_end_them() {
        let mut waiting = intent();
        waiting.status = "requires_action".into();
        waiting.capture_method = "manual".into();
        waiting.amount_received = 0;
        waiting.next_action = Some(serde_json::json!({
            "type": "redirect_to_url",
            "redirect_to_url": {"url": "http://sandbox/__sandbox/3ds/pi_1", "return_url": "https://shop/back"},
        }));
        let mut kept = KeptIntent::new(&waiting, &["create"], true, true);
        assert_eq!(kept.intent(), waiting);
        assert_eq!(kept.capture_method(), "manual");

        let mut held = kept.intent();
        held.status = "requires_capture".into();
        held.next_action = None;
        kept.replace(&held);
        kept.mark(AUTHENTICATED);
        held.amount_capturable = held.amount;
        assert_eq!(kept.intent(), held, "the redirect goes with its status");
        assert_eq!(
            kept.return_url(),
            Some("https://shop/back"),
            "its way back stays"
        );

        let mut captured = held.clone();
        captured.status = "succeeded".into();
        kept.add_modification(Modification {
            kind: crate::modification::Kind::Capture,
            psp: None,
            key: Some("capture".into()),
            reference: None,
            amount: 1999,
            released: 0,
            succeeded: true,
            reason: None,
            created: 1,
        });
        kept.replace(&captured);
        assert!(kept.has(HELD) && kept.has(AUTHENTICATED));
        assert!(!kept.has(FAULT_SPENT));
        assert_eq!(kept.modifications().len(), 1);
        assert_eq!(kept.intent().amount_capturable, 0);
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
