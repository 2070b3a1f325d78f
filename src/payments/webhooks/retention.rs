//! How long a provider's webhook is kept (docs/guides/provider-webhooks.md, "Webhooks";
//! docs/PRODUCTION.md, section 6): `--provider-webhook-retention-days` (35 by default) past the
//! end of the month of the provider's own time of the event, and after everything it could be
//! about is final — its payment, each of the payment's refunds and hold operations. The table
//! is partitioned by that month (docs/DESIGN.md, "History partitioned by time"), and a month
//! goes whole, dropped by the provider webhook reaper (`reaper`, through `db::partitions`) once
//! the retention has passed its end and every payment its webhooks are about has been final
//! that long: a webhook is kept at least the retention from its provider's time, and a month
//! more at most.
//!
//! The default outlasts the providers' redeliveries (Adyen retries for up to 30 days, Stripe
//! for 3), and a copy that comes after its month is gone is harmless all the same: dated
//! before every partition, it lands in the DEFAULT partition `provider_webhooks_outside`
//! (kept by the row, from its arrival), and judged again against a payment that is final,
//! it changes nothing.

use std::time::Duration;

use crate::db::partitions::{self, Expired, Family};
use crate::db::PgConn;

/// Drops the months of provider webhooks past `retention` whose payments have all been
/// final that long, after making the months ahead; one row per month past `retention`,
/// dropped or kept and why.
pub async fn drop_old_webhooks(
    conn: &mut PgConn,
    retention: Duration,
) -> diesel::QueryResult<Vec<Expired>> {
    partitions::keep(conn, Family::ProviderWebhooks, retention).await
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::config::{Cli, Command};

    #[test]
    fn the_default_retention_outlasts_the_providers_redeliveries() {
        let cli = Cli::try_parse_from(["payorch", "serve"]).expect("the flags parse");
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        let kept = serve.app_settings().webhook_reaper.retention;
        // Adyen retries a webhook for up to 30 days, Stripe for 3.
        assert!(
            kept > std::time::Duration::from_secs(30 * 24 * 3600),
            "{kept:?}"
        );
        let cli = Cli::try_parse_from([
            "payorch",
            "serve",
            "--provider-webhook-retention-days",
            "90",
        ])
        .expect("the flag parses");
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        assert_eq!(
            serve.app_settings().webhook_reaper.retention,
            std::time::Duration::from_secs(90 * 24 * 3600)
        );
    }
}
