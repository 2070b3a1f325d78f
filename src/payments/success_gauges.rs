//! The gauges of routing by success (docs/operations/monitoring.md): each provider's score per
//! currency as `payments::success_scores` last read it, and how old that read is. Apart from
//! the reading, so that what a replica shows and what it orders by are written in one place
//! each.

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus::{Gauge, GaugeVec, IntGaugeVec, Opts};

use super::success_routing::Scores;

/// `payorch_provider_approval_rate`, `…_scored_outcomes` and `…_eliminated`, per provider and
/// currency, and `payorch_provider_scores_age_seconds` (docs/operations/monitoring.md).
pub struct ScoreGauges {
    age: Gauge,
    rate: GaugeVec,
    scored: IntGaugeVec,
    eliminated: IntGaugeVec,
    /// The series set by the last read, so that a pair gone from the scores is removed.
    shown: Mutex<HashSet<(String, String)>>,
}

impl ScoreGauges {
    pub fn new() -> prometheus::Result<Self> {
        Ok(ScoreGauges {
            age: Gauge::new(
                "provider_scores_age_seconds",
                "Seconds since this replica last read the success scores; past 10 the routes \
                 by success are tried in the order written (docs/guides/routing.md, \
                 \"Routing by success\")",
            )?,
            rate: GaugeVec::new(
                Opts::new(
                    "provider_approval_rate",
                    "Approvals among each provider's last scored outcomes in a currency, 0 to 1 \
                     (docs/guides/routing.md, \"Routing by success\")",
                ),
                &["provider", "currency"],
            )?,
            scored: IntGaugeVec::new(
                Opts::new(
                    "provider_scored_outcomes",
                    "Scored outcomes in each provider's window in a currency (at most 20)",
                ),
                &["provider", "currency"],
            )?,
            eliminated: IntGaugeVec::new(
                Opts::new(
                    "provider_eliminated",
                    "1 while routing by success leaves a provider out in a currency (5 failures \
                     in a row), else 0",
                ),
                &["provider", "currency"],
            )?,
            shown: Mutex::default(),
        })
    }

    /// Sets `payorch_provider_scores_age_seconds`.
    pub fn age(&self, age: chrono::Duration) {
        self.age.set(age.num_milliseconds() as f64 / 1000.0);
    }

    pub fn register(
        &self,
        registry: &crate::telemetry::metrics::Metrics,
    ) -> prometheus::Result<()> {
        registry.register(Box::new(self.age.clone()))?;
        registry.register(Box::new(self.rate.clone()))?;
        registry.register(Box::new(self.scored.clone()))?;
        registry.register(Box::new(self.eliminated.clone()))
    }

    /// Sets the gauges of every provider and currency to `scores`, and removes those gone.
    pub fn publish(&self, scores: &Scores) {
        let Ok(mut shown) = self.shown.lock() else {
            return;
        };
        for (provider, currency) in shown.iter() {
            if !scores
                .by
                .contains_key(&(provider.clone(), currency.clone()))
            {
                let labels = [provider.as_str(), currency.as_str()];
                let _ = self.rate.remove_label_values(&labels);
                let _ = self.scored.remove_label_values(&labels);
                let _ = self.eliminated.remove_label_values(&labels);
            }
        }
        for ((provider, currency), score) in &scores.by {
            let labels = [provider.as_str(), currency.as_str()];
            self.rate
                .with_label_values(&labels)
                .set(score.rate().unwrap_or(0.0));
            self.scored
                .with_label_values(&labels)
                .set(score.scored as i64);
            self.eliminated
                .with_label_values(&labels)
                .set(i64::from(score.eliminated_since.is_some()));
        }
        *shown = scores.by.keys().cloned().collect();
    }
}
