//! The kill run against providers as strict as their contracts (#39; docs/RELIABILITY.md, "Strict
//! providers (#39)"): the proof is only as true as the sandbox, so here the sandbox keeps no
//! kindness Stripe or Adyen would not. Stripe's search lags longer than any deadline of the
//! reconciler, fields its contract calls nullable come back null now and then, and a key's
//! first answer, a 500 included, is what every resend gets; Adyen answers no lookup at all.
//! Half the merchants pay through each protocol, on the one sandbox, while `serve` is killed
//! as in every kill run; the run then counts the attempts a technical cancel had to end and
//! what payorch left for a human.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::database::connect;

/// How far Stripe's search lags behind its writes: longer than every deadline of the
/// reconciler (the run's serve settings are seconds), so a reconciler that leaned on the
/// search would find nothing it could trust within the run.
pub(crate) const SEARCH_LAG_SECS: u64 = 3600;

/// The share of the Stripe fields the contract marks nullable that come back null: often
/// enough that every adapter path meets a null within a run of a few hundred intents.
pub(crate) const NULL_RATE: &str = "0.2";

/// The merchant account the serves name in their Adyen calls; the sandbox takes any.
pub(crate) const ADYEN_MERCHANT_ACCOUNT: &str = "ChaosStrict";

/// The hex key the sandbox signs its Adyen notifications with, and the serves verify.
pub(crate) const ADYEN_HMAC_KEY: &str =
    "5f0c2b1e9d8a7f6e5d4c3b2a19080706f5e4d3c2b1a09f8e7d6c5b4a39281706";

/// What a strict sandbox is told beyond the faults of every run (slow, processing, lost and
/// 500 answers by payment method, duplicated and reordered webhooks): its search lag, its
/// nulls, and where its Adyen notifications go (`notification_urls`, comma-separated, taken
/// in turn like the webhooks). A 500 saved under its key and replayed is the sandbox's
/// default, as it is Stripe's.
pub(crate) fn sandbox_args(notification_urls: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "--search-lag-secs",
        &SEARCH_LAG_SECS.to_string(),
        "--null-rate",
        NULL_RATE,
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(adyen_notification_args(notification_urls));
    args
}

/// Where the sandbox's Adyen notifications go (`notification_urls`, comma-separated, in
/// turn), signed with the key the serves verify: every run that pays through the Adyen face.
pub(crate) fn adyen_notification_args(notification_urls: &str) -> Vec<String> {
    [
        "--adyen-notification-url",
        notification_urls,
        "--adyen-hmac-key",
        ADYEN_HMAC_KEY,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The reconciler's deadlines, short so that the run sees them pass and waits for them, each
/// far below the search's lag: a Stripe attempt payorch never heard of is given up
/// (`provider_no_record`) once a read-after-write list of its send window, 5 s after its last
/// possible send, finds nothing; an Adyen outcome still unknown 10 s after the attempt was
/// made is ended by a technical cancel, well inside the clients' 120 s for a final answer.
/// What is open past a minute is "stuck" for needs-a-human, so a run that ends with an
/// attempt open shows it there too.
pub(crate) const SERVE_SETTINGS: &[&str] = &[
    "--provider-settle-secs",
    "5",
    "--technical-cancel-after-secs",
    "10",
    "--unresolved-alert-secs",
    "60",
];

/// The provider names the strict serves configure, each a protocol of the one sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Stripe,
    Adyen,
}

impl Protocol {
    /// The provider's name in serve's configuration and in a merchant's routing, which is
    /// also its protocol's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Stripe => "stripe",
            Protocol::Adyen => "adyen",
        }
    }
}

/// The merchants of a strict run, one routed to each protocol.
pub(crate) const MERCHANTS: [Protocol; 2] = [Protocol::Stripe, Protocol::Adyen];

/// `serve`'s `--provider` flags: both faces of the sandbox at `sandbox_url`, Stripe first.
pub(crate) fn provider_args(sandbox_url: &str) -> Vec<String> {
    MERCHANTS
        .iter()
        .flat_map(|p| {
            [
                "--provider".to_owned(),
                format!("{}={}:{sandbox_url}", p.name(), p.name()),
            ]
        })
        .collect()
}

/// The merchant of intent `i` among `merchants`. Intents come in fours (a refund, two plain
/// checkouts, a manual capture) and their methods in turns of 20 and 40, so the merchant
/// changes with each four and again every forty: every payment method, capture fault and
/// refund fault then meets every merchant within 80 intents, which alternating one intent in
/// two would not (refunds and manual captures would each stay with one merchant).
pub(crate) fn merchant_of(i: usize, merchants: usize) -> usize {
    if merchants <= 1 {
        return 0;
    }
    (i / 4 + i / 40) % merchants
}

/// The payment method a client sends: on the Adyen face a refund fault is the payment's (its
/// refunds' requests carry no reason), named after a `+`.
pub(crate) fn wire_method(protocol: Protocol, method: &str, refund_fault: Option<&str>) -> String {
    match (protocol, refund_fault) {
        (Protocol::Adyen, Some(fault)) => format!("{method}+{fault}"),
        _ => method.to_owned(),
    }
}

/// What `GET /v1/support/needs-a-human` lists, counted by list: `stuck` (attempts open past
/// the alert age), `no_provider_record` (failed, the provider having no charge),
/// `stuck_refunds`, `webhook_conflicts`, and whatever list payorch adds (`contradicted`, …),
/// each counted under its own name so that none is missed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ForAHuman {
    pub(crate) lists: BTreeMap<String, usize>,
    /// The ids (`re_…`) of the refunds in `stuck_refunds`.
    pub(crate) stuck_refund_ids: BTreeSet<String>,
}

impl ForAHuman {
    pub(crate) fn total(&self) -> usize {
        self.lists.values().sum()
    }

    /// How many `list` holds (0 when the answer has no such list).
    pub(crate) fn count(&self, list: &str) -> usize {
        self.lists.get(list).copied().unwrap_or(0)
    }
}

/// The most of each list one answer holds (the endpoint's own limit); a list this long may
/// hold more.
pub(crate) const LIST_LIMIT: usize = 100;

/// Asks `base_url` what needs a human, as support would.
pub(crate) async fn for_a_human(base_url: &str, support_key: &str) -> Result<ForAHuman, String> {
    let response = reqwest::Client::new()
        .get(format!(
            "{base_url}/v1/support/needs-a-human?limit={LIST_LIMIT}"
        ))
        .bearer_auth(support_key)
        .send()
        .await
        .map_err(|e| format!("needs-a-human: {e}"))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|e| format!("needs-a-human: {e}"))?;
    if !status.is_success() {
        return Err(format!("needs-a-human: {status} {body}"));
    }
    read_for_a_human(&body)
}

/// The counts of a needs-a-human answer: every list in it, which must hold the four every
/// payorch of #39 answers.
pub(crate) fn read_for_a_human(body: &Value) -> Result<ForAHuman, String> {
    let object = body
        .as_object()
        .ok_or_else(|| format!("needs-a-human is not an object: {body}"))?;
    let lists: BTreeMap<String, usize> = object
        .iter()
        .filter_map(|(name, value)| value.as_array().map(|list| (name.clone(), list.len())))
        .collect();
    for list in [
        "stuck",
        "no_provider_record",
        "stuck_refunds",
        "webhook_conflicts",
    ] {
        if !lists.contains_key(list) {
            return Err(format!("needs-a-human has no list {list:?}: {body}"));
        }
    }
    let stuck_refund_ids = body["stuck_refunds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|refund| refund["id"].as_str().map(str::to_owned))
        .collect();
    Ok(ForAHuman {
        lists,
        stuck_refund_ids,
    })
}

/// The reason payorch gives the void it makes of an attempt whose outcome it never heard
/// by its deadline: Adyen's technical cancel, by payorch's reference.
pub(crate) const TECHNICAL_CANCEL: &str = "outcome_unknown";

/// The attempts payorch canceled by reference, by the status each ended in: `canceled` (a
/// hold or a payment released), `failed` (the cancel's notification said no payment was made
/// with that reference), or still open (the cancel refused: for a human).
pub(crate) async fn technical_cancels(database_url: &str) -> Result<BTreeMap<String, i64>, String> {
    let db = connect(database_url).await?;
    let rows = db
        .query(
            "SELECT a.status::text, count(DISTINCT a.id)
               FROM hold_operations o
               JOIN payment_attempts a ON a.merchant_id = o.merchant_id AND a.id = o.payment_id
              WHERE o.kind = 'void' AND o.reason::text = $1::text
              GROUP BY 1",
            &[&TECHNICAL_CANCEL],
        )
        .await
        .map_err(|e| format!("reading the database: {e}"))?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;
    use crate::clients::{self, METHODS};
    use crate::world;

    /// Every number of seconds a flag gives, as (flag, seconds).
    fn seconds(settings: &[&str]) -> Vec<(String, u64)> {
        settings
            .windows(2)
            .filter(|pair| pair[0].ends_with("-secs"))
            .flat_map(|pair| {
                pair[1]
                    .split(',')
                    .map(|s| (pair[0].to_owned(), s.parse().expect(pair[0])))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn the_search_lags_past_every_deadline_of_the_reconciler() {
        let args = sandbox_args("http://127.0.0.1:1/v1/webhooks/adyen");
        let lag = args
            .windows(2)
            .find(|pair| pair[0] == "--search-lag-secs")
            .map(|pair| pair[1].parse::<u64>().unwrap());
        assert_eq!(lag, Some(SEARCH_LAG_SECS));
        let deadlines = seconds(&[world::SERVE_SETTINGS, SERVE_SETTINGS].concat());
        assert!(
            deadlines
                .iter()
                .any(|(flag, _)| flag.contains("technical-cancel")),
            "{deadlines:?}"
        );
        for (flag, secs) in deadlines {
            assert!(secs < SEARCH_LAG_SECS, "{flag} {secs}");
        }
        let null_rate: f64 = NULL_RATE.parse().unwrap();
        assert!(null_rate > 0.0 && null_rate < 1.0);
    }

    #[test]
    fn both_protocols_are_served_by_one_sandbox() {
        assert_eq!(
            provider_args("http://127.0.0.1:9"),
            [
                "--provider",
                "stripe=stripe:http://127.0.0.1:9",
                "--provider",
                "adyen=adyen:http://127.0.0.1:9"
            ]
        );
    }

    #[test]
    fn every_method_and_fault_meets_both_merchants_within_80_intents() {
        // (merchant, method or refund fault, manual capture)
        let mut seen = BTreeSet::new();
        let mut per_merchant = [0usize; 2];
        for i in 0..80 {
            let m = merchant_of(i, MERCHANTS.len());
            per_merchant[m] += 1;
            let (method, refund_fault) = clients::method_of(i);
            seen.insert((m, method, clients::manual_capture(i)));
            if let Some(fault) = refund_fault {
                seen.insert((m, fault, false));
            }
        }
        assert_eq!(per_merchant, [40, 40]);
        let used: BTreeSet<_> = seen
            .iter()
            .map(|(_, what, manual)| (*what, *manual))
            .collect();
        for (what, manual) in &used {
            for m in 0..MERCHANTS.len() {
                assert!(seen.contains(&(m, what, *manual)), "{m} {what} {manual}");
            }
        }
        // And the run uses every capture fault and refund fault, and the faults of checkouts.
        for method in clients::MANUAL_METHODS {
            assert!(used.contains(&(method, true)), "{method}");
        }
        for fault in clients::REFUND_REASONS.into_iter().flatten() {
            assert!(used.contains(&(fault, false)), "{fault}");
        }
        for method in METHODS.into_iter().filter(|m| m.starts_with("pm_sandbox_")) {
            assert!(used.contains(&(method, false)), "{method}");
        }
        // One merchant: every intent its.
        assert!((0..80).all(|i| merchant_of(i, 1) == 0));
    }

    #[test]
    fn an_adyen_payment_carries_its_refund_fault_and_a_stripe_one_does_not() {
        let fault = Some("sandbox_lost_response");
        assert_eq!(
            wire_method(Protocol::Adyen, "pm_card_visa", fault),
            "pm_card_visa+sandbox_lost_response"
        );
        assert_eq!(
            wire_method(Protocol::Adyen, "pm_card_visa", None),
            "pm_card_visa"
        );
        assert_eq!(
            wire_method(Protocol::Stripe, "pm_card_visa", fault),
            "pm_card_visa"
        );
    }

    #[test]
    fn what_needs_a_human_is_counted_by_list_and_a_missing_list_is_an_error() {
        let body = json!({
            "stuck": [{}],
            "no_provider_record": [{}, {}],
            "contradicted": [{}],
            "stuck_refunds": [{"id": "re_1"}],
            "webhook_conflicts": [{}],
            "disabled_webhook_endpoints": [],
        });
        let found = read_for_a_human(&body).unwrap();
        assert_eq!(found.count("no_provider_record"), 2);
        // A list the driver does not know of is counted all the same.
        assert_eq!(found.count("contradicted"), 1);
        assert_eq!(found.count("disabled_webhook_endpoints"), 0);
        assert_eq!(found.count("no_such_list"), 0);
        assert_eq!(found.total(), 6);
        assert_eq!(found.stuck_refund_ids, BTreeSet::from(["re_1".to_owned()]));
        assert!(read_for_a_human(&json!({"stuck": []})).is_err());
        assert!(read_for_a_human(&json!([])).is_err());
    }
}
