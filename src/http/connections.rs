//! The connection budget: how many connections payorch holds open at once, in all and per
//! client address, so that no client can use up its open files or memory (docs/guides/api.md, "Slow and
//! greedy clients").
//!
//! A connection over budget is closed the moment it is accepted, before a byte of it is
//! read: refusing it later (after its headers) would let a client that never sends them hold
//! it until the header timeout. A connection is counted until its client closes it
//! ([`BudgetedStream`]).

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ipnet::IpNet;

use crate::telemetry::once_a_second::OnceASecond;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Limits on what one client can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLimits {
    /// Open connections in all.
    pub max_connections: usize,
    /// Open connections from one address; 0: no per-address limit.
    pub max_connections_per_ip: usize,
    /// Addresses with no share of their own, only the total: a reverse proxy or a load
    /// balancer (every client behind it has its address), the provider's webhook senders,
    /// and this machine itself.
    pub exempt: Vec<IpNet>,
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
            exempt: loopback(),
            body_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(5),
        }
    }
}

/// This machine's own addresses, `127.0.0.1` and `::1`: a reverse proxy on the same host, or
/// the in-process sandbox's webhooks. Other `127.x` addresses are counted like any client's
/// (the load curve's benchmark uses them as many clients).
pub fn loopback() -> Vec<IpNet> {
    vec![
        IpNet::from(IpAddr::from([127, 0, 0, 1])),
        IpNet::from(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)),
    ]
}

/// Open files kept for everything but client connections: the database pool, the provider
/// client, logs, the private cluster's pipes.
const RESERVED_FILES: u64 = 256;

impl ClientLimits {
    /// Whether `ip` has no per-address share (an IPv4 peer on an IPv6 socket included).
    fn is_exempt(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.exempt.iter().any(|net| net.contains(&ip))
    }

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

/// The open connections, counted as they are accepted and closed.
#[derive(Debug)]
pub struct ConnectionBudget {
    limits: ClientLimits,
    open: Mutex<Open>,
    refusals: OnceASecond,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// A connection's place in the budget, given back when dropped. The stream that carries it
/// ([`BudgetedStream`]) drops it the moment the client closes, not when the server is done
/// with the connection: a client that gave up on a slow answer and reconnects is not
/// counted twice while its first request is still being answered.
#[derive(Debug)]
pub struct Slot {
    budget: Arc<ConnectionBudget>,
    ip: Option<IpAddr>,
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
            refusals: OnceASecond::new(),
        })
    }

    /// Admits a new connection from `peer` (unknown for a socket that is already gone), or
    /// refuses it: over the total, or over its address's share unless the address is
    /// exempt from shares (docs/guides/api.md, "Slow and greedy clients").
    pub fn admit(self: &Arc<Self>, peer: Option<IpAddr>) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.total >= self.limits.max_connections {
            drop(open);
            self.refused(peer, "the server's");
            return None;
        }
        let per_ip = self.limits.max_connections_per_ip;
        let counted = peer.filter(|ip| per_ip > 0 && !self.limits.is_exempt(*ip));
        if let Some(ip) = counted {
            let mine = open.by_ip.entry(ip).or_default();
            if *mine >= per_ip {
                drop(open);
                self.refused(peer, "its address's");
                return None;
            }
            *mine += 1;
        }
        open.total += 1;
        Some(Slot {
            budget: self.clone(),
            ip: counted,
        })
    }

    fn release(&self, ip: Option<IpAddr>) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(ip) = ip {
            if let Some(mine) = open.by_ip.get_mut(&ip) {
                *mine -= 1;
                if *mine == 0 {
                    // Forget the address, so the map shrinks back after a crowd has gone.
                    open.by_ip.remove(&ip);
                }
            }
        }
    }

    fn refused(&self, peer: Option<IpAddr>, whose: &str) {
        if let Some(refused) = self.refusals.count() {
            tracing::warn!(
                peer = ?peer,
                refused,
                "connection refused: over {whose} connection budget"
            );
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// Connections open now from `ip` (0 for an exempt address: it is not counted apart).
    #[cfg(test)]
    fn open_from(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.by_ip.get(&ip).copied().unwrap_or(0)
    }
}

/// A client connection holding its [`Slot`] until the client closes it: the first read
/// that finds its end (or fails), a failed write, or the server shutting it down, whichever
/// comes first; dropping the stream gives the slot back too.
pub struct BudgetedStream<S> {
    io: S,
    slot: Option<Slot>,
}

impl<S> BudgetedStream<S> {
    pub fn new(io: S, slot: Slot) -> Self {
        BudgetedStream {
            io,
            slot: Some(slot),
        }
    }

    fn closed(&mut self) {
        self.slot = None;
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for BudgetedStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        match &read {
            // Zero bytes into room for some: the client's end of the stream.
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                self.closed()
            }
            Poll::Ready(Err(_)) => self.closed(),
            _ => {}
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for BudgetedStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, data);
        if let Poll::Ready(Err(_)) = written {
            self.closed();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.io).poll_flush(cx);
        if let Poll::Ready(Err(_)) = flushed {
            self.closed();
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.closed();
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Err(_)) = written {
            self.closed();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn budget(total: usize, per_ip: usize) -> Arc<ConnectionBudget> {
        ConnectionBudget::new(ClientLimits {
            max_connections: total,
            max_connections_per_ip: per_ip,
            exempt: vec![],
            ..ClientLimits::default()
        })
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn one_address_cannot_take_more_than_its_share() {
        let budget = budget(10, 2);
        let first = budget.admit(ip("10.0.0.1"));
        let _second = budget.admit(ip("10.0.0.1")).unwrap();
        assert!(first.is_some());
        assert!(budget.admit(ip("10.0.0.1")).is_none());
        let _other = budget.admit(ip("10.0.0.2")).unwrap();
        drop(first);
        let _again = budget.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(budget.open(), 3);
        assert_eq!(budget.open_from("10.0.0.1".parse().unwrap()), 2);
    }

    #[test]
    fn the_total_holds_whatever_the_addresses() {
        let budget = budget(2, 0);
        let first = budget.admit(ip("10.0.0.1"));
        let _second = budget.admit(ip("10.0.0.2")).unwrap();
        assert!(budget.admit(ip("10.0.0.3")).is_none());
        drop(first);
        assert!(budget.admit(ip("10.0.0.3")).is_some());
    }

    #[test]
    fn exempt_addresses_count_only_in_the_total() {
        let budget = ConnectionBudget::new(ClientLimits {
            max_connections: 3,
            max_connections_per_ip: 1,
            ..ClientLimits::default()
        });
        let slots: Vec<_> = (0..3)
            .map(|_| budget.admit(ip("127.0.0.1")).unwrap())
            .collect();
        assert_eq!(budget.open_from("127.0.0.1".parse().unwrap()), 0);
        assert!(budget.admit(ip("::1")).is_none(), "the total still holds");
        drop(slots);
        let _mapped = budget.admit(ip("::ffff:127.0.0.1")).unwrap();
        let _other = budget.admit(ip("127.0.0.2")).unwrap();
        assert!(
            budget.admit(ip("127.0.0.2")).is_none(),
            "only the machine's own address is exempt"
        );
    }

    #[test]
    fn released_addresses_are_forgotten() {
        let budget = budget(10, 5);
        drop(budget.admit(ip("10.0.0.1")));
        assert!(budget.open.lock().unwrap().by_ip.is_empty());
    }

    #[tokio::test]
    async fn a_connection_leaves_the_budget_when_its_client_closes_not_when_the_server_does() {
        let budget = budget(10, 1);
        let (client, server) = tokio::io::duplex(64);
        let mut server = BudgetedStream::new(server, budget.admit(ip("10.0.0.1")).unwrap());
        let mut client = client;
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        assert!(server.read(&mut buf).await.unwrap() > 0);
        assert_eq!(budget.open(), 1, "reading a request keeps the slot");
        drop(client);
        assert_eq!(server.read(&mut buf).await.unwrap(), 0);
        assert_eq!(budget.open(), 0, "the client's end gives the slot back");
        assert!(budget.admit(ip("10.0.0.1")).is_some());
        drop(server);
        assert_eq!(budget.open(), 0, "and it is not given back twice");
    }
}
