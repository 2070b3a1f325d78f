//! Where payorch may send a merchant's events (docs/guides/events.md, "Registering an endpoint";
//! docs/DESIGN.md, "Delivering events"). An endpoint's URL is a request payorch makes from
//! inside its own network on a stranger's say-so, so what it may reach is narrow:
//!
//! - `https` only; `http` only to a loopback host, and only on a server started with
//!   `--allow-http-webhooks` (the demo and the tests, whose receivers have no certificate);
//! - no address of a private network (RFC 1918, unique local `fc00::/7`, carrier-grade NAT
//!   `100.64.0.0/10`) or link-local (`169.254.0.0/16`, `fe80::/10`) unless the server was
//!   started with `--allow-private-webhook-addresses` (payorch and its merchants in one
//!   private network);
//! - loopback only with one of the two flags: either says "this server sends to itself";
//! - never a cloud metadata address (`169.254.169.254`, `fd00:ec2::254`: what a server's own
//!   credentials are read from), nor an address no one can be at (unspecified, multicast,
//!   broadcast, documentation, reserved), whatever the flags: no deployment needs them, and
//!   `0.0.0.0` reaches the server itself on Linux.
//!
//! A URL naming an address is judged when it is registered and again before each send; a URL
//! naming a host is judged by what the host resolves to at each send (the delivery worker's
//! resolver calls [`check_address`] for every address), so a name that later resolves to a
//! private address (DNS rebinding) is refused then.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use reqwest::Url;

use crate::words::words;

/// Which URLs this server registers and sends to (`--allow-http-webhooks`,
/// `--allow-private-webhook-addresses`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UrlPolicy {
    /// `http://` to a loopback host (and loopback addresses at all).
    pub allow_http: bool,
    /// Private and link-local addresses (and loopback).
    pub allow_private: bool,
}

words! {
    /// What kind of address a refused one is.
    pub enum AddressClass {
        Loopback => "loopback",
        Private => "private",
        SharedNat => "carrier-grade NAT",
        LinkLocal => "link-local",
        Metadata => "cloud metadata",
        Unspecified => "unspecified",
        Multicast => "multicast",
        Broadcast => "broadcast",
        Documentation => "documentation",
        Reserved => "reserved",
    }
}

impl AddressClass {
    /// Whether `policy` lets payorch send to an address of this class.
    pub fn allowed_by(self, policy: &UrlPolicy) -> bool {
        match self {
            AddressClass::Loopback => policy.allow_http || policy.allow_private,
            AddressClass::Private | AddressClass::SharedNat | AddressClass::LinkLocal => {
                policy.allow_private
            }
            AddressClass::Metadata
            | AddressClass::Unspecified
            | AddressClass::Multicast
            | AddressClass::Broadcast
            | AddressClass::Documentation
            | AddressClass::Reserved => false,
        }
    }

    /// What the merchant (or operator) can do about it.
    fn remedy(self) -> &'static str {
        match self {
            AddressClass::Loopback => {
                "give a public host (a server started with --allow-http-webhooks or \
                 --allow-private-webhook-addresses sends to its own machine)"
            }
            AddressClass::Private | AddressClass::SharedNat | AddressClass::LinkLocal => {
                "give a public host (a server started with --allow-private-webhook-addresses \
                 sends inside its private network)"
            }
            _ => "give a public host",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a URL cannot be an endpoint's. Each message is a field problem of `/url`: it says
/// what the URL must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    #[error("must be an absolute URL, such as https://shop.example/webhooks/payorch")]
    NotAUrl,
    #[error("must name a host, such as https://shop.example/webhooks/payorch")]
    NoHost,
    #[error("must not hold a user name or password: payorch proves itself by the signature, see docs/guides/events.md \"Verifying a delivery\"")]
    Credentials,
    #[error("must use https (it is {scheme}); http only to a loopback host of a server started with --allow-http-webhooks")]
    Scheme { scheme: String },
    #[error("must not name the {class} address {address}: {remedy}", remedy = class.remedy())]
    Address {
        address: IpAddr,
        class: AddressClass,
    },
}

/// An address a send was refused, named by the host it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{host} resolves to {address}, a {class} address payorch does not send to: {remedy}", remedy = class.remedy())]
pub struct AddressRefused {
    pub host: String,
    pub address: IpAddr,
    pub class: AddressClass,
}

/// The URL, if payorch may register it under `policy`. A host that is a name is judged at
/// each send, by what it resolves to.
pub fn check_registration(url: &str, policy: &UrlPolicy) -> Result<Url, UrlRefused> {
    let parsed = Url::parse(url).map_err(|_| UrlRefused::NotAUrl)?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(UrlRefused::Credentials);
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(UrlRefused::NoHost);
    }
    let address = host_address(&parsed);
    match parsed.scheme() {
        "https" => {}
        "http" if policy.allow_http && is_loopback_host(&parsed) => {}
        other => {
            return Err(UrlRefused::Scheme {
                scheme: other.to_owned(),
            })
        }
    }
    if let Some(address) = address {
        if let Err(class) = check_address(address, policy) {
            return Err(UrlRefused::Address { address, class });
        }
    }
    Ok(parsed)
}

/// Whether a URL's host is this machine: a loopback address, `localhost` or a name under
/// `.localhost` (which resolvers answer with loopback, RFC 6761). Only a host's name is
/// judged here; what a name resolves to is judged at the send.
pub fn is_loopback_host(url: &Url) -> bool {
    if let Some(address) = host_address(url) {
        return address.is_loopback();
    }
    let name = url
        .host_str()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// The URL's host when it is an address (`Url` writes it normalised: `0x7f.1` is
/// `127.0.0.1`, an IPv6 address is in brackets).
pub fn host_address(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// `Ok` if payorch may send to `address` under `policy`; else its class.
pub fn check_address(address: IpAddr, policy: &UrlPolicy) -> Result<(), AddressClass> {
    match classify(address) {
        Some(class) if !class.allowed_by(policy) => Err(class),
        _ => Ok(()),
    }
}

/// The class of an address that is not an ordinary public one; `None` for a public address.
pub fn classify(address: IpAddr) -> Option<AddressClass> {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

const METADATA_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

fn v4(text: &str) -> Ipv4Net {
    text.parse().expect("a literal IPv4 range")
}

fn v6(text: &str) -> Ipv6Net {
    text.parse().expect("a literal IPv6 range")
}

fn classify_v4(address: Ipv4Addr) -> Option<AddressClass> {
    if address == METADATA_V4 {
        return Some(AddressClass::Metadata);
    }
    if address == Ipv4Addr::BROADCAST {
        return Some(AddressClass::Broadcast);
    }
    let ranges = [
        ("0.0.0.0/8", AddressClass::Unspecified),
        ("127.0.0.0/8", AddressClass::Loopback),
        ("10.0.0.0/8", AddressClass::Private),
        ("172.16.0.0/12", AddressClass::Private),
        ("192.168.0.0/16", AddressClass::Private),
        ("100.64.0.0/10", AddressClass::SharedNat),
        ("169.254.0.0/16", AddressClass::LinkLocal),
        ("224.0.0.0/4", AddressClass::Multicast),
        ("192.0.2.0/24", AddressClass::Documentation),
        ("198.51.100.0/24", AddressClass::Documentation),
        ("203.0.113.0/24", AddressClass::Documentation),
        // IETF protocol assignments, benchmarking, and the old class E.
        ("192.0.0.0/24", AddressClass::Reserved),
        ("198.18.0.0/15", AddressClass::Reserved),
        ("240.0.0.0/4", AddressClass::Reserved),
    ];
    ranges
        .into_iter()
        .find(|(range, _)| v4(range).contains(&address))
        .map(|(_, class)| class)
}

fn classify_v6(address: Ipv6Addr) -> Option<AddressClass> {
    // An IPv4 address written as IPv6 reaches that IPv4 address: judged as one.
    if let Some(mapped) = address.to_ipv4_mapped() {
        return classify_v4(mapped);
    }
    let [a, b, c, d, e, f, _, _] = address.segments();
    // NAT64's well-known prefix (RFC 6052) carries an IPv4 address in its last 32 bits.
    if [a, b, c, d, e, f] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., w, x, y, z] = address.octets();
        return classify_v4(Ipv4Addr::new(w, x, y, z));
    }
    if address == METADATA_V6 {
        return Some(AddressClass::Metadata);
    }
    if address.is_unspecified() {
        return Some(AddressClass::Unspecified);
    }
    if address.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    // The deprecated IPv4-compatible form (`::a.b.c.d`, RFC 4291) reaches that IPv4 address.
    if let Some(compatible) = address.to_ipv4().filter(|_| v6("::/96").contains(&address)) {
        return classify_v4(compatible).or(Some(AddressClass::Reserved));
    }
    let ranges = [
        ("fc00::/7", AddressClass::Private),
        ("fe80::/10", AddressClass::LinkLocal),
        ("ff00::/8", AddressClass::Multicast),
        ("2001:db8::/32", AddressClass::Documentation),
        // Discard-only, and the deprecated site-local range.
        ("100::/64", AddressClass::Reserved),
        ("fec0::/10", AddressClass::Reserved),
        // Forms that carry an IPv4 address somewhere inside (issue #40): NAT64's local-use
        // prefix (RFC 8215), 6to4 (RFC 3056) and Teredo (RFC 4380). Where they lead is the
        // IPv4 network's business, so they are refused whatever they carry.
        ("64:ff9b:1::/48", AddressClass::Reserved),
        ("2002::/16", AddressClass::Reserved),
        ("2001::/32", AddressClass::Reserved),
    ];
    if let Some(class) = ranges
        .into_iter()
        .find(|(range, _)| v6(range).contains(&address))
        .map(|(_, class)| class)
    {
        return Some(class);
    }
    // Only global unicast (2000::/3) is a public IPv6 address; everything else is reserved.
    (!v6("2000::/3").contains(&address)).then_some(AddressClass::Reserved)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: UrlPolicy = UrlPolicy {
        allow_http: false,
        allow_private: false,
    };
    const HTTP: UrlPolicy = UrlPolicy {
        allow_http: true,
        allow_private: false,
    };
    const PRIVATE: UrlPolicy = UrlPolicy {
        allow_http: false,
        allow_private: true,
    };
    const BOTH: UrlPolicy = UrlPolicy {
        allow_http: true,
        allow_private: true,
    };

    fn class(address: &str) -> Option<AddressClass> {
        classify(address.parse().expect("an address"))
    }

    #[test]
    fn classifies_every_kind_of_address() {
        use AddressClass::*;
        let cases = [
            ("93.184.215.14", None),
            ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", None),
            ("127.0.0.1", Some(Loopback)),
            ("127.255.0.9", Some(Loopback)),
            ("::1", Some(Loopback)),
            ("10.1.2.3", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(Private)),
            ("fd12:3456::1", Some(Private)),
            ("100.64.0.1", Some(SharedNat)),
            ("100.128.0.1", None),
            ("169.254.1.1", Some(LinkLocal)),
            ("fe80::1", Some(LinkLocal)),
            ("169.254.169.254", Some(Metadata)),
            ("fd00:ec2::254", Some(Metadata)),
            ("0.0.0.0", Some(Unspecified)),
            ("::", Some(Unspecified)),
            ("224.0.0.1", Some(Multicast)),
            ("ff02::1", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("192.0.2.10", Some(Documentation)),
            ("198.51.100.1", Some(Documentation)),
            ("203.0.113.7", Some(Documentation)),
            ("2001:db8::1", Some(Documentation)),
            ("240.0.0.1", Some(Reserved)),
            ("198.18.0.1", Some(Reserved)),
            // IPv4 written as IPv6 is judged as the IPv4 address it reaches.
            ("::ffff:10.0.0.1", Some(Private)),
            ("::ffff:169.254.169.254", Some(Metadata)),
            ("64:ff9b::7f00:1", Some(Loopback)),
            ("64:ff9b::5db8:d70e", None),
            // Issue #40: the other IPv6 forms that carry an IPv4 address, and anything that is
            // not global unicast.
            ("::a9fe:a9fe", Some(Metadata)),
            ("::7f00:1", Some(Loopback)),
            ("::5db8:d70e", Some(Reserved)),
            ("64:ff9b:1::a9fe:a9fe", Some(Reserved)),
            ("2002:a9fe:a9fe::1", Some(Reserved)),
            ("2002:5db8:d70e::1", Some(Reserved)),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some(Reserved)),
            ("4000::1", Some(Reserved)),
            ("2a00:1450:4001:81c::200e", None),
        ];
        for (address, expected) in cases {
            assert_eq!(class(address), expected, "{address}");
        }
    }

    #[test]
    fn the_flags_open_only_their_own_classes() {
        use AddressClass::*;
        let allowed = |class: AddressClass| {
            [STRICT, HTTP, PRIVATE, BOTH].map(|policy| class.allowed_by(&policy))
        };
        assert_eq!(allowed(Loopback), [false, true, true, true]);
        for class in [Private, SharedNat, LinkLocal] {
            assert_eq!(allowed(class), [false, false, true, true], "{class}");
        }
        for class in [
            Metadata,
            Unspecified,
            Multicast,
            Broadcast,
            Documentation,
            Reserved,
        ] {
            assert_eq!(allowed(class), [false; 4], "{class}");
        }
    }

    #[test]
    fn registers_https_to_a_public_host() {
        for url in [
            "https://shop.example/webhooks/payorch",
            "https://93.184.215.14:8443/hook?x=1",
            "https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hook",
        ] {
            assert!(check_registration(url, &STRICT).is_ok(), "{url}");
        }
        // A name is judged when it is resolved, at each send.
        assert!(check_registration("https://intranet.corp/hook", &STRICT).is_ok());
    }

    #[test]
    fn refuses_what_is_not_an_https_url() {
        assert_eq!(
            check_registration("shop.example/hook", &BOTH),
            Err(UrlRefused::NotAUrl)
        );
        assert_eq!(
            check_registration("https://user:pw@shop.example/hook", &BOTH),
            Err(UrlRefused::Credentials)
        );
        for url in ["ftp://shop.example/x", "file:///etc/passwd"] {
            assert!(
                matches!(
                    check_registration(url, &BOTH),
                    Err(UrlRefused::Scheme { .. }) | Err(UrlRefused::NoHost)
                ),
                "{url}"
            );
        }
        let http = check_registration("http://shop.example/hook", &BOTH);
        assert_eq!(
            http,
            Err(UrlRefused::Scheme {
                scheme: "http".into()
            })
        );
        assert!(http
            .unwrap_err()
            .to_string()
            .contains("--allow-http-webhooks"));
    }

    #[test]
    fn http_only_to_loopback_and_only_with_its_flag() {
        for url in [
            "http://127.0.0.1:8090/hook",
            "http://[::1]:8090/hook",
            "http://localhost:8090/hook",
            "http://receiver.localhost/hook",
        ] {
            assert!(check_registration(url, &HTTP).is_ok(), "{url}");
            assert!(check_registration(url, &BOTH).is_ok(), "{url}");
            assert!(
                matches!(
                    check_registration(url, &STRICT),
                    Err(UrlRefused::Scheme { .. })
                ),
                "{url}"
            );
            // Private addresses allowed is not http allowed.
            assert!(check_registration(url, &PRIVATE).is_err(), "{url}");
        }
        assert!(check_registration("http://10.0.0.5/hook", &BOTH).is_err());
    }

    #[test]
    fn refuses_an_address_the_policy_does_not_allow_and_says_what_to_do() {
        let refused = check_registration("https://10.0.0.5/hook", &STRICT).unwrap_err();
        assert_eq!(
            refused,
            UrlRefused::Address {
                address: "10.0.0.5".parse().unwrap(),
                class: AddressClass::Private
            }
        );
        let message = refused.to_string();
        assert!(message.contains("10.0.0.5"), "{message}");
        assert!(
            message.contains("--allow-private-webhook-addresses"),
            "{message}"
        );
        assert!(check_registration("https://10.0.0.5/hook", &PRIVATE).is_ok());
        assert!(check_registration("https://127.0.0.1/hook", &STRICT).is_err());
        assert!(check_registration("https://127.0.0.1/hook", &HTTP).is_ok());
        // Written in another form, the same address.
        assert!(check_registration("https://0x7f.1/hook", &STRICT).is_err());
        assert!(check_registration("https://[::ffff:a00:5]/hook", &STRICT).is_err());
        for url in [
            "https://169.254.169.254/latest/meta-data",
            "https://[fd00:ec2::254]/",
            "https://0.0.0.0/hook",
            "https://255.255.255.255/hook",
            "https://224.0.0.1/hook",
        ] {
            assert!(
                matches!(
                    check_registration(url, &BOTH),
                    Err(UrlRefused::Address { .. })
                ),
                "{url}"
            );
        }
    }
}
