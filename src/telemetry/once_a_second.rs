//! A warning that could be logged thousands of times a second (a crowd refused at the door)
//! is logged at most once a second, with how many times it happened since it was last
//! logged, so the log cannot become the load.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct OnceASecond {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    since_logged: u64,
    logged_at: Option<Instant>,
}

impl OnceASecond {
    pub const fn new() -> Self {
        OnceASecond {
            state: Mutex::new(State {
                since_logged: 0,
                logged_at: None,
            }),
        }
    }

    /// Counts one occurrence; `Some(n)` when it is time to log it, for the `n` occurrences
    /// since the last time.
    pub fn count(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.since_logged += 1;
        let now = Instant::now();
        if state
            .logged_at
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            return None;
        }
        state.logged_at = Some(now);
        Some(std::mem::take(&mut state.since_logged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_is_logged_and_the_rest_of_the_second_counted_for_the_next() {
        let warning = OnceASecond::new();
        assert_eq!(warning.count(), Some(1));
        assert_eq!(warning.count(), None);
        assert_eq!(warning.count(), None);
        warning.state.lock().unwrap().logged_at = Some(Instant::now() - Duration::from_secs(2));
        assert_eq!(warning.count(), Some(3));
    }
}
