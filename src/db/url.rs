//! A `DATABASE_URL` understood: what tokio-postgres parses, and the TLS that libpq's
//! `sslmode` and `sslrootcert` ask for, which it does not parse (src/db/tls.rs). Every
//! connection payorch opens goes through [`DatabaseUrl::connect`] or
//! [`DatabaseUrl::connect_client`], so none can skip the TLS the URL asks for.

use std::path::PathBuf;
use std::str::FromStr;

use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, Connection, Socket};

use super::tls::{RustlsConnect, SslMode, TlsStream};

/// The parameters taken out of the URL before tokio-postgres sees it.
const SSLMODE: &str = "sslmode";
const SSLROOTCERT: &str = "sslrootcert";

#[derive(Debug, Clone)]
pub struct DatabaseUrl {
    config: Config,
    tls: RustlsConnect,
}

impl DatabaseUrl {
    /// Parses a libpq URL (`postgres://…?sslmode=verify-full&sslrootcert=/etc/ca.pem`) or
    /// key/value string (`host=db sslmode=require`). An unknown `sslmode`, a verify mode
    /// without `sslrootcert` or a CA file that cannot be read is an error now, at start-up.
    pub fn parse(url: &str) -> Result<DatabaseUrl, String> {
        let (rest, ssl) = take_parameters(url, &[SSLMODE, SSLROOTCERT])?;
        let mut config = Config::from_str(&rest).map_err(|err| format!("DATABASE_URL: {err}"))?;
        let mut mode = SslMode::Prefer;
        let mut root_cert = None;
        for (key, value) in ssl {
            match key {
                SSLMODE => mode = SslMode::parse(&value)?,
                _ => root_cert = Some(PathBuf::from(value)),
            }
        }
        let tls = RustlsConnect::new(mode, root_cert.as_deref())?;
        config.ssl_mode(tls.mode().negotiation());
        Ok(DatabaseUrl { config, tls })
    }

    /// Everything but the TLS, for a caller that connects host by host (src/db/primary.rs).
    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn ssl_mode(&self) -> SslMode {
        self.tls.mode()
    }

    /// A tokio-postgres session with `config`, under the URL's TLS. Over a Unix socket there
    /// is no TLS (PostgreSQL offers none there), and libpq does not ask for it: neither do we.
    pub async fn connect_client(
        &self,
        config: &Config,
    ) -> Result<(Client, Connection<Socket, TlsStream<Socket>>), tokio_postgres::Error> {
        let sockets_only = !config.get_hosts().is_empty()
            && config.get_hostaddrs().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|h| matches!(h, Host::Unix(_)));
        if sockets_only && self.tls.mode() != SslMode::Disable {
            let mut local = config.clone();
            local.ssl_mode(tokio_postgres::config::SslMode::Disable);
            return local.connect(self.tls.clone()).await;
        }
        config.connect(self.tls.clone()).await
    }
}

/// A URL without some of its parameters, and those parameters' values.
type Split = (String, Vec<(&'static str, String)>);

/// `url` without the parameters `keys`, and their values, from either form libpq accepts.
fn take_parameters(url: &str, keys: &[&'static str]) -> Result<Split, String> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if is_url {
        take_from_query(url, keys)
    } else {
        take_from_key_values(url, keys)
    }
}

fn take_from_query(url: &str, keys: &[&'static str]) -> Result<Split, String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), Vec::new()));
    };
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(key)?;
        match keys.iter().find(|k| **k == key) {
            Some(key) => taken.push((*key, percent_decode(value)?)),
            None => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, taken))
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("DATABASE_URL: a bad %-escape in `{text}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("DATABASE_URL: `{text}` is not UTF-8"))
}

/// libpq's `key = value` list: values may be quoted ('…', with `\'` and `\\` inside).
fn take_from_key_values(text: &str, keys: &[&'static str]) -> Result<Split, String> {
    let mut rest = String::new();
    let mut taken = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(format!("DATABASE_URL: `{key}` has no `=value`"));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, c)) => value.push(c),
                        None => return Err("DATABASE_URL: a quote is not closed".into()),
                    },
                    Some((_, c)) => value.push(c),
                    None => return Err("DATABASE_URL: a quote is not closed".into()),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(text.len(), |(i, _)| *i);
        match keys.iter().find(|k| **k == key) {
            Some(key) => taken.push((*key, value)),
            None => {
                rest.push_str(text[start..end].trim_end());
                rest.push(' ');
            }
        }
    }
    Ok((rest.trim_end().to_string(), taken))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssl_parameters_are_taken_out_of_both_forms_and_the_rest_kept() {
        let (rest, taken) = take_parameters(
            "postgres://app:p%40ss@db1:5432,db2/payorch?sslmode=verify-full&connect_timeout=2&sslrootcert=%2Fetc%2Fca.pem",
            &[SSLMODE, SSLROOTCERT],
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://app:p%40ss@db1:5432,db2/payorch?connect_timeout=2"
        );
        assert_eq!(
            taken,
            [
                (SSLMODE, "verify-full".into()),
                (SSLROOTCERT, "/etc/ca.pem".into())
            ]
        );
        let (rest, taken) = take_parameters(
            "host=db user=app sslmode = 'verify-ca' sslrootcert='/etc/my ca.pem' dbname=payorch",
            &[SSLMODE, SSLROOTCERT],
        )
        .unwrap();
        assert_eq!(rest, "host=db user=app dbname=payorch");
        assert_eq!(
            taken,
            [
                (SSLMODE, "verify-ca".into()),
                (SSLROOTCERT, "/etc/my ca.pem".into())
            ]
        );
        let (rest, taken) =
            take_parameters("postgres://app@db/payorch?sslmode=require", &[SSLMODE]).unwrap();
        assert_eq!(rest, "postgres://app@db/payorch");
        assert_eq!(taken, [(SSLMODE, "require".into())]);
    }

    #[test]
    fn tokio_postgres_is_told_require_for_every_mode_that_must_have_tls() {
        let url = DatabaseUrl::parse("postgres://app@db/payorch?sslmode=require").unwrap();
        assert_eq!(url.ssl_mode(), SslMode::Require);
        assert_eq!(
            url.config().get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        let default = DatabaseUrl::parse("host=db user=app").unwrap();
        assert_eq!(default.ssl_mode(), SslMode::Prefer, "libpq's default");
        let off = DatabaseUrl::parse("host=db user=app sslmode=disable").unwrap();
        assert_eq!(
            off.config().get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable
        );
    }

    #[test]
    fn a_bad_sslmode_or_a_verify_mode_without_a_ca_is_a_start_up_error() {
        let bad = DatabaseUrl::parse("postgres://app@db/payorch?sslmode=requre").unwrap_err();
        assert!(
            bad.contains("`requre`") && bad.contains("verify-full"),
            "{bad}"
        );
        let no_ca = DatabaseUrl::parse("host=db sslmode=verify-full").unwrap_err();
        assert!(no_ca.contains("needs sslrootcert"), "{no_ca}");
        let unreadable =
            DatabaseUrl::parse("host=db sslmode=verify-full sslrootcert=/nonexistent/ca.pem")
                .unwrap_err();
        assert!(unreadable.contains("/nonexistent/ca.pem"), "{unreadable}");
    }
}
