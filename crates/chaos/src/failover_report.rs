//! The `failover` run's part of the report: one row per step of the schedule, then what the
//! fenced node showed and what the prober saw.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::failover::{first_write, Failover, Shape, Step};
use crate::fence::{Fence, GRACE};
use crate::prober::{Outcome, Probe};

/// What a step's prober writes got, sent within the step's window.
#[derive(Debug, Default, Clone, Copy)]
struct Answers {
    created: usize,
    unavailable: usize,
    other: usize,
    failed: usize,
}

fn answers(probes: &[Probe], from: Duration, until: Duration) -> Answers {
    let mut answers = Answers::default();
    for probe in probes.iter().filter(|p| p.sent >= from && p.sent < until) {
        match &probe.outcome {
            Outcome::Created(_) => answers.created += 1,
            Outcome::Status { status: 503, .. } => answers.unavailable += 1,
            Outcome::Status { .. } => answers.other += 1,
            Outcome::Failed => answers.failed += 1,
        }
    }
    answers
}

/// When payorch could first reach the primary after the step's fault: the promotion the
/// formation reported, or, where nothing was promoted (in (b), as a rule), the restarted
/// primary's first read-write session.
fn anchor(step: &Step) -> Option<Duration> {
    match step.promoted {
        Some((_, at)) => Some(at),
        None => step.writable,
    }
}

/// Each replica's time from `from` to its first `2xx` after the fault, in seconds (may be
/// negative: payorch wrote before the formation said so).
fn reach_from(
    step: &Step,
    probes: &[Probe],
    replicas: usize,
    from: Option<Duration>,
) -> Vec<Option<f64>> {
    (0..replicas)
        .map(|r| {
            let first = first_write(probes, Some(r), step.verb_done)?;
            Some(first.as_secs_f64() - from?.as_secs_f64())
        })
        .collect()
}

/// Each replica's reach: from [`anchor`] to its first `2xx` after the fault.
pub(crate) fn reach(step: &Step, probes: &[Probe], replicas: usize) -> Vec<Option<f64>> {
    reach_from(step, probes, replicas, anchor(step))
}

/// The longest time without any `2xx` answer in the step's window, from its fault on: the
/// outage as the clients saw it, however many parts it had.
fn longest_gap(step: &Step, probes: &[Probe]) -> Duration {
    let mut times: Vec<Duration> = probes
        .iter()
        .filter(|p| p.order().is_some() && p.answered >= step.fault && p.answered < step.until)
        .map(|p| p.answered)
        .collect();
    times.push(step.fault);
    times.push(step.until);
    times.sort();
    times
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

/// The largest reach of any replica after a promotion.
pub(crate) fn max_reach(failover: &Failover) -> Option<f64> {
    failover
        .steps
        .iter()
        .filter(|s| s.promoted.is_some())
        .flat_map(|s| reach(s, &failover.probes, failover.replicas))
        .map(|r| r.unwrap_or(f64::INFINITY))
        .reduce(f64::max)
}

fn after(at: Option<Duration>, fault: Duration) -> String {
    match at {
        Some(at) => format!("+{:.1} s", at.saturating_sub(fault).as_secs_f64()),
        None => "—".into(),
    }
}

fn signed(secs: &[Option<f64>]) -> String {
    let each: Vec<String> = secs
        .iter()
        .map(|s| s.map_or("never".into(), |s| format!("{s:+.2}")))
        .collect();
    format!("{} s", each.join(" / "))
}

pub(crate) fn report(failover: &Failover) -> String {
    let mut out = String::new();
    macro_rules! say {
        ($($arg:tt)*) => {
            let _ = writeln!(out, $($arg)*);
        };
    }
    let probes = &failover.probes;
    say!();
    say!(
        "failover schedule: times from each fault verb's start. \"new primary\": when the formation first named another node primary (asked every 200 ms). \"writable\": when a session opened directly on the step's final primary was first read-write. \"first write\": the first 2xx of a prober write sent after the verb returned, on either replica. \"longest gap\": the longest time without any 2xx from the fault to the step's end — the outage clients saw. \"reach\": from the new primary's naming (where none was promoted, from its first read-write session) to each replica's first 2xx, replica 0 / replica 1; \"after writable\": the same from the direct read-write session. Counts over the step's window, from its fault to the next one's."
    );
    say!();
    let replicas = failover.replicas;
    say!(
        "| step | fault | verb returned | new primary | writable (direct) | first write through payorch | longest gap | payorch's reach | after writable | healthy | 503s (clients / prober) | 500s and other unexpected (clients / prober) | no answer (clients cut / prober) |"
    );
    say!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for step in &failover.steps {
        let window = answers(probes, step.fault, step.until);
        let first = first_write(probes, None, step.verb_done);
        let new_primary = match step.promoted {
            Some((node, at)) if step.shape == Shape::KillPostgres => {
                format!(
                    "{} {} (a failover)",
                    node.name(),
                    after(Some(at), step.fault)
                )
            }
            Some((node, at)) => format!("{} {}", node.name(), after(Some(at), step.fault)),
            None if step.shape == Shape::KillPostgres => {
                format!("{} (no failover)", step.node.name())
            }
            None => "—".into(),
        };
        say!(
            "| {} | {} {} | {} | {} | {} {} | {} | {:.1} s | {} | {} | {} | {} / {} | {} / {} | {} / {} |",
            step.name,
            step.shape.verb(),
            step.node.name(),
            after(Some(step.verb_done), step.fault),
            new_primary,
            step.primary_after.name(),
            after(step.writable, step.fault),
            after(first, step.fault),
            longest_gap(step, probes).as_secs_f64(),
            signed(&reach(step, probes, replicas)),
            signed(&reach_from(step, probes, replicas, step.writable)),
            after(Some(step.healthy), step.fault),
            step.clients.unavailable,
            window.unavailable,
            step.clients.unexpected,
            window.other,
            step.clients.cut,
            window.failed,
        );
    }
    say!();
    for step in &failover.steps {
        if !step.writes_back {
            say!(
                "step {}: writes did NOT come back through every replica within 120 s of the verb",
                step.name
            );
        }
        if let Some(fence) = &step.fence {
            fence_lines(&mut out, step, fence);
        }
    }
    match max_reach(failover) {
        Some(max) => {
            say!("payorch's reach after a promotion, the largest of any replica and step: {max:.2} s");
        }
        None => {
            say!("payorch's reach after a promotion: no promotion measured");
        }
    }
    let all = answers(probes, Duration::ZERO, Duration::MAX);
    say!(
        "prober: {} writes (one to each of {} replicas every 100 ms, from the warm-up before the first step to the end of the last): {} answered 2xx, {} 503, {} anything else (must be 0), {} unanswered; orders told created and missing on the final primary (must be 0): {}",
        probes.len(),
        replicas,
        all.created,
        all.unavailable,
        failover.unexpected_answers(),
        all.failed,
        failover
            .orders_lost
            .map_or("not checked".into(), |n| n.to_string())
    );
    let mut others: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for probe in probes {
        if let Outcome::Status {
            status,
            code,
            request_id,
        } = &probe.outcome
        {
            if *status != 503 {
                others
                    .entry(format!("{status} {code}"))
                    .or_default()
                    .push(format!(
                        "replica {} at {:.1} s, X-Request-Id {request_id}",
                        probe.replica,
                        probe.sent.as_secs_f64()
                    ));
            }
        }
    }
    for (what, seen) in others {
        say!(
            "prober answer {what}: {} times, e.g. {:?}",
            seen.len(),
            &seen[..seen.len().min(5)]
        );
    }
    out
}

fn fence_lines(out: &mut String, step: &Step, fence: &Fence) {
    let fenced = fence.fenced.map_or("?", |n| n.name());
    let primary = step.promoted.map_or("?", |(n, _)| n.name());
    let (most, last) = fence.most_sessions();
    let _ = writeln!(
        out,
        "step {} (fence): {fenced} {} at the last look, timeline {}; the primary {primary} on timeline {}. payorch's sessions on {fenced} (asked every 250 ms from {} to {} after the fault): most {most}, last seen {}; {} samples from {} on (promotion + {} s grace), {} of them with a session (must be 0).",
        step.name,
        if fence.writable { "still read-write" } else { "NOT read-write" },
        fence.timelines.0,
        fence.timelines.1,
        after(Some(fence.began), step.fault),
        after(fence.samples.last().map(|(at, _)| *at), step.fault),
        after(last, step.fault),
        fence.answered_after_grace(),
        after(Some(fence.deadline()), step.fault),
        GRACE.as_secs(),
        fence.sessions_after_grace(),
    );
    let _ = writeln!(
        out,
        "step {} (fence): orders the prober was answered 2xx for, sent since the fenced node came back: {}; missing on the primary {}, on the fenced node {} (each must be 0). Left on the fenced node and not on the primary, never acknowledged (discarded by its rejoin): {} orders, {} payment attempts.{}",
        step.name,
        fence.orders_checked,
        fence.orders_missing_on_primary,
        fence.orders_on_fenced,
        fence.stranded_orders,
        fence.stranded_attempts,
        if fence.errors.is_empty() {
            String::new()
        } else {
            format!(" Could not look: {:?}", fence.errors)
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failover::Counts;
    use crate::formation::Node;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// A kill-node step at 100 s whose verb returned at 101 s, node2 named at 150 s, writable
    /// at 149.8 s, the window ending at 180 s.
    fn step() -> Step {
        Step {
            name: "a",
            shape: Shape::KillNode,
            node: Node::One,
            fault: secs(100.0),
            verb_done: secs(101.0),
            promoted: Some((Node::Two, secs(150.0))),
            primary_after: Node::Two,
            writable: Some(secs(149.8)),
            healthy: secs(170.0),
            until: secs(180.0),
            writes_back: true,
            clients: Counts::default(),
            fence: None,
        }
    }

    fn probe(replica: usize, sent: f64, answered: f64, ok: bool) -> Probe {
        Probe {
            replica,
            sent: secs(sent),
            answered: secs(answered),
            outcome: if ok {
                Outcome::Created(format!("ord_{sent}"))
            } else {
                Outcome::Status {
                    status: 503,
                    code: "unavailable".into(),
                    request_id: String::new(),
                }
            },
        }
    }

    fn probes() -> Vec<Probe> {
        vec![
            // Before the kill landed, though after the verb started: not after the fault.
            probe(0, 100.2, 100.25, true),
            probe(1, 100.5, 101.5, false),
            probe(0, 149.9, 149.95, false),
            probe(1, 150.0, 150.1, true),
            probe(0, 150.1, 150.4, true),
            probe(0, 160.0, 160.1, true),
        ]
    }

    #[test]
    fn the_first_write_counts_only_writes_sent_after_the_verb() {
        let probes = probes();
        assert_eq!(first_write(&probes, None, secs(101.0)), Some(secs(150.1)));
        assert_eq!(
            first_write(&probes, Some(0), secs(101.0)),
            Some(secs(150.4))
        );
        assert_eq!(first_write(&probes, Some(2), secs(101.0)), None);
    }

    #[test]
    fn reach_is_from_the_promotion_to_each_replicas_first_write() {
        let probes = probes();
        let reach = reach(&step(), &probes, 2);
        assert!((reach[0].unwrap() - 0.4).abs() < 1e-9, "{reach:?}");
        assert!((reach[1].unwrap() - 0.1).abs() < 1e-9, "{reach:?}");
        // Without a promotion (a postmaster restarted in place), from its first read-write
        // session.
        let mut in_place = step();
        in_place.promoted = None;
        let reach = super::reach(&in_place, &probes, 2);
        assert!((reach[0].unwrap() - 0.6).abs() < 1e-9, "{reach:?}");
        // A replica that never wrote again makes the largest reach infinite.
        let failover = Failover {
            steps: vec![step()],
            probes: probes[..4].to_vec(),
            orders_lost: Some(0),
            replicas: 2,
        };
        assert_eq!(max_reach(&failover), Some(f64::INFINITY));
    }

    #[test]
    fn the_longest_gap_runs_from_the_last_write_before_the_outage_to_the_first_after() {
        let gap = longest_gap(&step(), &probes());
        assert!(
            (gap.as_secs_f64() - (150.1 - 100.25)).abs() < 1e-9,
            "{gap:?}"
        );
    }

    #[test]
    fn a_prober_write_answered_500_fails_the_run_and_a_503_does_not() {
        let mut failover = Failover {
            steps: vec![step()],
            probes: probes(),
            orders_lost: Some(0),
            replicas: 2,
        };
        assert_eq!(failover.findings(), 0);
        failover.probes.push(Probe {
            outcome: Outcome::Status {
                status: 500,
                code: "internal_error".into(),
                request_id: "r1".into(),
            },
            ..probe(1, 170.0, 170.1, false)
        });
        assert_eq!(failover.unexpected_answers(), 1);
        assert_eq!(failover.findings(), 1);
        assert!(report(&failover).contains("500 internal_error: 1 times"));
        // Orders not checked yet count as a finding too.
        failover.orders_lost = None;
        assert_eq!(failover.findings(), 2);
    }

    #[test]
    fn the_report_has_one_row_per_step() {
        let failover = Failover {
            steps: vec![step(), step()],
            probes: probes(),
            orders_lost: Some(0),
            replicas: 2,
        };
        let report = report(&failover);
        let rows = report.lines().filter(|l| l.starts_with("| a ")).count();
        assert_eq!(rows, 2, "{report}");
        assert!(
            report.contains("| kill-node node1 | +1.0 s | node2 +50.0 s |"),
            "{report}"
        );
    }
}
