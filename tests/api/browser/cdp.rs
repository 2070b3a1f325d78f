//! A Chrome DevTools Protocol client on a page's own websocket, for what chromedriver's
//! `goog/cdp/execute` ([`super::devtools`]) cannot do: receive events. A test that must hold
//! or fail an answer the server has already sent (the `Fetch` domain's `requestPaused`) needs
//! the event to learn the request's id. chromedriver names the browser's DevTools address in
//! the session's capabilities (`goog:chromeOptions.debuggerAddress`); its `/json/list` names
//! each page's websocket.
//!
//! The websocket is the least of RFC 6455 a DevTools endpoint on loopback needs: one
//! connection, no extensions, text messages, pings answered.

use std::collections::VecDeque;

use fantoccini::Client;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Any 16 bytes in base64 will do: the key proves nothing on a connection we open ourselves.
const HANDSHAKE_KEY: &str = "cGF5b3JjaC1kZXZ0b29scw==";

const CONTINUATION: u8 = 0x0;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// A DevTools session on one page of the browser.
pub struct PageSocket {
    stream: BufReader<TcpStream>,
    next_id: u64,
    /// Events that came while a command waited for its result.
    events: VecDeque<Value>,
}

impl PageSocket {
    /// Connects to the page of `client`'s browser whose address contains `url_part`.
    pub async fn connect(client: &Client, url_part: &str) -> Self {
        let address = client
            .capabilities()
            .and_then(|capabilities| capabilities.get("goog:chromeOptions"))
            .and_then(|options| options["debuggerAddress"].as_str())
            .expect("chromedriver names the browser's DevTools address")
            .to_owned();
        let targets: Vec<Value> = reqwest::get(format!("http://{address}/json/list"))
            .await
            .expect("the browser lists its pages")
            .json()
            .await
            .unwrap();
        let target = targets
            .iter()
            .find(|t| t["type"] == "page" && t["url"].as_str().unwrap_or("").contains(url_part))
            .unwrap_or_else(|| panic!("no page at {url_part:?} in {targets:?}"));
        let url = target["webSocketDebuggerUrl"].as_str().unwrap();
        let (host, path) = url
            .strip_prefix("ws://")
            .and_then(|rest| rest.split_once('/'))
            .unwrap_or_else(|| panic!("a ws:// address: {url}"));

        let mut stream = BufReader::new(TcpStream::connect(host).await.unwrap());
        let handshake = format!(
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {HANDSHAKE_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream
            .get_mut()
            .write_all(handshake.as_bytes())
            .await
            .unwrap();
        let mut line = String::new();
        stream.read_line(&mut line).await.unwrap();
        assert!(line.starts_with("HTTP/1.1 101"), "the upgrade: {line:?}");
        while line != "\r\n" {
            line.clear();
            assert!(
                stream.read_line(&mut line).await.unwrap() > 0,
                "headers cut off"
            );
        }
        PageSocket {
            stream,
            next_id: 1,
            events: VecDeque::new(),
        }
    }

    /// Runs `method` and returns its result; events that come first are kept for
    /// [`event`](Self::event).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        loop {
            let message = self.receive().await.expect("the DevTools socket is open");
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
            if message.get("method").is_some() {
                self.events.push_back(message);
            }
        }
    }

    /// Sends `method` without waiting for its result (which [`event`](Self::event) skips);
    /// its id.
    pub async fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"id": id, "method": method, "params": params}).to_string();
        self.write_frame(TEXT, message.as_bytes()).await;
        id
    }

    /// The next event, or `None` once the browser has closed the socket.
    pub async fn event(&mut self) -> Option<Value> {
        if let Some(event) = self.events.pop_front() {
            return Some(event);
        }
        loop {
            let message = self.receive().await?;
            if message.get("method").is_some() {
                return Some(message);
            }
        }
    }

    /// The next whole message, or `None` once the socket is closed.
    async fn receive(&mut self) -> Option<Value> {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.stream.read_exact(&mut head).await.ok()?;
            let last = head[0] & 0x80 != 0;
            let opcode = head[0] & 0x0f;
            let len = match head[1] & 0x7f {
                126 => u64::from(self.stream.read_u16().await.ok()?),
                127 => self.stream.read_u64().await.ok()?,
                short => u64::from(short),
            };
            // A server does not mask its frames, but the format allows it.
            let mask = if head[1] & 0x80 != 0 {
                let mut mask = [0u8; 4];
                self.stream.read_exact(&mut mask).await.ok()?;
                Some(mask)
            } else {
                None
            };
            let mut payload = vec![0u8; usize::try_from(len).unwrap()];
            self.stream.read_exact(&mut payload).await.ok()?;
            if let Some(mask) = mask {
                payload
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, byte)| *byte ^= mask[i % 4]);
            }
            match opcode {
                CONTINUATION | TEXT | BINARY => {
                    message.extend_from_slice(&payload);
                    if last {
                        return Some(
                            serde_json::from_slice(&message).expect("DevTools sends JSON"),
                        );
                    }
                }
                CLOSE => return None,
                PING => self.write_frame(PONG, &payload).await,
                _ => {}
            }
        }
    }

    /// One whole frame; a client masks what it sends (RFC 6455 §5.3).
    async fn write_frame(&mut self, opcode: u8, payload: &[u8]) {
        let mut frame = vec![0x80 | opcode];
        match payload.len() {
            len if len < 126 => frame.push(0x80 | len as u8),
            len if len <= usize::from(u16::MAX) => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        let mask: [u8; 4] = rand::random();
        frame.extend_from_slice(&mask);
        frame.extend(
            payload
                .iter()
                .enumerate()
                .map(|(i, byte)| byte ^ mask[i % 4]),
        );
        self.stream.get_mut().write_all(&frame).await.unwrap();
    }
}
