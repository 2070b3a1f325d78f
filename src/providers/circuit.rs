//! A circuit breaker per provider (docs/guides/routing.md, "Routing and failover"). It opens after
//! `threshold` definite unavailabilities in a row (connection refused, "not processed"), so
//! new payments stop waiting on a provider that is down and fail over at once; after
//! `cool_down` one payment at a time is let through as a probe, and the first answer from
//! the provider closes it again.
//!
//! Only definite unavailabilities count: a timeout or a 5xx may have charged, so it is
//! neither a reason to fail over nor proof that the provider is down.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ProviderOutcome;

#[derive(Debug, Clone)]
pub struct CircuitSettings {
    /// Definite unavailabilities in a row that open the circuit.
    pub threshold: u32,
    /// How long an open circuit refuses before it lets a probe through.
    pub cool_down: Duration,
}

impl Default for CircuitSettings {
    fn default() -> Self {
        CircuitSettings {
            threshold: 5,
            cool_down: Duration::from_secs(5),
        }
    }
}

/// What the circuit lets through now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    Closed,
    /// Cooled down: the next payment is a probe.
    HalfOpen,
    Open,
}

impl CircuitState {
    /// The gauge value: 0 closed, 1 half-open, 2 open.
    pub fn gauge(self) -> i64 {
        match self {
            CircuitState::Closed => 0,
            CircuitState::HalfOpen => 1,
            CircuitState::Open => 2,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    unavailable_in_a_row: u32,
    opened_at: Option<Instant>,
    probe_out: bool,
}

#[derive(Debug)]
pub struct Circuit {
    settings: CircuitSettings,
    state: Mutex<State>,
}

impl Circuit {
    pub fn new(settings: CircuitSettings) -> Self {
        Circuit {
            settings,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn state(&self) -> CircuitState {
        let state = self.lock();
        match state.opened_at {
            None => CircuitState::Closed,
            Some(at) if at.elapsed() >= self.settings.cool_down && !state.probe_out => {
                CircuitState::HalfOpen
            }
            Some(_) => CircuitState::Open,
        }
    }

    /// Whether a payment may call the provider now: a permit to hand its outcome to, or
    /// `None`. The permit of a cooled-down open circuit makes that payment the probe; others
    /// are refused until its answer.
    pub fn allow(&self) -> Option<Permit<'_>> {
        let mut state = self.lock();
        let probe = match state.opened_at {
            None => false,
            Some(at) if at.elapsed() >= self.settings.cool_down && !state.probe_out => {
                state.probe_out = true;
                true
            }
            Some(_) => return None,
        };
        Some(Permit {
            circuit: self,
            probe,
            recorded: false,
        })
    }

    fn record(&self, outcome: &ProviderOutcome, probe: bool) {
        let mut state = self.lock();
        if probe {
            state.probe_out = false;
        }
        match outcome {
            ProviderOutcome::Unavailable { .. } => {
                state.unavailable_in_a_row = state.unavailable_in_a_row.saturating_add(1);
                if probe || state.unavailable_in_a_row >= self.settings.threshold {
                    state.opened_at = Some(Instant::now());
                }
            }
            // Reached but unclear: no proof either way. A probe that ends so leaves the
            // circuit open for another cool-down.
            ProviderOutcome::Unknown { .. } => {
                if probe {
                    state.opened_at = Some(Instant::now());
                }
            }
            // The provider answered.
            _ => *state = State::default(),
        }
    }
}

/// One call let through by [`Circuit::allow`]. Its outcome goes back through
/// [`record`](Self::record); a permit dropped unrecorded (the request was cancelled
/// mid-call: its client went away) counts as an unclear answer, so a probe that never
/// finished cannot hold the circuit open for ever.
#[derive(Debug)]
pub struct Permit<'c> {
    circuit: &'c Circuit,
    probe: bool,
    recorded: bool,
}

impl Permit<'_> {
    pub fn record(mut self, outcome: &ProviderOutcome) {
        self.recorded = true;
        self.circuit.record(outcome, self.probe);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.recorded {
            let unclear = ProviderOutcome::Unknown {
                reason: "the call was cancelled".into(),
            };
            self.circuit.record(&unclear, self.probe);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable() -> ProviderOutcome {
        ProviderOutcome::Unavailable {
            reason: "refused".into(),
        }
    }

    #[test]
    fn opens_after_the_threshold_then_probes_one_at_a_time_and_closes_on_an_answer() {
        let circuit = Circuit::new(CircuitSettings {
            threshold: 3,
            cool_down: Duration::from_millis(50),
        });
        for _ in 0..2 {
            circuit.allow().unwrap().record(&unavailable());
        }
        assert_eq!(circuit.state(), CircuitState::Closed);
        // A timeout is no proof either way: the count stands.
        circuit.allow().unwrap().record(&ProviderOutcome::Unknown {
            reason: "timeout".into(),
        });
        circuit.allow().unwrap().record(&unavailable());
        assert_eq!(circuit.state(), CircuitState::Open);
        assert!(circuit.allow().is_none());

        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(circuit.state(), CircuitState::HalfOpen);
        let probe = circuit.allow().expect("the probe");
        assert!(circuit.allow().is_none(), "only one probe at a time");
        probe.record(&unavailable());
        assert_eq!(
            circuit.state(),
            CircuitState::Open,
            "a failed probe reopens"
        );

        std::thread::sleep(Duration::from_millis(60));
        circuit.allow().unwrap().record(&ProviderOutcome::Failed {
            code: "card_declined".into(),
            message: "declined".into(),
            provider_id: None,
            decline: None,
        });
        assert_eq!(circuit.state(), CircuitState::Closed);
        assert!(circuit.allow().is_some());
    }

    #[test]
    fn a_probe_cancelled_mid_call_frees_the_circuit_for_the_next_probe() {
        let circuit = Circuit::new(CircuitSettings {
            threshold: 1,
            cool_down: Duration::from_millis(30),
        });
        circuit.allow().unwrap().record(&unavailable());
        std::thread::sleep(Duration::from_millis(40));
        let probe = circuit.allow().expect("the probe");
        drop(probe);
        assert_eq!(circuit.state(), CircuitState::Open, "another cool-down");
        std::thread::sleep(Duration::from_millis(40));
        assert!(circuit.allow().is_some(), "a new probe, not stuck for ever");
    }

    #[test]
    fn an_ordinary_call_ending_does_not_end_the_probe() {
        let circuit = Circuit::new(CircuitSettings {
            threshold: 2,
            cool_down: Duration::from_millis(30),
        });
        let early = circuit.allow().unwrap();
        circuit.allow().unwrap().record(&unavailable());
        circuit.allow().unwrap().record(&unavailable());
        std::thread::sleep(Duration::from_millis(40));
        let probe = circuit.allow().expect("the probe");
        // A call let through before the circuit opened ends with an unclear answer.
        early.record(&ProviderOutcome::Unknown {
            reason: "timeout".into(),
        });
        assert!(circuit.allow().is_none(), "the probe is still out");
        probe.record(&ProviderOutcome::Succeeded {
            provider_id: "pi_1".into(),
        });
        assert_eq!(circuit.state(), CircuitState::Closed);
    }
}
