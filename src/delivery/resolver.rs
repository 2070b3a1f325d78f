//! The delivery client's resolver (docs/DESIGN.md, "Delivering events"): a host name is
//! resolved at each send and every address it resolves to is judged by the URL policy
//! ([`check_address`]) before a connection is made, so a name registered while it pointed
//! at a public address cannot later be pointed at a private one (DNS rebinding). One refused
//! address refuses the name: the client might try any of them.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::events::safe_url::{check_address, AddressRefused, UrlPolicy};

#[derive(Debug, Clone)]
pub struct PolicyResolver {
    pub policy: UrlPolicy,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            allowed(&host, found, &policy)
                .map(|addrs| Box::new(addrs.into_iter()) as Addrs)
                .map_err(Into::into)
        })
    }
}

/// `addrs`, if every one of them is allowed; else the first refused, named by `host`.
pub fn allowed(
    host: &str,
    addrs: Vec<SocketAddr>,
    policy: &UrlPolicy,
) -> Result<Vec<SocketAddr>, AddressRefused> {
    for addr in &addrs {
        if let Err(class) = check_address(addr.ip(), policy) {
            return Err(AddressRefused {
                host: host.to_owned(),
                address: addr.ip(),
                class,
            });
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::safe_url::AddressClass;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter()
            .map(|a| SocketAddr::new(a.parse().expect("an address"), 0))
            .collect()
    }

    #[test]
    fn one_refused_address_refuses_the_name() {
        let strict = UrlPolicy::default();
        let public = addrs(&["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]);
        assert_eq!(allowed("shop.example", public.clone(), &strict), Ok(public));
        let refused = allowed(
            "shop.example",
            addrs(&["93.184.215.14", "10.0.0.7"]),
            &strict,
        )
        .unwrap_err();
        assert_eq!(refused.class, AddressClass::Private);
        assert_eq!(refused.address.to_string(), "10.0.0.7");
        let message = refused.to_string();
        assert!(
            message.contains("shop.example resolves to 10.0.0.7"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn resolves_localhost_only_when_loopback_is_allowed() {
        let name: Name = "localhost".parse().expect("a name");
        let refused = PolicyResolver {
            policy: UrlPolicy::default(),
        }
        .resolve(name)
        .await;
        let err = refused.err().expect("loopback is refused without a flag");
        assert!(err.to_string().contains("loopback"), "{err}");
        let name: Name = "localhost".parse().expect("a name");
        let resolved = PolicyResolver {
            policy: UrlPolicy {
                allow_http: true,
                allow_private: false,
            },
        }
        .resolve(name)
        .await
        .map(|addrs| addrs.collect::<Vec<_>>())
        .unwrap_or_else(|err| panic!("localhost resolves under --allow-http-webhooks: {err}"));
        assert!(
            resolved.iter().all(|a| a.ip().is_loopback()),
            "{resolved:?}"
        );
    }
}
