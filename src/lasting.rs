//! The runtime that lasts as long as the process, for I/O that every HTTP worker shares.
//!
//! Each of the server's HTTP workers runs its own Tokio runtime, and a stopping server shuts an
//! idle worker's runtime down at once, while another worker still drains the requests it holds
//! (docs/operations/running.md, "Stopping and rolling deploys"). A pooled connection (a
//! provider's keep-alive connection in reqwest's pool, a database connection in the pool) is
//! driven by a task on the runtime that opened it: opened on a worker that is stopped first,
//! it dies under a request still running on another worker. A checkout waiting for its
//! provider then hears a transport error and is answered `pending`, its attempt left open
//! (found by the Debian package's check: 3 stops in 3 with two workers, none with one).
//!
//! So that I/O is started here instead: on the runtime current when the pool or the adapter
//! was built, which is `serve`'s own and stops last.

use std::future::Future;

use tokio::runtime::Handle;
use tokio::task::JoinError;

/// Where shared connections are opened: the runtime current when this was taken, or, taken
/// outside any runtime, wherever the caller polls.
#[derive(Debug, Clone)]
pub struct Lasting(Option<Handle>);

impl Lasting {
    /// The runtime running now (in `serve`: its main runtime, which outlives every worker).
    pub fn current() -> Self {
        Lasting(Handle::try_current().ok())
    }

    /// Runs `work` to its end on the lasting runtime, so that every connection it opens is
    /// driven there. `Err` only when that runtime is shutting down (the process is ending)
    /// or `work` panicked.
    pub async fn run<F>(&self, work: F) -> Result<F::Output, JoinError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.0 {
            Some(runtime) => runtime.spawn(work).await,
            None => Ok(work.await),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_on_the_runtime_taken_not_the_callers() {
        let lasting_runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lasting")
            .enable_all()
            .build()
            .unwrap();
        let lasting = lasting_runtime.block_on(async { Lasting::current() });
        // A worker's runtime, shut down while a connection it would have opened lives on.
        let worker = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (name, survivor) = worker
            .block_on(lasting.run(async {
                let name = std::thread::current().name().map(str::to_owned);
                // What a connection's driver is: a task spawned by the work.
                let survivor = tokio::spawn(async {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    "still driven"
                });
                (name, survivor)
            }))
            .unwrap();
        assert_eq!(name.as_deref(), Some("lasting"));
        drop(worker);
        assert_eq!(lasting_runtime.block_on(survivor).unwrap(), "still driven");
    }

    #[test]
    fn taken_outside_a_runtime_it_runs_in_place() {
        let lasting = Lasting::current();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(runtime.block_on(lasting.run(async { 7 })).unwrap(), 7);
    }
}
