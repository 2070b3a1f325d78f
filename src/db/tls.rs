//! TLS to PostgreSQL with rustls, as libpq's `sslmode` asks for it
//! (docs/operations/configuration.md, "Configuration reference"; docs/PRODUCTION.md, section 2).
//!
//! tokio-postgres negotiates TLS itself but knows only `disable`, `prefer` and `require`, and
//! verifies nothing: what a certificate must prove is decided here. `require` encrypts and
//! verifies nothing (libpq's meaning) unless a CA file is given, when it is `verify-ca`;
//! `verify-ca` checks the chain up to that CA; `verify-full` checks the host name too.

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// libpq's `sslmode`, all five values that mean something to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` tries without TLS first: a downgrade anyone on the path chooses.
            other => {
                return Err(format!(
                    "sslmode `{other}` is not one payorch knows: use disable, prefer, require, \
                     verify-ca or verify-full"
                ))
            }
        })
    }

    /// What tokio-postgres is told: whether to ask the server for TLS, and whether to give up
    /// when it says no. The verify modes are `require` to it; the verifier does the rest.
    pub fn negotiation(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Wire;
        match self {
            SslMode::Disable => Wire::Disable,
            SslMode::Prefer => Wire::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Wire::Require,
        }
    }
}

/// The TLS side of every connection to one `DATABASE_URL`: cheap to clone, handed to
/// tokio-postgres as its `MakeTlsConnect`.
#[derive(Clone)]
pub struct RustlsConnect {
    mode: SslMode,
    config: Arc<ClientConfig>,
}

impl fmt::Debug for RustlsConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RustlsConnect")
            .field("mode", &self.mode)
            .finish()
    }
}

impl RustlsConnect {
    /// The connector for `mode`, trusting the certificates of the PEM file `root_cert` (libpq's
    /// `sslrootcert`). A verify mode without a CA file, or a file without a certificate, is
    /// refused here, at start-up, rather than at the first connection.
    pub fn new(mode: SslMode, root_cert: Option<&Path>) -> Result<RustlsConnect, String> {
        let roots = root_cert.map(read_roots).transpose()?;
        // libpq verifies the chain under `require` too when it has a CA file.
        let mode = match (mode, &roots) {
            (SslMode::Require, Some(_)) => SslMode::VerifyCa,
            (mode, _) => mode,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match (mode, roots) {
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(format!(
                    "sslmode={} needs sslrootcert=<file>: the PEM file of the CA that signed \
                     the server's certificate",
                    if mode == SslMode::VerifyCa {
                        "verify-ca"
                    } else {
                        "verify-full"
                    }
                ))
            }
            (SslMode::VerifyCa | SslMode::VerifyFull, Some(roots)) => {
                let webpki = WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    Arc::clone(&provider),
                )
                .build()
                .map_err(|err| format!("sslrootcert: {err}"))?;
                if mode == SslMode::VerifyFull {
                    webpki
                } else {
                    Arc::new(AnyHostName(webpki))
                }
            }
            _ => Arc::new(EncryptOnly(Arc::clone(&provider))),
        };
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| format!("TLS: {err}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(RustlsConnect {
            mode,
            config: Arc::new(config),
        })
    }

    /// What the URL asked for, with `require` become `verify-ca` when it named a CA file.
    pub fn mode(&self) -> SslMode {
        self.mode
    }
}

fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let shown = path.display();
    let mut roots = RootCertStore::empty();
    let certs =
        CertificateDer::pem_file_iter(path).map_err(|err| format!("sslrootcert {shown}: {err}"))?;
    for cert in certs {
        let cert = cert.map_err(|err| format!("sslrootcert {shown}: {err}"))?;
        roots
            .add(cert)
            .map_err(|err| format!("sslrootcert {shown}: {err}"))?;
    }
    if roots.is_empty() {
        return Err(format!(
            "sslrootcert {shown} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(roots)
}

/// `require` without a CA: the certificate is not checked, only that the server holds the
/// key it presents (the handshake's signatures), as libpq does. Encrypted, not authenticated.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to the CA, whatever host name the certificate names.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type TlsConnect = RustlsHandshake;
    type Error = std::convert::Infallible;

    /// `host` is the URL's host name (tokio-postgres gives `hostaddr` no name, and a Unix
    /// socket the empty one): an IP address or a DNS name, which `verify-full` finds among the
    /// certificate's names. Asked for every connection, TLS or not, so a name that cannot be
    /// checked is refused only if a handshake is actually made.
    fn make_tls_connect(&mut self, host: &str) -> Result<RustlsHandshake, Self::Error> {
        let name = match ServerName::try_from(host.to_string()) {
            Ok(name) => Ok(name),
            // Only `verify-full` looks at the name; the others need one for the handshake.
            Err(_) if self.mode != SslMode::VerifyFull => {
                Ok(ServerName::try_from("localhost").expect("a valid name"))
            }
            Err(err) => Err(format!(
                "sslmode=verify-full: the host `{host}` is no name a certificate can be checked \
                 against: {err}"
            )),
        };
        Ok(RustlsHandshake {
            config: Arc::clone(&self.config),
            name,
        })
    }
}

/// One connection's handshake, to the server named when the connection was made.
pub struct RustlsHandshake {
    config: Arc<ClientConfig>,
    name: Result<ServerName<'static>, String>,
}

impl<S> TlsConnect<S> for RustlsHandshake
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<TlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            let name = self.name.map_err(std::io::Error::other)?;
            let stream = connector.connect(name, stream).await?;
            Ok(TlsStream(Box::new(stream)))
        })
    }
}

/// An encrypted connection to PostgreSQL.
pub struct TlsStream<S>(Box<tokio_rustls::client::TlsStream<S>>);

impl<S> tokio_postgres::tls::TlsStream for TlsStream<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    /// None: SCRAM's channel binding would hash the server's certificate with the hash of its
    /// signature algorithm, which means parsing it; the verifier above is what authenticates
    /// the server, and the password is never sent in clear over SCRAM either way.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_libpq_sslmode_is_known_and_allow_is_refused_with_the_choices() {
        for (text, mode) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            assert_eq!(SslMode::parse(text), Ok(mode));
        }
        let allow = SslMode::parse("allow").unwrap_err();
        assert!(allow.contains("verify-full"), "{allow}");
        assert!(
            SslMode::parse("REQUIRE").is_err(),
            "libpq's values are lower case"
        );
    }

    #[test]
    fn a_verify_mode_without_a_ca_file_is_refused_at_start() {
        for mode in [SslMode::VerifyCa, SslMode::VerifyFull] {
            let err = RustlsConnect::new(mode, None).unwrap_err();
            assert!(err.contains("needs sslrootcert"), "{err}");
        }
        assert_eq!(
            RustlsConnect::new(SslMode::Require, None).unwrap().mode(),
            SslMode::Require
        );
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_refused_by_its_path() {
        let missing = Path::new("no-such-folder/root.crt");
        let err = RustlsConnect::new(SslMode::VerifyFull, Some(missing)).unwrap_err();
        assert!(err.contains("no-such-folder/root.crt"), "{err}");
        let empty = std::env::temp_dir().join(format!("payorch-empty-{}.crt", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = RustlsConnect::new(SslMode::VerifyCa, Some(&empty)).unwrap_err();
        std::fs::remove_file(&empty).unwrap();
        assert!(err.contains("holds no PEM certificate"), "{err}");
    }
}
