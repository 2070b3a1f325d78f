//! Who is at the other end of a request: the client's address, the host it asked for and the
//! scheme it used. The TCP peer is believed; what `X-Forwarded-For` or `Forwarded` says is
//! believed only from the proxies the operator named (`--trusted-proxies`), since anyone
//! else can write anything there (issue #40; docs/PRODUCTION.md, "Limits and the addresses
//! payorch believes"). Every user of a client address asks here: the request's log span and
//! the per-address limits. The connection budget counts TCP peers, as it must: a connection
//! is the peer's, whoever is behind it (docs/guides/api.md, "Slow and greedy clients").

use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

use actix_web::http::header::{self, HeaderMap, HeaderName};
use actix_web::HttpRequest;
use ipnet::IpNet;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Which header the trusted proxies write. Only that one is read: a proxy that appends to
/// `X-Forwarded-For` passes a `Forwarded` the client made up untouched (and the other way
/// round), so reading both would believe the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For`, with `X-Forwarded-Proto` and `X-Forwarded-Host` (nginx, HAProxy,
    /// the cloud load balancers).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded`: `for=`, `proto=` and `host=`.
    Forwarded,
}

impl FromStr for ForwardedHeader {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(ForwardedHeader::XForwardedFor),
            "forwarded" => Ok(ForwardedHeader::Forwarded),
            _ => Err(format!("`{text}`: say `x-forwarded-for` or `forwarded`")),
        }
    }
}

/// The proxies in front of payorch whose forwarding headers are believed; none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    pub nets: Vec<IpNet>,
    pub header: ForwardedHeader,
}

/// Who a request came from, as far as payorch can believe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// `None` only for a socket whose peer is already gone.
    pub ip: Option<IpAddr>,
    /// The `Host` the client asked for.
    pub host: String,
    /// `http` or `https`, as the client spoke to the first trusted proxy (or to payorch).
    pub scheme: String,
}

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request from `peer` with `headers`: the peer itself unless it is a
    /// trusted proxy; then the right-most address of the forwarded chain that is not a
    /// trusted proxy (everything left of it was written by someone payorch does not trust).
    /// An entry that is not an address (`unknown`, an obfuscated name) ends the walk at the
    /// trusted proxy that wrote it.
    pub fn client(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Client {
        let mut client = Client {
            ip: peer.map(canonical),
            host: header_text(headers, &header::HOST).unwrap_or_default(),
            scheme: "http".into(),
        };
        let Some(peer) = client.ip.filter(|ip| self.trusts(*ip)) else {
            return client;
        };
        let hops = match self.header {
            ForwardedHeader::XForwardedFor => x_forwarded_hops(headers),
            ForwardedHeader::Forwarded => forwarded_hops(headers),
        };
        // The proxy next to payorch says how it was asked; with `Forwarded`, each hop says
        // how it was asked, and the client's own hop is the one that counts.
        let mut nearest = Hop {
            ip: Some(peer),
            ..Hop::default()
        };
        if self.header == ForwardedHeader::XForwardedFor {
            nearest.proto = last_value(headers, &X_FORWARDED_PROTO);
            nearest.host = last_value(headers, &X_FORWARDED_HOST);
        }
        let mut chosen = nearest;
        for hop in hops.into_iter().rev() {
            let Some(ip) = hop.ip else {
                break;
            };
            let trusted = self.trusts(ip);
            chosen = Hop {
                ip: Some(ip),
                proto: hop.proto.or(chosen.proto),
                host: hop.host.or(chosen.host),
            };
            if !trusted {
                break;
            }
        }
        client.ip = chosen.ip;
        if let Some(proto) = chosen.proto.filter(|p| p == "http" || p == "https") {
            client.scheme = proto;
        }
        if let Some(host) = chosen.host {
            client.host = host;
        }
        client
    }
}

/// The client of `req`, as the application's trusted proxies (its app data) tell it.
pub fn client_of(req: &HttpRequest) -> Client {
    let peer = req.peer_addr().map(|addr| addr.ip());
    match req.app_data::<TrustedProxies>() {
        Some(trusted) => trusted.client(peer, req.headers()),
        None => TrustedProxies::default().client(peer, req.headers()),
    }
}

/// An IPv4 peer on an IPv6 socket is the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// One proxy's entry in the chain.
#[derive(Debug, Default, Clone)]
struct Hop {
    /// `None`: not an address.
    ip: Option<IpAddr>,
    proto: Option<String>,
    host: Option<String>,
}

fn header_text(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Every comma-separated value of every `name` header, in order.
fn values<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

fn last_value(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    values(headers, name)
        .last()
        .filter(|v| !v.is_empty())
        .map(|v| v.to_ascii_lowercase())
}

fn x_forwarded_hops(headers: &HeaderMap) -> Vec<Hop> {
    values(headers, &X_FORWARDED_FOR)
        .map(|node| Hop {
            ip: parse_node(node),
            ..Hop::default()
        })
        .collect()
}

/// RFC 7239: `for=192.0.2.60;proto=https;host=pay.example, for="[2001:db8::1]:4711"`.
fn forwarded_hops(headers: &HeaderMap) -> Vec<Hop> {
    values(headers, &header::FORWARDED)
        .map(|element| {
            let mut hop = Hop::default();
            for pair in element.split(';') {
                let Some((name, value)) = pair.split_once('=') else {
                    continue;
                };
                let value = value.trim().trim_matches('"');
                match name.trim().to_ascii_lowercase().as_str() {
                    "for" => hop.ip = parse_node(value),
                    "proto" => hop.proto = Some(value.to_ascii_lowercase()),
                    "host" => hop.host = Some(value.to_owned()),
                    _ => {}
                }
            }
            hop
        })
        .collect()
}

/// `192.0.2.60`, `192.0.2.60:4711`, `2001:db8::1`, `[2001:db8::1]:4711`; anything else (an
/// obfuscated name, `unknown`) is no address.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim().trim_matches('"');
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Some(rest) = node.strip_prefix('[') {
        let (v6, _) = rest.split_once(']')?;
        return v6.parse::<Ipv6Addr>().ok().map(|ip| canonical(ip.into()));
    }
    let (v4, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    v4.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    fn trusting(nets: &[&str], header: ForwardedHeader) -> TrustedProxies {
        TrustedProxies {
            nets: nets.iter().map(|n| n.parse().unwrap()).collect(),
            header,
        }
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    const SPOOFED: [(&str, &str); 5] = [
        ("host", "pay.example"),
        ("x-forwarded-for", "203.0.113.9"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "evil.example"),
        (
            "forwarded",
            "for=198.51.100.7;proto=https;host=evil.example",
        ),
    ];

    #[test]
    fn nobody_is_believed_by_default() {
        let client = TrustedProxies::default().client(ip("192.0.2.1"), &headers(&SPOOFED));
        assert_eq!(
            client,
            Client {
                ip: ip("192.0.2.1"),
                host: "pay.example".into(),
                scheme: "http".into(),
            }
        );
    }

    #[test]
    fn only_a_trusted_peer_is_believed_and_only_in_the_header_named() {
        let proxies = trusting(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let untrusted = proxies.client(ip("192.0.2.1"), &headers(&SPOOFED));
        assert_eq!(untrusted.ip, ip("192.0.2.1"));
        assert_eq!(untrusted.scheme, "http");
        let through_proxy = proxies.client(ip("10.0.0.5"), &headers(&SPOOFED));
        assert_eq!(
            through_proxy,
            Client {
                ip: ip("203.0.113.9"),
                host: "evil.example".into(),
                scheme: "https".into(),
            },
            "the proxy's X-Forwarded-* are believed, the client's Forwarded is not"
        );
        let forwarded = trusting(&["10.0.0.0/8"], ForwardedHeader::Forwarded);
        let through_proxy = forwarded.client(ip("10.0.0.5"), &headers(&SPOOFED));
        assert_eq!(through_proxy.ip, ip("198.51.100.7"));
        assert_eq!(through_proxy.scheme, "https");
    }

    #[test]
    fn the_right_most_untrusted_address_is_the_client() {
        let proxies = trusting(
            &["10.0.0.0/8", "127.0.0.1/32"],
            ForwardedHeader::XForwardedFor,
        );
        // The client wrote `1.1.1.1` itself; its proxy appended what it saw.
        let chain = headers(&[
            ("x-forwarded-for", "1.1.1.1, 203.0.113.9"),
            ("x-forwarded-for", "10.0.0.7"),
        ]);
        assert_eq!(
            proxies.client(ip("127.0.0.1"), &chain).ip,
            ip("203.0.113.9")
        );
        assert_eq!(
            proxies.client(ip("::ffff:127.0.0.1"), &chain).ip,
            ip("203.0.113.9"),
            "an IPv4 peer on an IPv6 socket"
        );
        let all_proxies = headers(&[("x-forwarded-for", "10.0.0.8, 10.0.0.7")]);
        assert_eq!(
            proxies.client(ip("127.0.0.1"), &all_proxies).ip,
            ip("10.0.0.8")
        );
        let hidden = headers(&[("x-forwarded-for", "203.0.113.9, unknown, 10.0.0.7")]);
        assert_eq!(
            proxies.client(ip("127.0.0.1"), &hidden).ip,
            ip("10.0.0.7"),
            "not past an entry that is no address"
        );
        let none = headers(&[]);
        assert_eq!(proxies.client(ip("10.0.0.7"), &none).ip, ip("10.0.0.7"));
    }

    /// The fields of the root span of `request`, served behind `proxies` by payorch's request
    /// logger, as a log line would show them.
    async fn root_span_fields(
        request: actix_web::test::TestRequest,
        proxies: TrustedProxies,
    ) -> Vec<(String, String)> {
        use actix_web::{test, web, App, HttpResponse};
        use std::sync::{Arc, Mutex};
        use tracing::field::{Field, Visit};
        use tracing_actix_web::TracingLogger;

        use crate::http::middleware::PayorchRootSpan;
        use tracing_subscriber::layer::{Context, SubscriberExt};

        #[derive(Clone, Default)]
        struct Fields(Arc<Mutex<Vec<(String, String)>>>);
        impl Visit for Fields {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                let value = (field.name().to_owned(), format!("{value:?}"));
                self.0.lock().unwrap().push(value);
            }
        }
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Fields {
            fn on_new_span(
                &self,
                attrs: &tracing::span::Attributes<'_>,
                _: &tracing::span::Id,
                _: Context<'_, S>,
            ) {
                attrs.record(&mut self.clone());
            }
        }
        let fields = Fields::default();
        let subscriber = tracing_subscriber::registry().with(fields.clone());
        // The test runs the service on this thread.
        let _logging = tracing::subscriber::set_default(subscriber);
        let app = App::new()
            .app_data(proxies)
            .wrap(TracingLogger::<PayorchRootSpan>::new())
            .route("/v1/payments/{id}", web::get().to(HttpResponse::Ok));
        let service = test::init_service(app).await;
        test::call_service(&service, request.to_request()).await;
        let seen = fields.0.lock().unwrap().clone();
        seen
    }

    fn field(fields: &[(String, String)], name: &str) -> String {
        let found = fields.iter().find(|(n, _)| n == name);
        found.map(|(_, v)| v.clone()).unwrap_or_default()
    }

    #[actix_web::test]
    async fn the_log_span_shows_what_the_trusted_proxies_say_and_nothing_a_client_made_up() {
        let spoofing = || {
            let mut request = actix_web::test::TestRequest::get()
                .uri("/v1/payments/pay_1")
                .peer_addr("10.0.0.5:40000".parse().unwrap());
            for (name, value) in SPOOFED {
                request = request.insert_header((name, value));
            }
            request
        };
        let untrusted = root_span_fields(spoofing(), TrustedProxies::default()).await;
        assert_eq!(field(&untrusted, "http.client_ip"), "10.0.0.5");
        assert_eq!(field(&untrusted, "http.host"), "pay.example");
        assert_eq!(field(&untrusted, "http.scheme"), "http");
        assert!(
            !untrusted.iter().any(|(_, v)| v.contains("203.0.113.9")
                || v.contains("198.51.100.7")
                || v.contains("evil.example")),
            "{untrusted:?}"
        );
        let proxies = trusting(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let trusted = root_span_fields(spoofing(), proxies).await;
        assert_eq!(field(&trusted, "http.client_ip"), "203.0.113.9");
        assert_eq!(field(&trusted, "http.host"), "evil.example");
        assert_eq!(field(&trusted, "http.scheme"), "https");
    }

    #[test]
    fn forwarded_nodes_with_ports_and_brackets_are_read() {
        let proxies = trusting(&["10.0.0.0/8"], ForwardedHeader::Forwarded);
        let chain = headers(&[(
            "forwarded",
            "for=\"[2001:db8:cafe::17]:4711\";proto=https, for=10.0.0.9:80",
        )]);
        let client = proxies.client(ip("10.0.0.5"), &chain);
        assert_eq!(client.ip, ip("2001:db8:cafe::17"));
        assert_eq!(client.scheme, "https");
        assert_eq!(parse_node("192.0.2.1:8080"), ip("192.0.2.1"));
        assert_eq!(parse_node("_hidden"), None);
        assert_eq!(parse_node("unknown"), None);
    }
}
