//! The connection budget: how many connections payorch holds open at once, in all and per
//! client address, so that no client can use up its open files or memory (README, "Slow and
//! greedy clients").
//!
//! A connection over budget is shut down the moment it is accepted, before a byte of it is
//! read: refusing it later (after its headers) would let a client that never sends them hold
//! it until the header timeout.

use std::any::Any;
use std::collections::HashMap;
use std::net::{IpAddr, Shutdown};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::dev::Extensions;
use actix_web::rt::net::TcpStream;

/// Limits on what one client can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLimits {
    /// Open connections in all.
    pub max_connections: usize,
    /// Open connections from one address; 0: no per-address limit (behind a proxy, where
    /// every client has the proxy's address).
    pub max_connections_per_ip: usize,
    /// Longest a request body may take to arrive once its headers have.
    pub body_timeout: Duration,
    /// Longest a client may take to send a request's headers.
    pub header_timeout: Duration,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            max_connections: 10_000,
            max_connections_per_ip: 256,
            body_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(5),
        }
    }
}

/// Open files kept for everything but client connections: the database pool, the provider
/// client, logs, the private cluster's pipes.
const RESERVED_FILES: u64 = 256;

impl ClientLimits {
    /// These limits with `max_connections` lowered to what the process's open-file limit
    /// allows, after raising that limit to its hard maximum.
    pub fn fitted_to_open_files(mut self) -> Self {
        if let Some(files) = raise_open_file_limit() {
            let fits = files.saturating_sub(RESERVED_FILES).max(1);
            if (self.max_connections as u64) > fits {
                tracing::warn!(
                    max_connections = self.max_connections,
                    open_file_limit = files,
                    lowered_to = fits,
                    "the open-file limit is lower than the connection budget; budget lowered"
                );
                self.max_connections = fits as usize;
            }
        }
        self
    }
}

/// Raises the soft open-file limit to the hard one; the soft limit now.
fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    Some(limit.rlim_cur)
}

/// The open connections, counted as they are accepted and dropped.
#[derive(Debug)]
pub struct ConnectionBudget {
    limits: ClientLimits,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// Held in a connection's extensions for as long as the connection lives; gives its place in
/// the budget back when dropped.
struct Slot {
    budget: Arc<ConnectionBudget>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.budget.release(self.ip);
    }
}

impl ConnectionBudget {
    pub fn new(limits: ClientLimits) -> Arc<Self> {
        Arc::new(ConnectionBudget {
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    /// For `HttpServer::on_connect`: admits the new connection or shuts it down.
    pub fn on_connect(self: &Arc<Self>, connection: &dyn Any, extensions: &mut Extensions) {
        let Some(stream) = connection.downcast_ref::<TcpStream>() else {
            return;
        };
        let Ok(peer) = stream.peer_addr() else {
            return;
        };
        if self.admit(peer.ip()) {
            extensions.insert(Slot {
                budget: self.clone(),
                ip: peer.ip(),
            });
        } else {
            // The server then reads end-of-stream and drops the connection at once.
            let _ = socket2::SockRef::from(stream).shutdown(Shutdown::Both);
            tracing::warn!(peer = %peer.ip(), "connection refused: over the connection budget");
        }
    }

    fn admit(&self, ip: IpAddr) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.total >= self.limits.max_connections {
            return false;
        }
        let per_ip = self.limits.max_connections_per_ip;
        let mine = open.by_ip.entry(ip).or_default();
        if per_ip > 0 && *mine >= per_ip {
            return false;
        }
        *mine += 1;
        open.total += 1;
        true
    }

    fn release(&self, ip: IpAddr) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(mine) = open.by_ip.get_mut(&ip) {
            *mine -= 1;
            if *mine == 0 {
                // Forget the address, so the map shrinks back after a crowd has gone.
                open.by_ip.remove(&ip);
            }
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: usize, per_ip: usize) -> Arc<ConnectionBudget> {
        ConnectionBudget::new(ClientLimits {
            max_connections: total,
            max_connections_per_ip: per_ip,
            ..ClientLimits::default()
        })
    }

    #[test]
    fn one_address_cannot_take_more_than_its_share() {
        let budget = budget(10, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(budget.admit(a));
        assert!(budget.admit(a));
        assert!(!budget.admit(a));
        assert!(budget.admit(b));
        budget.release(a);
        assert!(budget.admit(a));
        assert_eq!(budget.open(), 3);
    }

    #[test]
    fn the_total_holds_whatever_the_addresses() {
        let budget = budget(2, 0);
        assert!(budget.admit("10.0.0.1".parse().unwrap()));
        assert!(budget.admit("10.0.0.2".parse().unwrap()));
        assert!(!budget.admit("10.0.0.3".parse().unwrap()));
        budget.release("10.0.0.1".parse().unwrap());
        assert!(budget.admit("10.0.0.3".parse().unwrap()));
    }

    #[test]
    fn released_addresses_are_forgotten() {
        let budget = budget(10, 5);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        budget.admit(a);
        budget.release(a);
        assert!(budget.open.lock().unwrap().by_ip.is_empty());
    }
}
