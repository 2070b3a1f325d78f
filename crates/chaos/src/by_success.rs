//! The `routing` run (#43; docs/BENCHMARKS.md, "Routing by success rate (#43)"): one merchant
//! whose route chooses between both faces of the sandbox by their recent approval rate
//! (`"strategy": "success_rate"`, docs/guides/routing.md). Provider A (the Stripe face)
//! approves 90 % and B (the Adyen face) 80 %; a quarter of the way through A falls to 30 %
//! (`POST /__sandbox/mix/stripe`), half way through it is back at 90 %. The run
//! reads where each checkout's first attempt went, in the order payorch made them, and
//! reports A's share per block of payments, how many payments after the drop it took until A
//! was left, and how many after the recovery until A had its traffic back.

use serde_json::{json, Value};

use crate::database::connect;

/// A's mix before the drop and after the recovery; B's all along. No outages: the run
/// measures routing, not the reconciler.
pub(crate) const STRIPE_MIX: &str = "approval=0.9,soft=0.7,hard=0.2,authentication_required=0.1";
pub(crate) const ADYEN_MIX: &str = "approval=0.8,soft=0.7,hard=0.2,authentication_required=0.1";

/// A's change at the drop, and at the recovery.
pub(crate) const DROPPED: &str = "approval=0.3";
pub(crate) const RECOVERED: &str = "approval=0.9";

/// The payments the thresholds are judged over: the last this many, all after the change.
pub(crate) const WINDOW: usize = 20;

/// A is left once fewer than this share of a window's payments go to it...
pub(crate) const LEFT_BELOW: f64 = 0.2;

/// ...and has its traffic back once more than this share do: at 90 % against B's 80 % it
/// should win most of them, and a router that only explores would send it far fewer.
pub(crate) const BACK_ABOVE: f64 = 0.4;

/// The merchant's routing document.
pub(crate) fn routing() -> Value {
    json!({ "providers": ["stripe", "adyen"], "strategy": "success_rate" })
}

/// Changes the Stripe face's mix as the sandbox's control endpoint takes it; the database's
/// clock just after, so the payments made before the change can be told from those after.
pub(crate) async fn change_a(
    sandbox_url: &str,
    secret: &str,
    mix: &str,
    database_url: &str,
) -> Result<f64, String> {
    let response = reqwest::Client::new()
        .post(format!("{sandbox_url}/__sandbox/mix/stripe"))
        .bearer_auth(secret)
        .body(mix.to_owned())
        .send()
        .await
        .map_err(|e| format!("changing the Stripe face's mix: {e}"))?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        return Err(format!("changing the Stripe face's mix: {status} {body}"));
    }
    let db = connect(database_url).await?;
    let row = db
        .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
        .await
        .map_err(|e| format!("reading the database's clock: {e}"))?;
    Ok(row.get(0))
}

/// Each checkout's first attempt, in the order payorch made them: (when, in seconds since
/// the epoch; whether it went to A).
pub(crate) async fn first_attempts(database_url: &str) -> Result<Vec<(f64, bool)>, String> {
    let db = connect(database_url).await?;
    let rows = db
        .query(
            "SELECT DISTINCT ON (order_id) extract(epoch FROM created_at)::float8, provider
               FROM payment_attempts ORDER BY order_id, created_at, id",
            &[],
        )
        .await
        .map_err(|e| format!("reading the database: {e}"))?;
    let mut firsts: Vec<(f64, bool)> = rows
        .iter()
        .map(|row| (row.get(0), row.get::<_, String>(1) == "stripe"))
        .collect();
    firsts.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(firsts)
}

/// Where the traffic went.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Moves {
    /// A's share of each block of `block` payments, in order.
    pub(crate) shares: Vec<f64>,
    pub(crate) block: usize,
    /// How many payments came before the drop, and before the recovery.
    pub(crate) drop_at: usize,
    pub(crate) recover_at: usize,
    /// A's share before the drop, between drop and recovery, and after the recovery.
    pub(crate) phases: [f64; 3],
    /// Payments after the drop until the last [`WINDOW`] of them sent less than
    /// [`LEFT_BELOW`] to A (the window's last payment's number after the drop).
    pub(crate) left_after: Option<usize>,
    /// Payments after the recovery until the last [`WINDOW`] sent more than
    /// [`BACK_ABOVE`] to A.
    pub(crate) back_after: Option<usize>,
}

/// Reads the moves of `to_a` (whether each payment went to A, in order), the drop before
/// payment `drop_at` and the recovery before `recover_at`.
pub(crate) fn moves(to_a: &[bool], drop_at: usize, recover_at: usize, block: usize) -> Moves {
    let share = |part: &[bool]| {
        if part.is_empty() {
            0.0
        } else {
            part.iter().filter(|a| **a).count() as f64 / part.len() as f64
        }
    };
    let drop_at = drop_at.min(to_a.len());
    let recover_at = recover_at.clamp(drop_at, to_a.len());
    // The first window wholly in `from..until` whose share `passes`.
    let first_window = |from: usize, until: usize, passes: &dyn Fn(f64) -> bool| {
        (from + WINDOW..=until)
            .find(|end| passes(share(&to_a[end - WINDOW..*end])))
            .map(|end| end - from)
    };
    Moves {
        shares: to_a.chunks(block.max(1)).map(share).collect(),
        block,
        drop_at,
        recover_at,
        phases: [
            share(&to_a[..drop_at]),
            share(&to_a[drop_at..recover_at]),
            share(&to_a[recover_at..]),
        ],
        left_after: first_window(drop_at, recover_at, &|s| s < LEFT_BELOW),
        back_after: first_window(recover_at, to_a.len(), &|s| s > BACK_ABOVE),
    }
}

impl Moves {
    /// Both moves made.
    pub(crate) fn good(&self) -> bool {
        self.left_after.is_some() && self.back_after.is_some()
    }

    /// A's share per block, in per cent: a `|` between blocks where a change came, a `*` on
    /// a block a change fell inside.
    pub(crate) fn blocks(&self) -> String {
        let changes = [self.drop_at, self.recover_at];
        let mut out = Vec::new();
        for (n, share) in self.shares.iter().enumerate() {
            let (start, end) = (n * self.block, (n + 1) * self.block);
            if n > 0 && changes.contains(&start) {
                out.push("|".to_owned());
            }
            let inside = changes.iter().any(|at| *at > start && *at < end);
            out.push(format!(
                "{:.0}{}",
                share * 100.0,
                if inside { "*" } else { "" }
            ));
        }
        out.join(" ")
    }
}

/// A count of payments, or "never".
pub(crate) fn after(n: Option<usize>) -> String {
    n.map_or("never".into(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` payments, every `k`-th to A (k = 1: all; 0: none).
    fn run(n: usize, k: usize) -> Vec<bool> {
        (0..n).map(|i| k > 0 && i % k == 0).collect()
    }

    #[test]
    fn traffic_that_leaves_and_comes_back_is_timed_from_each_change() {
        // 100 mostly to A; after the drop 10 more to A, then none; after the recovery 30
        // with one in ten to A, then all.
        let to_a = [run(100, 1), run(10, 1), run(90, 0), run(30, 10), run(70, 1)].concat();
        let moves = moves(&to_a, 100, 200, 50);
        // The first window of 20 after the drop with fewer than 4 to A ends at payment 27.
        assert_eq!(moves.left_after, Some(27));
        // The first after the recovery with more than 8 to A ends at payment 38.
        assert_eq!(moves.back_after, Some(38));
        assert!(moves.good());
        assert_eq!(moves.phases[0], 1.0);
        assert_eq!(moves.shares.len(), 6);
        assert_eq!(moves.blocks(), "100 100 | 20 0 | 46 100");
    }

    #[test]
    fn traffic_that_never_leaves_or_never_comes_back_is_not_good() {
        let stays = [run(100, 1), run(100, 2), run(100, 1)].concat();
        let moves_stay = moves(&stays, 100, 200, 50);
        assert_eq!(moves_stay.left_after, None);
        assert!(!moves_stay.good());
        let gone = [run(100, 1), run(100, 0), run(100, 10)].concat();
        let moves_gone = moves(&gone, 100, 200, 50);
        assert_eq!(moves_gone.left_after, Some(WINDOW));
        assert_eq!(moves_gone.back_after, None);
        assert!(!moves_gone.good());
        assert_eq!(after(None), "never");
    }

    #[test]
    fn a_change_inside_a_block_is_marked() {
        let to_a = run(100, 1);
        assert_eq!(moves(&to_a, 30, 70, 50).blocks(), "100* 100*");
    }
}
