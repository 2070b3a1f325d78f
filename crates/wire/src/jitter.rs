//! Jitter for waits that many callers start at once (docs/guides/checkout.md, "Payments"): after
//! a provider outage every open attempt was checked, and failed, at about the same moment, so
//! an exact schedule would bring all their next checks, and a sender's retries, back in one
//! burst. Each wait is drawn uniformly from [`LOW`, `HIGH`] × its nominal value: the mean is
//! the nominal schedule, no wait is ever shorter than 0.8 × its nominal (a retry is never
//! immediate), and a doubling schedule stays in order (1.2 × w < 0.8 × 2w).

use std::time::Duration;

use rand::Rng;

/// The shortest wait, as a fraction of the nominal one.
pub const LOW: f64 = 0.8;
/// The longest wait, as a fraction of the nominal one.
pub const HIGH: f64 = 1.2;

/// `nominal` jittered with a fresh draw.
pub fn jittered(nominal: Duration) -> Duration {
    spread(nominal, rand::rng().random::<f64>())
}

/// `nominal` scaled to the point `unit` (in `[0, 1)`) of [`LOW`, `HIGH`]: the random draw is
/// a parameter so that the bounds can be tested without chance. A nominal so long that its
/// scaled value does not fit stays nominal.
pub fn spread(nominal: Duration, unit: f64) -> Duration {
    let factor = LOW + (HIGH - LOW) * unit.clamp(0.0, 1.0);
    Duration::try_from_secs_f64(nominal.as_secs_f64() * factor).unwrap_or(nominal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_maps_the_unit_interval_onto_the_bounds() {
        let nominal = Duration::from_secs(60);
        let ms = |unit: f64| spread(nominal, unit).as_millis();
        assert_eq!(ms(0.0), 48_000);
        assert_eq!(ms(0.5), 60_000);
        assert_eq!(ms(0.999_999), 71_999);
        // A source that misbehaves cannot push a wait out of bounds.
        assert_eq!(ms(-3.0), 48_000);
        assert_eq!(ms(7.0), 72_000);
    }

    #[test]
    fn a_nominal_too_long_to_scale_stays_nominal() {
        assert_eq!(spread(Duration::MAX, 1.0), Duration::MAX);
        assert_eq!(spread(Duration::ZERO, 0.7), Duration::ZERO);
    }

    #[test]
    fn draws_stay_within_the_bounds_and_differ() {
        let nominal = Duration::from_secs(5);
        let draws: Vec<Duration> = (0..200).map(|_| jittered(nominal)).collect();
        for draw in &draws {
            assert!(
                (Duration::from_secs(4)..=Duration::from_secs(6)).contains(draw),
                "{draw:?} is outside [4 s, 6 s]"
            );
        }
        let (shortest, longest) = (draws.iter().min(), draws.iter().max());
        // 200 uniform draws: both ends of the range are reached within 0.2 s, except with
        // a probability of about 2 × 0.9^200, 1e-9.
        assert!(
            shortest < Some(&Duration::from_millis(4200)),
            "{shortest:?}"
        );
        assert!(longest > Some(&Duration::from_millis(5800)), "{longest:?}");
    }
}
