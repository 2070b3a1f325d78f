//! Intents started at a steady rate rather than as fast as the clients can go, so that the
//! load lasts through a schedule of faults (the `failover` run): intent `i` starts no earlier
//! than `i` intervals after the first, and the last few wait until the schedule is over, so
//! requests are in flight at every fault however fast the rest went.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

pub(crate) struct Pace {
    started: Instant,
    every: Duration,
    /// Intents from this index on wait for [`Pace::release`].
    held_from: usize,
    released: AtomicBool,
    wake: Notify,
}

impl Pace {
    /// `intents` spread evenly over `over`; the last `held` of them wait for the release.
    pub(crate) fn new(intents: usize, over: Duration, held: usize) -> Pace {
        Pace {
            started: Instant::now(),
            every: over / intents.max(1) as u32,
            held_from: intents.saturating_sub(held),
            released: AtomicBool::new(false),
            wake: Notify::new(),
        }
    }

    /// Waits until intent `i` may start.
    pub(crate) async fn wait(&self, i: usize) {
        let at = self.started + self.every * i as u32;
        tokio::time::sleep_until(at.into()).await;
        if i < self.held_from {
            return;
        }
        loop {
            let woken = self.wake.notified();
            if self.released.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    /// The schedule is over: the held intents go.
    pub(crate) fn release(&self) {
        self.released.store(true, Ordering::Release);
        self.wake.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn intents_start_in_turn_and_the_last_wait_for_the_release() {
        let pace = std::sync::Arc::new(Pace::new(4, Duration::from_millis(400), 1));
        let started = Instant::now();
        pace.wait(0).await;
        pace.wait(2).await;
        assert!(started.elapsed() >= Duration::from_millis(200));
        let last = tokio::spawn({
            let pace = pace.clone();
            async move { pace.wait(3).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!last.is_finished(), "held until the release");
        pace.release();
        tokio::time::timeout(Duration::from_secs(1), last)
            .await
            .expect("released")
            .expect("no panic");
    }
}
