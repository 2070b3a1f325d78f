//! The settlement reconciliation's metrics (docs/operations/monitoring.md):
//! `payorch_settlement_findings_total{provider,kind}`, every finding recorded, and
//! `payorch_settlement_findings_open{provider,kind}`, those no human has closed yet, as the
//! last round counted them; the rounds that could not read a provider's record; the
//! charges and refunds that are other systems' sales (`payorch_settlement_other_total`);
//! and how long ago each provider's record was last read through
//! (`payorch_settlement_read_through_age_seconds`: an Adyen batch that never comes is no
//! error, only silence, and `SettlementRecordSilent` alerts on it).

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts};

use super::FindingKind;

pub struct SettlementMetrics {
    pub findings: IntCounterVec,
    pub open: IntGaugeVec,
    pub reads_failed: IntCounterVec,
    pub other: IntCounterVec,
    pub read_through_age: GaugeVec,
}

impl SettlementMetrics {
    pub fn new() -> prometheus::Result<Self> {
        Ok(SettlementMetrics {
            findings: IntCounterVec::new(
                Opts::new(
                    "settlement_findings_total",
                    "Differences between a provider's record of money moved and payorch's, by \
                     provider and kind (docs/operations/reconciliation.md)",
                ),
                &["provider", "kind"],
            )?,
            open: IntGaugeVec::new(
                Opts::new(
                    "settlement_findings_open",
                    "Settlement findings no human has closed, by provider and kind",
                ),
                &["provider", "kind"],
            )?,
            reads_failed: IntCounterVec::new(
                Opts::new(
                    "settlement_reads_failed_total",
                    "Rounds of the settlement reconciliation that could not read a provider's \
                     record, by provider",
                ),
                &["provider"],
            )?,
            other: IntCounterVec::new(
                Opts::new(
                    "settlement_other_total",
                    "Charges and refunds in a provider's record that are not payorch's (another \
                     system's sales on the same account): kept, never a finding, by provider",
                ),
                &["provider"],
            )?,
            read_through_age: GaugeVec::new(
                Opts::new(
                    "settlement_read_through_age_seconds",
                    "Seconds since the point up to which a provider's record of money moved was \
                     last read whole, as the last round saw it, by provider",
                ),
                &["provider"],
            )?,
        })
    }

    pub fn register(
        &self,
        registry: &crate::telemetry::metrics::Metrics,
    ) -> prometheus::Result<()> {
        registry.register(Box::new(self.findings.clone()))?;
        registry.register(Box::new(self.open.clone()))?;
        registry.register(Box::new(self.reads_failed.clone()))?;
        registry.register(Box::new(self.other.clone()))?;
        registry.register(Box::new(self.read_through_age.clone()))
    }

    /// Serves every series of `providers` from the start, at 0: `increase()` reads a
    /// counter's first series as no increase, so the first finding after a start would raise
    /// no alert (ops/prometheus/alerts.yml, `SettlementFinding`).
    pub fn from_zero<'a>(&self, providers: impl IntoIterator<Item = &'a str>) {
        for provider in providers {
            for kind in FindingKind::ALL {
                self.findings.with_label_values(&[provider, kind.as_str()]);
                self.open.with_label_values(&[provider, kind.as_str()]);
            }
            self.reads_failed.with_label_values(&[provider]);
            self.other.with_label_values(&[provider]);
        }
    }
}
