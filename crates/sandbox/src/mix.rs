//! Approval rates, decline mixes and outages per face (docs/guides/test-cards.md, "Approval
//! rates and outages"): what lets a run measure how many more payments a retry elsewhere or
//! a routing by success gets approved, on a mix it can replay.
//!
//! Each face (Stripe's, Adyen's) has its own [`Mix`], so the two providers of one route can
//! approve at different rates. A charge's draw depends only on the seed and the request's
//! `Idempotency-Key`, never on the face, the time or what was charged before: a run is
//! reproducible, the same key always meets the same answer (a resend under it gets the first
//! answer, as the providers keep it), and the same key through either face meets the same
//! decline, each in its provider's words (`declines`). A charge without a key draws at
//! random.
//!
//! A draw, in order: an outage (`outage`, one of `outages`), else an approval (`approval`),
//! else a decline whose class is chosen by the weights `soft`, `hard` and
//! `authentication_required`, then one of that class's test payment methods, evenly.

use std::fmt;

use super::behaviour::Behaviour;
use super::declines::{by_token, Decline};

/// The declines payorch's vocabulary (docs/guides/declines.md) calls soft: another provider
/// may approve.
pub const SOFT: &[&str] = &[
    "pm_card_chargeDeclined",
    "pm_sandbox_decline_issuer_unavailable",
    "pm_card_chargeDeclinedProcessingError",
];

/// The declines it calls hard: no retry anywhere.
pub const HARD: &[&str] = &[
    "pm_card_chargeDeclinedInsufficientFunds",
    "pm_card_chargeDeclinedLostCard",
    "pm_card_chargeDeclinedStolenCard",
    "pm_card_chargeDeclinedExpiredCard",
    "pm_card_chargeDeclinedIncorrectCvc",
    "pm_card_chargeDeclinedFraudulent",
    "pm_card_visa_chargeDeclinedVelocityLimitExceeded",
    "pm_sandbox_decline_do_not_try_again",
];

/// The declines that ask for 3-D Secure.
pub const AUTHENTICATION: &[&str] = &["pm_sandbox_decline_authentication_required"];

/// How a charge meets an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// `error_before`: a `500`, nothing charged (as `pm_sandbox_error_before`).
    ErrorBefore,
    /// `error_after`: charged, then a `500` (as `pm_sandbox_error_after`).
    ErrorAfter,
    /// `timeout`: charged, then never answered (as `pm_sandbox_lost_response`).
    Timeout,
    /// `dropped`: charged, then the connection closed without an answer (as
    /// `pm_sandbox_dropped_response`).
    Dropped,
    /// `refused`: refused before anything was done, as a provider refuses a request it did
    /// not process (`403`; as `pm_sandbox_refused`): the one outage a payment fails over
    /// from (the charge provably never left). `late_approval` reads as a soft decline, which
    /// a retry may follow elsewhere; the others leave the outcome unknown, and are never
    /// followed by a charge elsewhere.
    Refused,
    /// `late_approval`: answered as a soft decline, but charged, and told by webhook after
    /// `--late-approval-ms` (as `pm_sandbox_late_approval`): the decline a retry elsewhere
    /// follows, whose money payorch must give back.
    LateApproval,
}

impl Outage {
    pub const ALL: [Outage; 6] = [
        Outage::ErrorBefore,
        Outage::ErrorAfter,
        Outage::Timeout,
        Outage::Dropped,
        Outage::Refused,
        Outage::LateApproval,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Outage::ErrorBefore => "error_before",
            Outage::ErrorAfter => "error_after",
            Outage::Timeout => "timeout",
            Outage::Dropped => "dropped",
            Outage::Refused => "refused",
            Outage::LateApproval => "late_approval",
        }
    }

    fn behaviour(self) -> Behaviour {
        match self {
            Outage::ErrorBefore => Behaviour::ErrorBefore,
            Outage::ErrorAfter => Behaviour::ErrorAfter,
            Outage::Timeout => Behaviour::LostResponse,
            Outage::Dropped => Behaviour::DroppedResponse,
            Outage::Refused => Behaviour::Refused,
            Outage::LateApproval => Behaviour::LateApproval,
        }
    }
}

/// One face's mix. Written (flags, control endpoint) as
/// `approval=0.9,soft=0.6,hard=0.3,authentication_required=0.1,outage=0.02,outages=timeout+dropped`,
/// any field left out keeping its default.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    /// Share of an ordinary card's charges approved (outages aside), 0.0–1.0.
    pub approval: f64,
    /// Weights of the declines' classes among the charges not approved.
    pub soft: f64,
    pub hard: f64,
    pub authentication_required: f64,
    /// Share of charges that meet an outage, 0.0–1.0.
    pub outage: f64,
    /// The outages drawn from, evenly.
    pub outages: Vec<Outage>,
}

impl Default for Mix {
    /// Every ordinary card approved, no outage: the sandbox as it always was.
    fn default() -> Self {
        Self {
            approval: 1.0,
            soft: 0.6,
            hard: 0.3,
            authentication_required: 0.1,
            outage: 0.0,
            outages: vec![
                Outage::ErrorBefore,
                Outage::ErrorAfter,
                Outage::Timeout,
                Outage::Dropped,
            ],
        }
    }
}

/// What a draw gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drawn {
    Approved,
    Declined(&'static Decline),
    Outage(Outage),
}

impl Mix {
    /// Whether it leaves an ordinary card alone (and so draws nothing for it).
    pub fn is_plain(&self) -> bool {
        self.approval >= 1.0 && self.outage <= 0.0
    }

    /// The answer of the charge keyed `key` under `seed`; `approval` overrides the mix's
    /// (a `pm_sandbox_mix_NN` token).
    pub fn draw(&self, seed: u64, key: Option<&str>, approval: Option<f64>) -> Drawn {
        let mut next = uniforms(seed, key);
        let (outage_roll, outage_pick, approval_roll, class_roll, code_roll) =
            (next(), next(), next(), next(), next());
        if outage_roll < self.outage && !self.outages.is_empty() {
            return Drawn::Outage(self.outages[pick(outage_pick, self.outages.len())]);
        }
        if approval_roll < approval.unwrap_or(self.approval) {
            return Drawn::Approved;
        }
        let total = self.soft + self.hard + self.authentication_required;
        let at = class_roll * total;
        let class = if total <= 0.0 || at < self.soft {
            SOFT
        } else if at < self.soft + self.hard {
            HARD
        } else {
            AUTHENTICATION
        };
        let token = class[pick(code_roll, class.len())];
        Drawn::Declined(by_token(token).expect("every mixed decline is a row of DECLINES"))
    }

    /// The behaviour a charge of `behaviour` keyed `key` has under this mix: an ordinary card
    /// or a `pm_sandbox_mix*` token drawn for, anything else as it is.
    pub(crate) fn behaviour(
        &self,
        seed: u64,
        key: Option<&str>,
        behaviour: Behaviour,
    ) -> Behaviour {
        let approval = match behaviour {
            Behaviour::Succeed if !self.is_plain() => None,
            Behaviour::Mixed(percent) => percent.map(|p| f64::from(p) / 100.0),
            _ => return behaviour,
        };
        match self.draw(seed, key, approval) {
            Drawn::Approved => Behaviour::Succeed,
            Drawn::Declined(decline) => Behaviour::Decline(decline),
            Drawn::Outage(outage) => outage.behaviour(),
        }
    }

    /// Reads the written form; `""` is the default.
    pub fn parse(s: &str) -> Result<Mix, String> {
        Mix::default().with(s)
    }

    /// This mix with the parts `s` writes changed (the control endpoint's change).
    pub fn with(&self, s: &str) -> Result<Mix, String> {
        let mut mix = self.clone();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not name=value"))?;
            let number = || -> Result<f64, String> {
                let n: f64 = value
                    .parse()
                    .map_err(|_| format!("{name}: {value:?} is not a number"))?;
                if (0.0..=1.0).contains(&n) {
                    Ok(n)
                } else {
                    Err(format!("{name}: {n} is not between 0.0 and 1.0"))
                }
            };
            match name.trim() {
                "approval" => mix.approval = number()?,
                "soft" => mix.soft = number()?,
                "hard" => mix.hard = number()?,
                "authentication_required" => mix.authentication_required = number()?,
                "outage" => mix.outage = number()?,
                "outages" => {
                    mix.outages = value
                        .split('+')
                        .map(|word| {
                            Outage::ALL
                                .into_iter()
                                .find(|o| o.word() == word.trim())
                                .ok_or_else(|| {
                                    format!(
                                        "outages: {word:?} is none of error_before, \
                                         error_after, timeout, dropped, refused, \
                                         late_approval"
                                    )
                                })
                        })
                        .collect::<Result<_, _>>()?
                }
                other => {
                    return Err(format!(
                        "{other:?} is none of approval, soft, hard, \
                         authentication_required, outage, outages"
                    ))
                }
            }
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outages: Vec<&str> = self.outages.iter().map(|o| o.word()).collect();
        write!(
            f,
            "approval={},soft={},hard={},authentication_required={},outage={},outages={}",
            self.approval,
            self.soft,
            self.hard,
            self.authentication_required,
            self.outage,
            outages.join("+")
        )
    }
}

/// The face a charge came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    Stripe,
    Adyen,
}

impl Face {
    pub fn word(self) -> &'static str {
        match self {
            Face::Stripe => "stripe",
            Face::Adyen => "adyen",
        }
    }

    pub(crate) fn from_word(word: &str) -> Option<Face> {
        [Face::Stripe, Face::Adyen]
            .into_iter()
            .find(|f| f.word() == word)
    }
}

/// An index below `len` from a uniform in [0, 1).
fn pick(u: f64, len: usize) -> usize {
    ((u * len as f64) as usize).min(len - 1)
}

/// Uniforms in [0, 1) from `seed` and `key` (FNV-1a, then splitmix64); at random without a
/// key.
fn uniforms(seed: u64, key: Option<&str>) -> impl FnMut() -> f64 {
    let mut state = match key {
        Some(key) => {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in seed.to_le_bytes().iter().chain(key.as_bytes()) {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
            hash
        }
        None => rand::random(),
    };
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::mixed_token;

    fn shares(mix: &Mix, seed: u64, n: usize) -> (f64, f64, f64, f64, f64) {
        let (mut ok, mut soft, mut hard, mut auth, mut outage) = (0, 0, 0, 0, 0);
        for i in 0..n {
            match mix.draw(seed, Some(&format!("key-{i}")), None) {
                Drawn::Approved => ok += 1,
                Drawn::Outage(_) => outage += 1,
                Drawn::Declined(d) => {
                    let token = d.token.unwrap_or_default();
                    if SOFT.contains(&token) {
                        soft += 1
                    } else if HARD.contains(&token) {
                        hard += 1
                    } else {
                        auth += 1
                    }
                }
            }
        }
        let share = |k: i32| f64::from(k) / n as f64;
        (
            share(ok),
            share(soft),
            share(hard),
            share(auth),
            share(outage),
        )
    }

    /// Within 4.5 standard deviations of a binomial share: a seeded test that fails once in
    /// ~150 000 seeds, and these seeds are fixed.
    fn near(observed: f64, p: f64, n: usize) {
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        assert!(
            (observed - p).abs() <= 4.5 * sd + 1e-9,
            "{observed} is not {p} ± {}",
            4.5 * sd
        );
    }

    #[test]
    fn the_shares_hold_within_binomial_bounds() {
        let mix =
            Mix::parse("approval=0.7,soft=0.5,hard=0.3,authentication_required=0.2,outage=0.1")
                .expect("mix");
        let n = 20_000;
        for seed in [0, 1, 42] {
            let (ok, soft, hard, auth, outage) = shares(&mix, seed, n);
            near(outage, 0.1, n);
            near(ok, 0.9 * 0.7, n);
            near(soft, 0.9 * 0.3 * 0.5, n);
            near(hard, 0.9 * 0.3 * 0.3, n);
            near(auth, 0.9 * 0.3 * 0.2, n);
        }
    }

    #[test]
    fn a_key_always_draws_the_same_and_a_seed_changes_it() {
        let mix = Mix::parse("approval=0.5,outage=0.2").expect("mix");
        let a: Vec<Drawn> = (0..200)
            .map(|i| mix.draw(7, Some(&i.to_string()), None))
            .collect();
        let b: Vec<Drawn> = (0..200)
            .map(|i| mix.draw(7, Some(&i.to_string()), None))
            .collect();
        let c: Vec<Drawn> = (0..200)
            .map(|i| mix.draw(8, Some(&i.to_string()), None))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn the_written_form_reads_back() {
        let mix = Mix::parse("approval=0.3, outage=0.05, outages=timeout+refused").expect("mix");
        assert_eq!(mix.approval, 0.3);
        assert_eq!(mix.outages, vec![Outage::Timeout, Outage::Refused]);
        assert_eq!(Mix::parse(&mix.to_string()), Ok(mix));
        assert_eq!(Mix::parse(""), Ok(Mix::default()));
        assert!(Mix::parse("approval=1.5").is_err());
        assert!(Mix::parse("outages=flood").is_err());
        assert!(Mix::parse("speed=1").is_err());
    }

    #[test]
    fn every_mixed_token_is_a_decline_row_and_mix_tokens_read() {
        for token in SOFT.iter().chain(HARD).chain(AUTHENTICATION) {
            assert!(by_token(token).is_some(), "{token}");
        }
        assert_eq!(mixed_token("pm_sandbox_mix"), Some(None));
        assert_eq!(mixed_token("pm_sandbox_mix_30"), Some(Some(30)));
        assert_eq!(mixed_token("pm_sandbox_mix_101"), None);
        assert_eq!(mixed_token("pm_sandbox_mixer"), None);
    }
}
