//! A dispute as both providers tell of it (docs/guides/disputes.md): payorch's words for its
//! status, stage and reason, and how Stripe's `charge.dispute.*` events and Adyen's chargeback
//! notifications map onto them. Here, in the provider layer, so the adapters can name them;
//! `payments::disputes` re-exports them.
//!
//! The statuses are Stripe's seven words: documented and well known, they say everything
//! Adyen's notifications say but the stage, which is kept beside them.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

use crate::words::words;

words! {
    /// Where a dispute stands (`disputes.status`, the `dispute_status` domain).
    #[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum DisputeStatus {
        /// An inquiry (no money taken yet): answer it, or it may become a chargeback.
        WarningNeedsResponse => "warning_needs_response",
        /// The inquiry's answer is with the bank.
        WarningUnderReview => "warning_under_review",
        /// The inquiry ended without a chargeback. Final.
        WarningClosed => "warning_closed",
        /// The money is taken back: answer with evidence before `evidence_due_by`, or accept.
        NeedsResponse => "needs_response",
        /// The evidence is with the bank; the money is still taken back.
        UnderReview => "under_review",
        /// The merchant won: the money came back.
        Won => "won",
        /// The merchant lost: the payer keeps the money.
        Lost => "lost",
    }
}

impl DisputeStatus {
    /// The payer has the money back while the dispute is in this status: a chargeback not
    /// reversed (the migration's `dispute_holds`).
    pub fn holds(self) -> bool {
        matches!(self, Self::NeedsResponse | Self::UnderReview | Self::Lost)
    }

    /// The provider has decided (for now: Adyen's second chargeback and pre-arbitration may
    /// reopen a won or lost dispute).
    pub fn closed(self) -> bool {
        matches!(self, Self::Won | Self::Lost | Self::WarningClosed)
    }
}

words! {
    /// How far a dispute went (`disputes.stage`), in this order; never back.
    #[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum DisputeStage {
        /// A request for information or notification of chargeback: nothing taken yet.
        Inquiry => "inquiry",
        Chargeback => "chargeback",
        /// The bank disputed the merchant's defence (Adyen `SECOND_CHARGEBACK`).
        SecondChargeback => "second_chargeback",
        /// The banks' last word before the scheme's (Adyen `PREARBITRATION_WON`,
        /// `PREARBITRATION_LOST`, `PREARBITRATION_ISSUER_WITHDRAWN`).
        PreArbitration => "pre_arbitration",
        /// The card scheme rules, finally (Adyen `SCHEME_ARBITRATION_WON`, `_LOST`).
        Arbitration => "arbitration",
    }
}

impl DisputeStage {
    /// Its place in the order above (the migration's `dispute_stage_rank`).
    pub fn rank(self) -> u8 {
        match self {
            Self::Inquiry => 0,
            Self::Chargeback => 1,
            Self::SecondChargeback => 2,
            Self::PreArbitration => 3,
            Self::Arbitration => 4,
        }
    }
}

words! {
    /// Why the payer disputes, in Stripe's words (`disputes.reason`); the provider's own
    /// reason is kept beside it.
    #[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum DisputeReason {
        BankCannotProcess => "bank_cannot_process",
        CreditNotProcessed => "credit_not_processed",
        CustomerInitiated => "customer_initiated",
        DebitNotAuthorized => "debit_not_authorized",
        Duplicate => "duplicate",
        Fraudulent => "fraudulent",
        /// Any reason payorch has no word of its own for.
        General => "general",
        IncorrectAccountDetails => "incorrect_account_details",
        InsufficientFunds => "insufficient_funds",
        ProductNotReceived => "product_not_received",
        ProductUnacceptable => "product_unacceptable",
        SubscriptionCanceled => "subscription_canceled",
        Unrecognized => "unrecognized",
    }
}

/// Stripe's dispute event types payorch applies: each carries the whole dispute object.
pub const STRIPE_DISPUTE_EVENTS: [&str; 5] = [
    "charge.dispute.created",
    "charge.dispute.updated",
    "charge.dispute.closed",
    "charge.dispute.funds_withdrawn",
    "charge.dispute.funds_reinstated",
];

/// Adyen's dispute notifications (Webhooks-v1, `DisputesNotificationRequestItem.eventCode`).
pub const NOTIFICATION_OF_CHARGEBACK: &str = "NOTIFICATION_OF_CHARGEBACK";
pub const REQUEST_FOR_INFORMATION: &str = "REQUEST_FOR_INFORMATION";
pub const INFORMATION_SUPPLIED: &str = "INFORMATION_SUPPLIED";
pub const CHARGEBACK: &str = "CHARGEBACK";
pub const CHARGEBACK_REVERSED: &str = "CHARGEBACK_REVERSED";
pub const SECOND_CHARGEBACK: &str = "SECOND_CHARGEBACK";
pub const PREARBITRATION_WON: &str = "PREARBITRATION_WON";
pub const PREARBITRATION_LOST: &str = "PREARBITRATION_LOST";
pub const DISPUTE_DEFENSE_PERIOD_ENDED: &str = "DISPUTE_DEFENSE_PERIOD_ENDED";
pub const ISSUER_RESPONSE_TIMEFRAME_EXPIRED: &str = "ISSUER_RESPONSE_TIMEFRAME_EXPIRED";
pub const PREARBITRATION_ISSUER_WITHDRAWN: &str = "PREARBITRATION_ISSUER_WITHDRAWN";
pub const SCHEME_ARBITRATION_WON: &str = "SCHEME_ARBITRATION_WON";
pub const SCHEME_ARBITRATION_LOST: &str = "SCHEME_ARBITRATION_LOST";
/// Codes whose outcome for the merchant the pinned Webhooks-v1 leaves open ("the
/// pre-arbitration case was accepted": by whom?; a case opened or escalated: is the money
/// taken again?). Applied only when the item's `disputeStatus` says `Won` or `Lost`;
/// otherwise recorded and listed for a human ([`adyen_unclear`]), never guessed.
pub const PREARBITRATION_OPEN: &str = "PREARBITRATION_OPEN";
pub const PREARBITRATION_ACCEPTED: &str = "PREARBITRATION_ACCEPTED";
pub const PREARBITRATION_DECLINED: &str = "PREARBITRATION_DECLINED";
pub const SCHEME_ARBITRATION: &str = "SCHEME_ARBITRATION";

/// The codes above whose outcome is read from the item's `disputeStatus` alone.
pub const ADYEN_UNCLEAR_CODES: [&str; 4] = [
    PREARBITRATION_OPEN,
    PREARBITRATION_ACCEPTED,
    PREARBITRATION_DECLINED,
    SCHEME_ARBITRATION,
];

/// Every Adyen event code above.
pub const ADYEN_DISPUTE_CODES: [&str; 17] = [
    NOTIFICATION_OF_CHARGEBACK,
    REQUEST_FOR_INFORMATION,
    INFORMATION_SUPPLIED,
    CHARGEBACK,
    CHARGEBACK_REVERSED,
    SECOND_CHARGEBACK,
    PREARBITRATION_WON,
    PREARBITRATION_LOST,
    DISPUTE_DEFENSE_PERIOD_ENDED,
    ISSUER_RESPONSE_TIMEFRAME_EXPIRED,
    PREARBITRATION_ISSUER_WITHDRAWN,
    SCHEME_ARBITRATION_WON,
    SCHEME_ARBITRATION_LOST,
    PREARBITRATION_OPEN,
    PREARBITRATION_ACCEPTED,
    PREARBITRATION_DECLINED,
    SCHEME_ARBITRATION,
];

/// A Stripe dispute object's status, stage and reason. Stripe tells of an inquiry by its
/// `warning_*` statuses; anything else is a chargeback (Stripe's API has no later stage).
pub fn stripe_status(status: &str) -> Option<(DisputeStatus, DisputeStage)> {
    let status = DisputeStatus::parse(status)?;
    let stage = if status.as_str().starts_with("warning_") {
        DisputeStage::Inquiry
    } else {
        DisputeStage::Chargeback
    };
    Some((status, stage))
}

/// Stripe's reason, in payorch's words; a word payorch lacks (`check_returned`, a new one)
/// is `general`, its raw word kept as `provider_reason`.
pub fn stripe_reason(reason: &str) -> DisputeReason {
    DisputeReason::parse(reason).unwrap_or(DisputeReason::General)
}

/// Stripe's `evidence_details.due_by`: a Unix time, `0` or null when no answer is allowed.
pub fn stripe_due_by(due_by: Option<&Value>) -> Option<DateTime<Utc>> {
    due_by
        .and_then(Value::as_i64)
        .filter(|t| *t > 0)
        .and_then(|t| Utc.timestamp_opt(t, 0).single())
}

/// What an Adyen dispute notification says of its dispute's status and stage, read with its
/// `additionalData` (`defendable`, `disputeStatus`); `None` for another event code.
///
/// A `CHARGEBACK` Adyen says cannot be defended (`defendable: "false"`) or that was accepted
/// or lost is lost at once. `DISPUTE_DEFENSE_PERIOD_ENDED` ends a dispute nobody answered
/// (lost) and leaves one answered under review (`disputeStatus` `Responded` or `Pending`).
/// `ISSUER_RESPONSE_TIMEFRAME_EXPIRED` is the issuer accepting the defence or not answering
/// in time (Adyen's example says `disputeStatus: Won`). One of [`ADYEN_UNCLEAR_CODES`] is
/// applied only as its `disputeStatus` (`Won`, `Lost`) says, at its stage; otherwise `None`.
pub fn adyen_status(
    code: &str,
    additional: &dyn Fn(&str) -> Option<String>,
) -> Option<(DisputeStatus, DisputeStage)> {
    use DisputeStage::*;
    use DisputeStatus::*;
    let dispute_status = additional("disputeStatus");
    let status_is = |words: &[&str]| {
        dispute_status
            .as_deref()
            .is_some_and(|s| words.iter().any(|w| s.eq_ignore_ascii_case(w)))
    };
    Some(match code {
        NOTIFICATION_OF_CHARGEBACK | REQUEST_FOR_INFORMATION => (WarningNeedsResponse, Inquiry),
        INFORMATION_SUPPLIED => (WarningUnderReview, Inquiry),
        CHARGEBACK => {
            let undefendable =
                additional("defendable").is_some_and(|d| d.eq_ignore_ascii_case("false"));
            if undefendable || status_is(&["Accepted", "Lost"]) {
                (Lost, Chargeback)
            } else if status_is(&["Won"]) {
                (Won, Chargeback)
            } else {
                (NeedsResponse, Chargeback)
            }
        }
        CHARGEBACK_REVERSED => (Won, Chargeback),
        SECOND_CHARGEBACK => (Lost, SecondChargeback),
        PREARBITRATION_WON => (Won, PreArbitration),
        PREARBITRATION_LOST => (Lost, PreArbitration),
        DISPUTE_DEFENSE_PERIOD_ENDED if status_is(&["Responded", "Pending"]) => {
            (UnderReview, Chargeback)
        }
        DISPUTE_DEFENSE_PERIOD_ENDED => (Lost, Chargeback),
        ISSUER_RESPONSE_TIMEFRAME_EXPIRED => (Won, Chargeback),
        PREARBITRATION_ISSUER_WITHDRAWN => (Won, PreArbitration),
        SCHEME_ARBITRATION_WON => (Won, Arbitration),
        SCHEME_ARBITRATION_LOST => (Lost, Arbitration),
        PREARBITRATION_OPEN
        | PREARBITRATION_ACCEPTED
        | PREARBITRATION_DECLINED
        | SCHEME_ARBITRATION => {
            let stage = if code == SCHEME_ARBITRATION {
                Arbitration
            } else {
                PreArbitration
            };
            if status_is(&["Won"]) {
                (Won, stage)
            } else if status_is(&["Lost"]) {
                (Lost, stage)
            } else {
                return None;
            }
        }
        _ => return None,
    })
}

/// Why an Adyen dispute item cannot be applied, for a human: one of [`ADYEN_UNCLEAR_CODES`]
/// whose `disputeStatus` does not say who won; `None` when [`adyen_status`] reads it.
pub fn adyen_unclear(code: &str, additional: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if !ADYEN_UNCLEAR_CODES.contains(&code) || adyen_status(code, additional).is_some() {
        return None;
    }
    Some(format!(
        "Adyen {code} (disputeStatus {}): who won is not said, not applied",
        additional("disputeStatus").unwrap_or_else(|| "absent".to_owned())
    ))
}

/// Adyen's reason, in payorch's words: by the scheme's reason code
/// (`additionalData.chargebackReasonCode`: Visa's `10.4`, Mastercard's `4837`), then by the
/// words of its `reason`; `general` when neither says.
pub fn adyen_reason(code: Option<&str>, text: &str) -> DisputeReason {
    use DisputeReason::*;
    let by_code = code.map(str::trim).and_then(|code| {
        Some(match code {
            c if c.starts_with("10.") => Fraudulent,
            "4837" | "4840" | "4849" | "4863" | "4870" | "4871" | "4863.1" => Fraudulent,
            "12.6.1" | "12.6" | "4834" => Duplicate,
            "13.1" | "4855" => ProductNotReceived,
            "13.2" | "4841" => SubscriptionCanceled,
            "13.3" | "13.4" | "13.5" | "4853" => ProductUnacceptable,
            "13.6" | "13.7" | "4860" => CreditNotProcessed,
            "12.4" | "12.5" | "12.2" | "4831" => IncorrectAccountDetails,
            "11.1" | "11.2" | "11.3" | "4808" => BankCannotProcess,
            _ => return None,
        })
    });
    if let Some(reason) = by_code {
        return reason;
    }
    let text = text.to_ascii_lowercase();
    let has = |w: &str| text.contains(w);
    if has("fraud") || has("not authori") || has("unauthori") {
        Fraudulent
    } else if has("duplicate") {
        Duplicate
    } else if has("not received") || has("non-receipt") {
        ProductNotReceived
    } else if has("recurring") || has("cancelled") || has("canceled") {
        SubscriptionCanceled
    } else if has("credit not") || has("refund not") {
        CreditNotProcessed
    } else if has("not as described") || has("defective") {
        ProductUnacceptable
    } else {
        General
    }
}

/// Adyen's `defensePeriodEndsAt` (ISO 8601 with an offset).
pub fn adyen_due_by(text: Option<&str>) -> Option<DateTime<Utc>> {
    text.and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn stripe_warnings_are_inquiries_and_the_rest_chargebacks() {
        assert_eq!(
            stripe_status("warning_needs_response"),
            Some((DisputeStatus::WarningNeedsResponse, DisputeStage::Inquiry))
        );
        assert_eq!(
            stripe_status("under_review"),
            Some((DisputeStatus::UnderReview, DisputeStage::Chargeback))
        );
        assert_eq!(stripe_status("prevented"), None);
        assert_eq!(stripe_reason("fraudulent"), DisputeReason::Fraudulent);
        assert_eq!(stripe_reason("check_returned"), DisputeReason::General);
        assert_eq!(stripe_due_by(Some(&Value::from(0))), None);
        assert_eq!(
            stripe_due_by(Some(&Value::from(1_700_000_000))),
            Utc.timestamp_opt(1_700_000_000, 0).single()
        );
    }

    #[test]
    fn every_adyen_dispute_code_has_a_status_and_stage() {
        use DisputeStage::*;
        use DisputeStatus::*;
        let cases = [
            (NOTIFICATION_OF_CHARGEBACK, WarningNeedsResponse, Inquiry),
            (REQUEST_FOR_INFORMATION, WarningNeedsResponse, Inquiry),
            (INFORMATION_SUPPLIED, WarningUnderReview, Inquiry),
            (CHARGEBACK, NeedsResponse, Chargeback),
            (CHARGEBACK_REVERSED, Won, Chargeback),
            (SECOND_CHARGEBACK, Lost, SecondChargeback),
            (PREARBITRATION_WON, Won, PreArbitration),
            (PREARBITRATION_LOST, Lost, PreArbitration),
            (DISPUTE_DEFENSE_PERIOD_ENDED, Lost, Chargeback),
            (ISSUER_RESPONSE_TIMEFRAME_EXPIRED, Won, Chargeback),
            (PREARBITRATION_ISSUER_WITHDRAWN, Won, PreArbitration),
            (SCHEME_ARBITRATION_WON, Won, Arbitration),
            (SCHEME_ARBITRATION_LOST, Lost, Arbitration),
        ];
        assert_eq!(
            cases.len() + ADYEN_UNCLEAR_CODES.len(),
            ADYEN_DISPUTE_CODES.len()
        );
        for (code, status, stage) in cases {
            assert_eq!(adyen_status(code, &none), Some((status, stage)), "{code}");
        }
        assert_eq!(adyen_status("AUTHORISATION", &none), None);
    }

    #[test]
    fn an_adyen_code_that_does_not_say_who_won_is_for_a_human_unless_its_dispute_status_does() {
        let won = |k: &str| (k == "disputeStatus").then(|| "Won".to_owned());
        let lost = |k: &str| (k == "disputeStatus").then(|| "Lost".to_owned());
        let pending = |k: &str| (k == "disputeStatus").then(|| "Pending".to_owned());
        for code in ADYEN_UNCLEAR_CODES {
            assert_eq!(adyen_status(code, &none), None, "{code}");
            assert!(adyen_unclear(code, &none).is_some(), "{code}");
            assert!(adyen_unclear(code, &pending).is_some(), "{code}");
            let stage = if code == SCHEME_ARBITRATION {
                DisputeStage::Arbitration
            } else {
                DisputeStage::PreArbitration
            };
            assert_eq!(
                adyen_status(code, &won),
                Some((DisputeStatus::Won, stage)),
                "{code}"
            );
            assert_eq!(
                adyen_status(code, &lost),
                Some((DisputeStatus::Lost, stage)),
                "{code}"
            );
            assert_eq!(adyen_unclear(code, &won), None, "{code}");
        }
        assert_eq!(adyen_unclear(CHARGEBACK, &none), None);
    }

    #[test]
    fn an_adyen_chargeback_that_cannot_be_defended_is_lost_at_once() {
        let undefendable = |k: &str| (k == "defendable").then(|| "false".to_owned());
        assert_eq!(
            adyen_status(CHARGEBACK, &undefendable),
            Some((DisputeStatus::Lost, DisputeStage::Chargeback))
        );
        let accepted = |k: &str| (k == "disputeStatus").then(|| "Accepted".to_owned());
        assert_eq!(
            adyen_status(CHARGEBACK, &accepted),
            Some((DisputeStatus::Lost, DisputeStage::Chargeback))
        );
        let answered = |k: &str| (k == "disputeStatus").then(|| "Responded".to_owned());
        assert_eq!(
            adyen_status(DISPUTE_DEFENSE_PERIOD_ENDED, &answered),
            Some((DisputeStatus::UnderReview, DisputeStage::Chargeback))
        );
    }

    #[test]
    fn adyen_reasons_by_scheme_code_then_by_words() {
        assert_eq!(adyen_reason(Some("10.4"), ""), DisputeReason::Fraudulent);
        assert_eq!(
            adyen_reason(Some("4855"), ""),
            DisputeReason::ProductNotReceived
        );
        assert_eq!(
            adyen_reason(None, "Duplicate Processing"),
            DisputeReason::Duplicate
        );
        assert_eq!(
            adyen_reason(Some("99"), "Something else"),
            DisputeReason::General
        );
        assert_eq!(
            adyen_due_by(Some("2020-12-18T10:15:30+01:00")),
            Utc.timestamp_opt(1_608_282_930, 0).single()
        );
    }

    #[test]
    fn a_stripe_dispute_event_is_a_notice_of_its_intent_and_nothing_about_the_charge() {
        let body = serde_json::json!({
            "id": "evt_1", "object": "event", "type": "charge.dispute.created",
            "created": 1_800_000_000,
            "data": {"object": {
                "id": "du_1", "object": "dispute", "amount": 1500, "currency": "EUR",
                "status": "needs_response", "reason": "product_not_received",
                "payment_intent": "pi_1", "charge": "ch_1",
                "evidence_details": {"due_by": 1_800_600_000},
            }},
        });
        let event = crate::providers::stripe::parse_event(body.to_string().as_bytes()).unwrap();
        assert!(event.acted_on && event.outcome.is_none() && event.refund.is_none());
        let notice = event.dispute.expect("a dispute notice");
        assert_eq!(notice.provider_dispute_id, "du_1");
        assert_eq!(notice.provider_payment_id.as_deref(), Some("pi_1"));
        assert_eq!(
            (notice.status, notice.stage),
            (DisputeStatus::NeedsResponse, DisputeStage::Chargeback)
        );
        assert_eq!((notice.amount, notice.currency.as_str()), (1500, "eur"));
        assert_eq!(notice.reason, DisputeReason::ProductNotReceived);
        assert_eq!(
            notice.evidence_due_by,
            Utc.timestamp_opt(1_800_600_000, 0).single()
        );
        assert_eq!(
            event.raw["data"]["object"]["evidence_details"]["due_by"],
            1_800_600_000
        );
        // A dispute of no PaymentIntent is not one payorch made: no notice.
        let mut other = body.clone();
        other["data"]["object"]["payment_intent"] = Value::Null;
        let event = crate::providers::stripe::parse_event(other.to_string().as_bytes()).unwrap();
        assert!(event.dispute.is_none());
    }

    #[test]
    fn an_adyen_chargeback_is_verified_and_read_as_a_notice_of_its_payment() {
        use crate::providers::adyen::notification::{sign_item, verify_delivery, HmacKey};
        let hex_key = "44".repeat(32);
        let mut item = serde_json::json!({
            "additionalData": {"chargebackReasonCode": "4837", "defendable": "true",
                "defensePeriodEndsAt": "2030-01-01T10:00:00+01:00", "cardSummary": "1111"},
            "amount": {"value": 4200, "currency": "EUR"},
            "eventCode": CHARGEBACK, "eventDate": "2029-12-20T10:00:00+01:00",
            "merchantAccountCode": "Acct", "merchantReference": "pay_x",
            "originalReference": "PAYMENTPSP", "pspReference": "DISPUTEPSP",
            "reason": "No cardholder authorisation", "success": "true",
        });
        let signature = sign_item(&item, &hex_key).unwrap();
        item["additionalData"]["hmacSignature"] = Value::from(signature);
        let delivery = serde_json::json!({"live": "false",
            "notificationItems": [{"NotificationRequestItem": item}]});
        let key = HmacKey::from_hex(&hex_key).unwrap();
        let events = verify_delivery(delivery.to_string().as_bytes(), &[key], Utc::now()).unwrap();
        let event = &events[0];
        assert!(event.acted_on && event.outcome.is_none());
        let notice = event.dispute.clone().expect("a dispute notice");
        assert_eq!(notice.provider_dispute_id, "DISPUTEPSP");
        assert_eq!(notice.provider_payment_id.as_deref(), Some("PAYMENTPSP"));
        assert_eq!(notice.attempt_id.as_deref(), Some("pay_x"));
        assert_eq!(
            (notice.status, notice.stage),
            (DisputeStatus::NeedsResponse, DisputeStage::Chargeback)
        );
        assert_eq!(notice.reason, DisputeReason::Fraudulent);
        assert_eq!(notice.provider_reason, "4837 No cardholder authorisation");
        assert_eq!(
            notice.evidence_due_by,
            adyen_due_by(Some("2030-01-01T10:00:00+01:00"))
        );
        // Kept: the dispute's fields and reason; never the card's.
        assert_eq!(event.raw["additionalData"]["defendable"], "true");
        assert_eq!(event.raw["reason"], "No cardholder authorisation");
        assert!(event.raw["additionalData"].get("cardSummary").is_none());
    }

    #[test]
    fn holding_statuses_are_the_migrations() {
        let holding: Vec<_> = DisputeStatus::ALL
            .into_iter()
            .filter(|s| s.holds())
            .collect();
        assert_eq!(
            holding,
            [
                DisputeStatus::NeedsResponse,
                DisputeStatus::UnderReview,
                DisputeStatus::Lost
            ]
        );
    }
}
