//! A door in front of a provider: a TCP forwarder that the test can shut, so the provider
//! refuses connections (its port closed, every open connection cut), and open again on the
//! same port.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Door {
    addr: SocketAddr,
    open: watch::Sender<bool>,
}

impl Door {
    /// An open door at a free port, forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Arc<Door> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the door");
        let addr = listener.local_addr().expect("the door's address");
        let (open, _) = watch::channel(true);
        let door = Arc::new(Door { addr, open });
        tokio::spawn(serve(listener, addr, target, door.open.subscribe()));
        door
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on connections are refused and open ones are cut.
    pub fn shut(&self) {
        self.open.send_replace(false);
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

async fn serve(
    mut listener: TcpListener,
    addr: SocketAddr,
    target: SocketAddr,
    mut open: watch::Receiver<bool>,
) {
    loop {
        // Open: forward until shut.
        let for_connections = open.clone();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((inbound, _)) = accepted else { continue };
                    tokio::spawn(forward(inbound, target, for_connections.clone()));
                }
                changed = open.wait_for(|is_open| !*is_open) => {
                    if changed.is_err() { return; }
                    break;
                }
            }
        }
        drop(listener);
        // Shut: nothing listens on the port until it opens again.
        if open.wait_for(|is_open| *is_open).await.is_err() {
            return;
        }
        listener = loop {
            match TcpListener::bind(addr).await {
                Ok(listener) => break listener,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
            }
        };
    }
}

async fn forward(mut inbound: TcpStream, target: SocketAddr, mut open: watch::Receiver<bool>) {
    let Ok(mut outbound) = TcpStream::connect(target).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
        _ = open.wait_for(|is_open| !*is_open) => {}
    }
}
