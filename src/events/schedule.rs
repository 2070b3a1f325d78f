//! When a delivery is sent again, and when it is given up (docs/guides/events.md, "Answering, and retries";
//! docs/DESIGN.md, "Delivering events"): what an endpoint's answer means for its delivery and
//! for the endpoint, decided here without I/O so that the delivery worker only records it.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The nominal waits after the first, second, … failed attempt; after the last one fails the
/// delivery is given up. With the first attempt at once, ten attempts over about three days.
pub const RETRY_WAITS: [Duration; 9] = [
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(24 * 3600),
    Duration::from_secs(24 * 3600),
];

/// The longest `Retry-After` payorch waits for; a longer one is cut to it.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(24 * 3600);

/// How long an endpoint may fail every delivery, since its first failure after its last
/// success, before it is disabled.
pub const FAILING_LIMIT: chrono::Duration = chrono::Duration::days(3);

/// How an attempt ended, as the delivery worker saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The endpoint answered with this status (and `Retry-After`, if it sent one that reads).
    Status {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// Nothing usable came back: refused address, connect error, timeout, a broken answer.
    NoAnswer,
}

/// What becomes of a delivery after one of its attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Any `2xx`: delivered.
    Delivered,
    /// `410 Gone`: the endpoint asked to be sent nothing more; it is disabled.
    Gone,
    /// Failed: try again after this wait.
    RetryAfter(Duration),
    /// Failed, and it was the last attempt of the schedule: given up.
    GiveUp,
}

/// The schedule of one server; the tests shorten its waits.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Nominal waits after each failed attempt (default [`RETRY_WAITS`]); each is jittered.
    pub waits: Vec<Duration>,
    /// The longest `Retry-After` honoured (default [`RETRY_AFTER_CAP`]).
    pub retry_after_cap: Duration,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            waits: RETRY_WAITS.to_vec(),
            retry_after_cap: RETRY_AFTER_CAP,
        }
    }
}

impl Schedule {
    /// The verdict on attempt number `attempt` (1 for the first) that ended with `answer`;
    /// a retry's wait is jittered (`crate::jitter`, the project's one spread of waits, so
    /// that deliveries failed together by one outage are not retried together).
    pub fn judge(&self, attempt: u32, answer: &Answer) -> Verdict {
        self.judge_with(attempt, answer, crate::jitter::jittered)
    }

    /// [`judge`](Self::judge) with the jitter given, so that the tests see the nominal waits.
    pub fn judge_with(
        &self,
        attempt: u32,
        answer: &Answer,
        jitter: impl Fn(Duration) -> Duration,
    ) -> Verdict {
        let asked = match answer {
            Answer::Status { status, .. } if (200..300).contains(status) => {
                return Verdict::Delivered
            }
            Answer::Status { status: 410, .. } => return Verdict::Gone,
            // Only a 429 or 503 asks for a time (RFC 9110 §10.2.3, RFC 6585 §4).
            Answer::Status {
                status: 429 | 503,
                retry_after,
            } => retry_after.map(|asked| asked.min(self.retry_after_cap)),
            Answer::Status { .. } | Answer::NoAnswer => None,
        };
        let index = usize::try_from(attempt.max(1) - 1).unwrap_or(usize::MAX);
        match self.waits.get(index) {
            None => Verdict::GiveUp,
            Some(nominal) => {
                let wait = jitter(*nominal);
                Verdict::RetryAfter(asked.map_or(wait, |asked| wait.max(asked)))
            }
        }
    }
}

/// A `Retry-After` value as a wait from `now`: delay-seconds or an HTTP-date (RFC 9110
/// §10.2.3, with the two obsolete date forms of §5.6.7). A date in the past is no wait;
/// anything else unreadable is `None`.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Absurdly many digits: as long as can be, the cap cuts it.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = http_date(value)?;
    Some((at - now).to_std().unwrap_or(Duration::ZERO))
}

fn http_date(value: &str) -> Option<DateTime<Utc>> {
    // IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`, is an RFC 2822 date.
    if let Ok(at) = DateTime::parse_from_rfc2822(value) {
        return Some(at.with_timezone(&Utc));
    }
    // rfc850-date, `Sunday, 06-Nov-94 08:49:37 GMT`, and asctime, `Sun Nov  6 08:49:37 1994`.
    let naive = chrono::NaiveDateTime::parse_from_str(value, "%A, %d-%b-%y %H:%M:%S GMT")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(value, "%a %b %e %H:%M:%S %Y"))
        .ok()?;
    Some(naive.and_utc())
}

/// Whether an endpoint that has failed every delivery since `failing_since` is disabled by a
/// failure at `now`.
pub fn failing_too_long(failing_since: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now - failing_since >= FAILING_LIMIT
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16) -> Answer {
        Answer::Status {
            status,
            retry_after: None,
        }
    }

    fn asking(status: u16, secs: u64) -> Answer {
        Answer::Status {
            status,
            retry_after: Some(Duration::from_secs(secs)),
        }
    }

    fn nominal(schedule: &Schedule, attempt: u32, answer: &Answer) -> Verdict {
        schedule.judge_with(attempt, answer, |wait| wait)
    }

    fn retry(secs: u64) -> Verdict {
        Verdict::RetryAfter(Duration::from_secs(secs))
    }

    #[test]
    fn ten_attempts_over_about_three_days_then_given_up() {
        let schedule = Schedule::default();
        let waits: Vec<Verdict> = (1..=10)
            .map(|attempt| nominal(&schedule, attempt, &Answer::NoAnswer))
            .collect();
        let hour = 3600;
        assert_eq!(
            waits,
            [
                retry(5),
                retry(300),
                retry(1800),
                retry(2 * hour),
                retry(5 * hour),
                retry(10 * hour),
                retry(10 * hour),
                retry(24 * hour),
                retry(24 * hour),
                Verdict::GiveUp,
            ]
        );
        let total: Duration = RETRY_WAITS.iter().sum();
        // About three days: 3 days, 3 h, 35 min and 5 s.
        assert_eq!(total.as_secs(), 3 * 86_400 + 3 * hour + 35 * 60 + 5);
    }

    #[test]
    fn any_2xx_delivers_410_disables_everything_else_fails() {
        let schedule = Schedule::default();
        for code in [200, 201, 202, 204, 299] {
            assert_eq!(nominal(&schedule, 1, &status(code)), Verdict::Delivered);
            // Even the last attempt delivers.
            assert_eq!(nominal(&schedule, 10, &status(code)), Verdict::Delivered);
        }
        assert_eq!(nominal(&schedule, 3, &status(410)), Verdict::Gone);
        for code in [100, 301, 302, 307, 308, 400, 401, 404, 409, 429, 500, 503] {
            assert_eq!(nominal(&schedule, 1, &status(code)), retry(5), "{code}");
            assert_eq!(nominal(&schedule, 10, &status(code)), Verdict::GiveUp);
        }
    }

    #[test]
    fn retry_after_of_429_and_503_is_honoured_up_to_its_cap() {
        let schedule = Schedule::default();
        assert_eq!(nominal(&schedule, 1, &asking(429, 120)), retry(120));
        assert_eq!(nominal(&schedule, 1, &asking(503, 120)), retry(120));
        // Never sooner than the schedule.
        assert_eq!(nominal(&schedule, 2, &asking(503, 10)), retry(300));
        assert_eq!(
            nominal(&schedule, 1, &asking(429, 10 * 86_400)),
            retry(86_400)
        );
        // Other statuses do not ask for a time.
        assert_eq!(nominal(&schedule, 1, &asking(500, 120)), retry(5));
        // The schedule still ends.
        assert_eq!(nominal(&schedule, 10, &asking(429, 60)), Verdict::GiveUp);
    }

    #[test]
    fn the_waits_are_jittered() {
        let schedule = Schedule::default();
        for _ in 0..50 {
            let Verdict::RetryAfter(wait) = schedule.judge(2, &Answer::NoAnswer) else {
                panic!("a retry");
            };
            assert!(
                (Duration::from_secs(240)..=Duration::from_secs(360)).contains(&wait),
                "{wait:?}"
            );
        }
        // A Retry-After is a floor the jitter cannot go under.
        for _ in 0..50 {
            let Verdict::RetryAfter(wait) = schedule.judge(1, &asking(429, 600)) else {
                panic!("a retry");
            };
            assert_eq!(wait, Duration::from_secs(600));
        }
    }

    #[test]
    fn parses_retry_after_as_seconds_or_date() {
        let now = DateTime::parse_from_rfc3339("1994-11-06T08:49:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let secs = |s: u64| Some(Duration::from_secs(s));
        assert_eq!(parse_retry_after("120", now), secs(120));
        assert_eq!(parse_retry_after(" 0 ", now), secs(0));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            secs(u64::MAX)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            secs(37)
        );
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now),
            secs(37)
        );
        assert_eq!(parse_retry_after("Sun Nov  6 08:49:37 1994", now), secs(37));
        // In the past: at once, as far as the endpoint is concerned.
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            secs(0)
        );
        for unreadable in ["", "-5", "1.5", "soon", "Sun, 06 Nov 1994"] {
            assert_eq!(parse_retry_after(unreadable, now), None, "{unreadable:?}");
        }
    }

    #[test]
    fn an_endpoint_failing_for_three_days_is_disabled() {
        let since = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert!(!failing_too_long(since, since));
        assert!(!failing_too_long(
            since,
            since + chrono::Duration::days(3) - chrono::Duration::seconds(1)
        ));
        assert!(failing_too_long(since, since + chrono::Duration::days(3)));
    }
}
