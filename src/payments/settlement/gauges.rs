//! The settlement reconciliation's metrics (docs/operations/monitoring.md):
//! `payorch_settlement_findings_total{provider,kind}`, every finding recorded, and
//! `payorch_settlement_findings_open{provider,kind}`, those no human has closed yet, as the
//! last round counted them; and the rounds that could not read a provider's record.

use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use super::FindingKind;

pub struct SettlementMetrics {
    pub findings: IntCounterVec,
    pub open: IntGaugeVec,
    pub reads_failed: IntCounterVec,
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
        })
    }

    pub fn register(
        &self,
        registry: &crate::telemetry::metrics::Metrics,
    ) -> prometheus::Result<()> {
        registry.register(Box::new(self.findings.clone()))?;
        registry.register(Box::new(self.open.clone()))?;
        registry.register(Box::new(self.reads_failed.clone()))
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
        }
    }
}
