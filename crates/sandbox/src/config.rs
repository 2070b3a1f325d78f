//! The sandbox's knobs: every flag has an environment variable.

use super::mix::Mix;
use super::store::Window;
use payorch_wire::secret::Secret;
use std::time::Duration;

/// Defaults, shared by the flags and by [`Default`] so the two cannot drift.
pub(super) const DEFAULT_BIND: &str = "127.0.0.1:0";
pub(super) const DEFAULT_SECRET: &str = "sk_test_sandbox";
pub(super) const DEFAULT_WEBHOOK_SECRET: &str = "whsec_sandbox";
pub(super) const DEFAULT_ADYEN_HMAC_KEY: &str =
    "44782def547aaa06c910c43932b1eb0c71fc68d9d0c057550c48ec2acf6ba056";
pub const DEFAULT_SLOW_MS: u64 = 3000;
pub(super) const DEFAULT_PROCESSING_MS: u64 = 1000;
pub(super) const DEFAULT_LATE_APPROVAL_MS: u64 = 200;
pub(super) const DEFAULT_WEBHOOK_MAX_ATTEMPTS: u32 = 6;
pub(super) const DEFAULT_WEBHOOK_RETRY_MS: u64 = 1000;
pub(super) const DEFAULT_WEBHOOK_REORDER_WINDOW_MS: u64 = 2500;
pub(super) const DEFAULT_DISPUTE_AFTER_MS: u64 = 500;
/// How many intents (and refunds) the sandbox keeps, and how many answers byte for byte
/// (docs/operations/running.md, "The sandbox's memory"): about 10 MB between them, so that `serve` on its
/// defaults stays under 100 MB however long it runs (docs/BENCHMARKS.md, "Memory of serve").
pub const DEFAULT_KEEP_INTENTS: usize = 10_000;
pub const DEFAULT_KEEP_ANSWERS: usize = 1_000;
/// A provider queues an event when it answers and delivers it moments later, so its webhook
/// usually reaches the merchant after the API answer. 0 sends each event the instant the
/// charge is made, racing the answer: the tests use that, the hardest case.
pub const DEFAULT_WEBHOOK_DELAY_MS: u64 = 200;
/// Stripe's search: "under normal conditions, data is searchable in less than a minute" and
/// "propagation of new or updated data can be up to an hour behind during outages" (Stripe's
/// docs, "Search"). The default is the normal minute; the flag takes up to the hour.
pub const DEFAULT_SEARCH_LAG_SECS: u64 = 60;
/// The longest `--search-lag-secs`: the hour of an outage.
pub const MAX_SEARCH_LAG_SECS: u64 = 3600;

/// Configuration of the provider simulator (`payorch sandbox`, or in-process in `serve`).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct SandboxConfig {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long = "bind", env = "PAYORCH_SANDBOX_BIND", default_value = DEFAULT_BIND)]
    pub bind: String,

    /// API secret key clients must send as `Authorization: Bearer`.
    #[arg(long = "secret", env = "PAYORCH_PROVIDER_SECRET", default_value = DEFAULT_SECRET)]
    pub secret: Secret,

    /// Where to POST signed webhook events: one URL, or several comma-separated that take
    /// the tries in turn (replicas behind a load balancer); none → events are not delivered.
    #[arg(long = "webhook-url", env = "PAYORCH_SANDBOX_WEBHOOK_URL")]
    pub webhook_url: Option<String>,

    /// Secret the webhook `Stripe-Signature` is computed with.
    #[arg(long = "webhook-secret", env = "PAYORCH_WEBHOOK_SECRET", default_value = DEFAULT_WEBHOOK_SECRET)]
    pub webhook_secret: Secret,

    /// Where the Adyen face POSTs its notifications; none → not delivered.
    #[arg(
        long = "adyen-notification-url",
        env = "PAYORCH_SANDBOX_ADYEN_NOTIFICATION_URL"
    )]
    pub adyen_notification_url: Option<String>,

    /// The hex HMAC key the Adyen face signs notification items with.
    #[arg(long = "adyen-hmac-key", env = "PAYORCH_ADYEN_HMAC_KEY", default_value = DEFAULT_ADYEN_HMAC_KEY)]
    pub adyen_hmac_key: Secret,

    /// How long `pm_sandbox_slow` takes before it succeeds.
    #[arg(long = "slow-ms", env = "PAYORCH_SANDBOX_SLOW_MS", default_value_t = DEFAULT_SLOW_MS)]
    pub slow_ms: u64,

    /// How long `pm_sandbox_processing` stays `processing` before it succeeds.
    #[arg(long = "processing-ms", env = "PAYORCH_SANDBOX_PROCESSING_MS", default_value_t = DEFAULT_PROCESSING_MS)]
    pub processing_ms: u64,

    /// How long after answering a decline `pm_sandbox_late_approval` (and a mix's
    /// `late_approval` outage) tells that it approved the charge after all.
    #[arg(long = "late-approval-ms", env = "PAYORCH_SANDBOX_LATE_APPROVAL_MS", default_value_t = DEFAULT_LATE_APPROVAL_MS)]
    pub late_approval_ms: u64,

    /// Added to every API answer.
    #[arg(
        long = "latency-ms",
        env = "PAYORCH_SANDBOX_LATENCY_MS",
        default_value_t = 0
    )]
    pub latency_ms: u64,

    /// Share of creates, captures and cancels that are made and then never answered
    /// (0.0–1.0); a resend under the same key gets the answer.
    #[arg(long = "lost-response-rate", env = "PAYORCH_SANDBOX_LOST_RESPONSE_RATE", default_value_t = 0.0, value_parser = parse_rate)]
    pub lost_response_rate: f64,

    /// Share of creates, refunds, captures and cancels refused with a 500 before anything
    /// happens (0.0–1.0).
    #[arg(long = "error-rate", env = "PAYORCH_SANDBOX_ERROR_RATE", default_value_t = 0.0, value_parser = parse_rate)]
    pub error_rate: f64,

    /// How long an intent has existed before `GET /v1/payment_intents/search` shows it (0 to
    /// 3600 s): Stripe's search lags, a minute as a rule and up to an hour in an outage. A
    /// retrieve by id and the list are immediate, as Stripe's are.
    #[arg(long = "search-lag-secs", env = "PAYORCH_SANDBOX_SEARCH_LAG_SECS", default_value_t = DEFAULT_SEARCH_LAG_SECS, value_parser = parse_search_lag)]
    pub search_lag_secs: u64,

    /// Share of nullable fields a client could lean on (Stripe's OpenAPI document marks them
    /// `nullable`) answered `null` in the Stripe face's answers and events, each field rolled
    /// on its own (0.0–1.0): a refund's `status`, `metadata`, `payment_intent` and `reason`, an
    /// intent's `description`, `latest_charge`, `last_payment_error`, `canceled_at`,
    /// `cancellation_reason` and `payment_method`. The ledger is never touched.
    #[arg(long = "null-rate", env = "PAYORCH_SANDBOX_NULL_RATE", default_value_t = 0.0, value_parser = parse_rate)]
    pub null_rate: f64,

    /// Share of webhook events delivered twice (0.0–1.0).
    #[arg(long = "webhook-duplicate-rate", env = "PAYORCH_SANDBOX_WEBHOOK_DUPLICATE_RATE", default_value_t = 0.0, value_parser = parse_rate)]
    pub webhook_duplicate_rate: f64,

    /// Hold events for `--webhook-reorder-window-ms` and deliver each batch newest first.
    #[arg(long = "webhook-reorder", env = "PAYORCH_SANDBOX_WEBHOOK_REORDER")]
    pub webhook_reorder: bool,

    /// Window over which `--webhook-reorder` collects events.
    #[arg(long = "webhook-reorder-window-ms", env = "PAYORCH_SANDBOX_WEBHOOK_REORDER_WINDOW_MS", default_value_t = DEFAULT_WEBHOOK_REORDER_WINDOW_MS)]
    pub webhook_reorder_window_ms: u64,

    /// Delay before each webhook event is first delivered (0: at once, racing the answer).
    #[arg(
        long = "webhook-delay-ms",
        env = "PAYORCH_SANDBOX_WEBHOOK_DELAY_MS",
        default_value_t = DEFAULT_WEBHOOK_DELAY_MS
    )]
    pub webhook_delay_ms: u64,

    /// Deliveries per event before giving up (first try included).
    #[arg(long = "webhook-max-attempts", env = "PAYORCH_SANDBOX_WEBHOOK_MAX_ATTEMPTS", default_value_t = DEFAULT_WEBHOOK_MAX_ATTEMPTS)]
    pub webhook_max_attempts: u32,

    /// First retry delay after a failed delivery; doubles on each further failure.
    #[arg(long = "webhook-retry-ms", env = "PAYORCH_SANDBOX_WEBHOOK_RETRY_MS", default_value_t = DEFAULT_WEBHOOK_RETRY_MS)]
    pub webhook_retry_ms: u64,

    /// Intents kept (and refunds, counted apart): older ones are forgotten, with their keys,
    /// and counted in the ledger's `forgotten`.
    #[arg(long = "keep-intents", env = "PAYORCH_SANDBOX_KEEP_INTENTS", default_value_t = DEFAULT_KEEP_INTENTS, value_parser = parse_keep_intents)]
    pub keep_intents: usize,

    /// Answers kept byte for byte under their idempotency keys. Past them, a replay is made
    /// again from what the key made (the intent or refund as it is now); a key whose first
    /// answer was a `500` replays that `500`.
    #[arg(long = "keep-answers", env = "PAYORCH_SANDBOX_KEEP_ANSWERS", default_value_t = DEFAULT_KEEP_ANSWERS)]
    pub keep_answers: usize,

    /// The Stripe face's approval rate, decline mix and outages, as
    /// `approval=0.9,soft=0.6,hard=0.3,authentication_required=0.1,outage=0.02,outages=timeout+dropped`
    /// (any part left out keeps this default): the share of an ordinary card's charges
    /// approved, the weights of the declines' classes among the rest, and the share of
    /// charges meeting one of the outages `error_before`, `error_after`, `timeout`,
    /// `dropped`, `refused` (docs/guides/test-cards.md, "Approval rates and outages").
    /// Changed at run time through `POST /__sandbox/mix/stripe`.
    #[arg(long = "stripe-mix", env = "PAYORCH_SANDBOX_STRIPE_MIX", default_value = "approval=1", value_parser = Mix::parse)]
    pub stripe_mix: Mix,

    /// The Adyen face's, as `--stripe-mix`; `POST /__sandbox/mix/adyen`.
    #[arg(long = "adyen-mix", env = "PAYORCH_SANDBOX_ADYEN_MIX", default_value = "approval=1", value_parser = Mix::parse)]
    pub adyen_mix: Mix,

    /// The seed of the mixes' draws: a charge's answer is drawn from it and the request's
    /// `Idempotency-Key` alone, so a run replays and a key always meets the same answer.
    #[arg(
        long = "mix-seed",
        env = "PAYORCH_SANDBOX_MIX_SEED",
        default_value_t = 0
    )]
    pub mix_seed: u64,

    /// Share of successful charges (of ordinary cards) disputed `--dispute-after-ms` later: a
    /// chargeback opened, `fraudulent`, drawn from `--mix-seed` and the payment's reference
    /// alone, so a run replays (docs/guides/test-cards.md, "Disputes").
    #[arg(long = "dispute-rate", env = "PAYORCH_SANDBOX_DISPUTE_RATE", default_value_t = 0.0, value_parser = parse_rate)]
    pub dispute_rate: f64,

    /// How long after a charge succeeds its dispute opens (`--dispute-rate`, the disputing
    /// test payment methods), between a test payment method's dispute moves, and before the
    /// `winning_evidence` or `losing_evidence` decides.
    #[arg(long = "dispute-after-ms", env = "PAYORCH_SANDBOX_DISPUTE_AFTER_MS", default_value_t = DEFAULT_DISPUTE_AFTER_MS)]
    pub dispute_after_ms: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            bind: DEFAULT_BIND.to_owned(),
            secret: DEFAULT_SECRET.into(),
            webhook_url: None,
            webhook_secret: DEFAULT_WEBHOOK_SECRET.into(),
            adyen_notification_url: None,
            adyen_hmac_key: DEFAULT_ADYEN_HMAC_KEY.into(),
            slow_ms: DEFAULT_SLOW_MS,
            processing_ms: DEFAULT_PROCESSING_MS,
            late_approval_ms: DEFAULT_LATE_APPROVAL_MS,
            latency_ms: 0,
            lost_response_rate: 0.0,
            error_rate: 0.0,
            search_lag_secs: DEFAULT_SEARCH_LAG_SECS,
            null_rate: 0.0,
            webhook_duplicate_rate: 0.0,
            webhook_reorder: false,
            webhook_reorder_window_ms: DEFAULT_WEBHOOK_REORDER_WINDOW_MS,
            webhook_delay_ms: DEFAULT_WEBHOOK_DELAY_MS,
            webhook_max_attempts: DEFAULT_WEBHOOK_MAX_ATTEMPTS,
            webhook_retry_ms: DEFAULT_WEBHOOK_RETRY_MS,
            keep_intents: DEFAULT_KEEP_INTENTS,
            keep_answers: DEFAULT_KEEP_ANSWERS,
            stripe_mix: Mix::default(),
            adyen_mix: Mix::default(),
            mix_seed: 0,
            dispute_rate: 0.0,
            dispute_after_ms: DEFAULT_DISPUTE_AFTER_MS,
        }
    }
}

impl SandboxConfig {
    pub(crate) fn slow(&self) -> Duration {
        Duration::from_millis(self.slow_ms)
    }

    pub(crate) fn processing(&self) -> Duration {
        Duration::from_millis(self.processing_ms)
    }

    pub(crate) fn late_approval(&self) -> Duration {
        Duration::from_millis(self.late_approval_ms)
    }

    pub(crate) fn dispute_after(&self) -> Duration {
        Duration::from_millis(self.dispute_after_ms)
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms)
    }

    pub(crate) fn search_lag(&self) -> Duration {
        Duration::from_secs(self.search_lag_secs)
    }

    pub(crate) fn window(&self) -> Window {
        Window {
            intents: self.keep_intents,
            answers: self.keep_answers,
        }
    }
}

/// `--keep-intents`: at least one, as a window of none would forget a charge before it is
/// answered.
pub fn parse_keep_intents(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number")),
    }
}

/// `--search-lag-secs`: 0 to [`MAX_SEARCH_LAG_SECS`].
fn parse_search_lag(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(secs) if secs <= MAX_SEARCH_LAG_SECS => Ok(secs),
        Ok(secs) => Err(format!(
            "{secs} is more than {MAX_SEARCH_LAG_SECS} (an hour)"
        )),
        Err(_) => Err(format!("{s:?} is not a whole number of seconds")),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=1.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{rate} is not between 0.0 and 1.0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sandbox: SandboxConfig,
    }

    #[test]
    fn flag_defaults_match_default_impl() {
        // Environment variables would leak into the parse; this test relies on none being set
        // for the sandbox, which holds in the project's test runs.
        let parsed = Cli::try_parse_from(["sandbox"]).map(|c| c.sandbox);
        if std::env::vars().any(|(k, _)| k.starts_with("PAYORCH_")) {
            return;
        }
        assert_eq!(parsed.ok(), Some(SandboxConfig::default()));
    }

    #[test]
    fn a_window_of_no_intents_is_refused() {
        assert!(Cli::try_parse_from(["sandbox", "--keep-intents", "0"]).is_err());
        let parsed = Cli::try_parse_from(["sandbox", "--keep-intents", "7", "--keep-answers", "0"]);
        assert_eq!(
            parsed.ok().map(|c| c.sandbox.window()),
            Some(Window {
                intents: 7,
                answers: 0
            })
        );
    }

    #[test]
    fn rates_outside_zero_to_one_are_refused() {
        assert!(Cli::try_parse_from(["sandbox", "--error-rate", "1.5"]).is_err());
        assert!(Cli::try_parse_from(["sandbox", "--error-rate", "0.25"]).is_ok());
        assert!(Cli::try_parse_from(["sandbox", "--null-rate", "-0.1"]).is_err());
        let parsed = Cli::try_parse_from(["sandbox", "--null-rate", "0.2"]);
        assert_eq!(parsed.ok().map(|c| c.sandbox.null_rate), Some(0.2));
    }

    #[test]
    fn help_shows_the_strict_knobs_with_their_environment_variables() {
        use clap::CommandFactory;
        let help = Cli::command().render_help().to_string();
        for shown in [
            "--search-lag-secs",
            "PAYORCH_SANDBOX_SEARCH_LAG_SECS",
            "--null-rate",
            "PAYORCH_SANDBOX_NULL_RATE",
        ] {
            assert!(help.contains(shown), "{shown} missing from:\n{help}");
        }
    }

    #[test]
    fn a_mix_is_read_per_face() {
        let parsed = Cli::try_parse_from([
            "sandbox",
            "--stripe-mix",
            "approval=0.9",
            "--adyen-mix",
            "approval=0.3,outage=0.1,outages=refused",
            "--mix-seed",
            "5",
        ])
        .ok()
        .map(|c| c.sandbox);
        let parsed = parsed.expect("parsed");
        assert_eq!(parsed.stripe_mix.approval, 0.9);
        assert_eq!(parsed.adyen_mix.approval, 0.3);
        assert_eq!(parsed.mix_seed, 5);
        assert!(Cli::try_parse_from(["sandbox", "--stripe-mix", "approval=2"]).is_err());
    }

    #[test]
    fn a_search_lag_is_up_to_an_hour() {
        let lag = |secs: &str| {
            Cli::try_parse_from(["sandbox", "--search-lag-secs", secs])
                .ok()
                .map(|c| c.sandbox.search_lag_secs)
        };
        assert_eq!(lag("0"), Some(0));
        assert_eq!(lag("3600"), Some(3600));
        assert_eq!(lag("3601"), None);
        assert_eq!(lag("-1"), None);
    }
}
