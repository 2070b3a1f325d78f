//! A capture or a cancel of a payment, as the sandbox keeps it with its intent (docs/operations/running.md, "The
//! sandbox's memory"): what the ledger's `captures` and `voids` show, and what a replay of
//! the Adyen face's answer is made from once that answer is no longer kept byte for byte.

/// What a modification does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Takes (part of) a hold; releases the rest.
    Capture,
    /// Releases a hold, or ends an intent that holds nothing (Stripe's cancel, Adyen's cancel
    /// by `pspReference`).
    Cancel,
    /// Adyen's cancel by the payment's `reference` (`POST /v71/cancels`).
    TechnicalCancel,
}

/// One capture or cancel that was made (or, on the Adyen face, taken and refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Modification {
    pub kind: Kind,
    /// Its own reference on the Adyen face (its `pspReference`); `None` on the Stripe face,
    /// where a capture or cancel is a move of the intent itself.
    pub psp: Option<String>,
    /// The `Idempotency-Key` of the request that made it.
    pub key: Option<String>,
    /// The merchant's `reference` of it (Adyen).
    pub reference: Option<String>,
    /// What a capture took.
    pub amount: i64,
    /// What went back to the payer: the hold a cancel released, what a capture left.
    pub released: i64,
    /// Refused ones are kept on the Adyen face only, which answers `received` first and
    /// tells the outcome in a notification.
    pub succeeded: bool,
    /// Why it was refused, or the cancellation reason the merchant gave.
    pub reason: Option<String>,
    pub created: i64,
}

impl Modification {
    /// Money moved to the merchant.
    pub(super) fn is_capture(&self) -> bool {
        self.kind == Kind::Capture && self.succeeded
    }

    /// A hold went back to the payer.
    pub(super) fn is_void(&self) -> bool {
        matches!(self.kind, Kind::Cancel | Kind::TechnicalCancel)
            && self.succeeded
            && self.released > 0
    }
}
