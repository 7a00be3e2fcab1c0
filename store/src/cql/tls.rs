//! TLS to the nodes: the rustls client configuration built from
//! [`TlsSettings`], shared by the driver's connections and by the contact
//! point probe (`connect.rs`), and the words for each way a handshake fails.
//!
//! # Why rustls with *ring*
//!
//! The `scylla` driver offers OpenSSL 0.10 or rustls 0.23. OpenSSL needs
//! the system's libssl headers to build (or a vendored OpenSSL build, slow
//! and large); rustls is Rust, and with the *ring* provider builds with a C
//! compiler alone. The driver's own rustls dependency keeps rustls' default
//! provider (aws-lc-rs) in the tree — cargo features only add — but every
//! configuration here names *ring* explicitly, so which provider rustls
//! would pick by default never matters.
//!
//! # What is verified
//!
//! - The node's certificate chain, against the CAs of `tls.ca_file` only.
//! - The node's address: the driver connects by IP address
//!   (`ServerName::IpAddress`, for contact points and discovered nodes
//!   alike), so the certificate must list that IP in `subjectAltName`. The
//!   probe uses the same name, so it fails exactly when the driver would.
//!   `tls.verify_hostname = false` keeps the chain check and skips only the
//!   name check ([`SkipNameCheck`]) — unsafe, see the setting's docs.
//! - With `tls.cert_file`/`key_file`, the client presents its certificate.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::settings::{InvalidSetting, TlsSettings, show_path};

/// The rustls configuration for `settings`, or `None` when TLS is off.
///
/// # Errors
/// A file that does not hold what its key says (no certificate in
/// `ca_file`, no private key in `key_file`, a key that does not match the
/// certificate), naming the key and the file.
pub(crate) fn client_config(
    settings: &TlsSettings,
) -> Result<Option<Arc<ClientConfig>>, InvalidSetting> {
    let Some(ca_file) = &settings.ca_file else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    let cas = certificates("store.cql.tls.ca_file", ca_file)?;
    for (i, ca) in cas.into_iter().enumerate() {
        roots.add(ca).map_err(|e| {
            InvalidSetting::new(
                "store.cql.tls.ca_file",
                format!(
                    "store.cql.tls.ca_file ({}): certificate #{} is not a usable CA: {e}",
                    show_path(ca_file),
                    i + 1
                ),
            )
        })?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| {
            InvalidSetting::new(
                "store.cql.tls.ca_file",
                format!("store.cql.tls.ca_file ({}): {e}", show_path(ca_file)),
            )
        })?;
    let verifier: Arc<dyn ServerCertVerifier> = if settings.verify_hostname {
        verifier
    } else {
        Arc::new(SkipNameCheck(verifier))
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| InvalidSetting::new("store.cql.tls", format!("store.cql.tls: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&settings.cert_file, &settings.key_file) {
        (Some(cert_file), Some(key_file)) => {
            let chain = certificates("store.cql.tls.cert_file", cert_file)?;
            let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
                InvalidSetting::new(
                    "store.cql.tls.key_file",
                    format!(
                        "store.cql.tls.key_file ({}) holds no usable private key: {}",
                        show_path(key_file),
                        pem_error(&e)
                    ),
                )
            })?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                InvalidSetting::new(
                    "store.cql.tls.key_file",
                    format!(
                        "store.cql.tls.key_file ({}) does not fit store.cql.tls.cert_file ({}): {e}",
                        show_path(key_file),
                        show_path(cert_file)
                    ),
                )
            })?
        }
        // Validation refuses one without the other; without both, none.
        _ => builder.with_no_client_auth(),
    };
    Ok(Some(Arc::new(config)))
}

/// Every certificate in the PEM file `path` (at least one).
fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, InvalidSetting> {
    let bad = |why: String| InvalidSetting::new(key, format!("{key} ({}) {why}", show_path(path)));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(format!("cannot be read: {}", pem_error(&e))))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("is not valid PEM: {}", pem_error(&e))))?;
    if certs.is_empty() {
        return Err(bad(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(certs)
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::NoItemsFound => "nothing of the kind in it".to_string(),
        other => format!("{other:?}"),
    }
}

/// The chain check of [`WebPkiServerVerifier`] without its name check:
/// what `tls.verify_hostname = false` asks for.
struct SkipNameCheck(Arc<WebPkiServerVerifier>);

impl fmt::Debug for SkipNameCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SkipNameCheck")
    }
}

impl ServerCertVerifier for SkipNameCheck {
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
            // webpki checks the chain before the name: a name error means
            // the chain was good.
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

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

// ===== what a failed handshake means =====

/// The operator's words for a TLS handshake that failed with `err` (as
/// tokio-rustls reports it), with the setting to look at.
pub(crate) fn describe_handshake_error(err: &std::io::Error, settings: &TlsSettings) -> String {
    let ca = settings
        .ca_file
        .as_deref()
        .map_or_else(|| "?".to_string(), show_path);
    let Some(tls) = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return match err.kind() {
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe => format!(
                "TLS handshake failed: the node closed the connection during the handshake \
                 ({err}); it may require a client certificate (store.cql.tls.cert_file and \
                 key_file) or not speak TLS on this port"
            ),
            _ => format!("TLS handshake failed: {err}"),
        };
    };
    match tls {
        rustls::Error::InvalidCertificate(cert) => {
            let why = match cert {
                CertificateError::UnknownIssuer => format!(
                    "the node's certificate is not signed by a CA in store.cql.tls.ca_file ({ca})"
                ),
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => {
                    "the node's certificate is not valid for the address connected to (its \
                     subjectAltName must list the node's IP address; \
                     store.cql.tls.verify_hostname = false skips this check — unsafe)"
                        .to_string()
                }
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    "the node's certificate has expired".to_string()
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    "the node's certificate is not valid yet (check this machine's clock)"
                        .to_string()
                }
                other => format!("{other:?}"),
            };
            format!("TLS handshake failed: certificate verification failed: {why}")
        }
        rustls::Error::AlertReceived(alert) => {
            use rustls::AlertDescription as A;
            let hint = match alert {
                A::BadCertificate
                | A::CertificateRequired
                | A::UnknownCA
                | A::CertificateUnknown
                | A::HandshakeFailure => {
                    if settings.client_cert() {
                        "; the node did not accept this client's certificate \
                         (store.cql.tls.cert_file): is it signed by a CA the node trusts?"
                    } else {
                        "; the node may require a client certificate \
                         (store.cql.tls.cert_file and store.cql.tls.key_file)"
                    }
                }
                _ => "",
            };
            format!("TLS handshake failed: the node refused it (alert {alert:?}){hint}")
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "TLS handshake failed: the node did not answer in TLS ({tls}); is TLS enabled on \
             this port (client_encryption_options)?"
        ),
        other => format!("TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_is_off_without_a_ca() {
        assert!(client_config(&TlsSettings::default()).unwrap().is_none());
    }

    #[test]
    fn a_file_without_certificates_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, "not a certificate\n").unwrap();
        let err = client_config(&TlsSettings {
            ca_file: Some(ca),
            ..TlsSettings::default()
        })
        .unwrap_err();
        assert_eq!(err.key, "store.cql.tls.ca_file");
        assert!(err.message.contains("holds no PEM certificate"), "{err}");
    }

    #[test]
    fn handshake_errors_say_which_check_failed() {
        let settings = TlsSettings {
            ca_file: Some("/etc/ca.crt".into()),
            ..TlsSettings::default()
        };
        let io = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let unknown = describe_handshake_error(
            &io(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            )),
            &settings,
        );
        assert!(
            unknown.contains("certificate verification failed")
                && unknown
                    .contains("not signed by a CA in store.cql.tls.ca_file (\"/etc/ca.crt\")"),
            "{unknown}"
        );
        let alert = describe_handshake_error(
            &io(rustls::Error::AlertReceived(
                rustls::AlertDescription::BadCertificate,
            )),
            &settings,
        );
        assert!(
            alert.contains("may require a client certificate"),
            "{alert}"
        );
        let eof = describe_handshake_error(
            &std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "eof"),
            &settings,
        );
        assert!(eof.starts_with("TLS handshake failed"), "{eof}");
    }
}
