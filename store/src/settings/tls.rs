//! The `[store.cql.tls]` section, and the rules its keys follow.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{CqlSettings, InvalidSetting, show_path, unreadable_file};

/// The `[store.cql.tls]` section: TLS between lockshift and the nodes'
/// CQL port (Cassandra's `client_encryption_options`).
///
/// TLS is on when [`ca_file`](Self::ca_file) is given: lockshift trusts
/// exactly the CA named there (not the system's store — a cluster's
/// certificates are nearly always signed by a private CA, and trusting
/// every public CA as well would only widen who can impersonate a node).
/// The connection uses rustls (TLS 1.2 and 1.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// PEM file of the CA certificate(s) that signed the nodes'
    /// certificates. Turns TLS on.
    /// Default: none (no TLS).
    pub ca_file: Option<PathBuf>,
    /// PEM file of this client's certificate (chain), for nodes that
    /// require one (`require_client_auth: true`); with `key_file`.
    /// Default: none.
    pub cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key (PKCS#8, PKCS#1 or
    /// SEC1, unencrypted); with `cert_file`.
    /// Default: none.
    pub key_file: Option<PathBuf>,
    /// Check that each node's certificate is valid for the address
    /// lockshift connects to.
    ///
    /// The driver connects to nodes by IP address — the ones it discovers
    /// as well as the contact points — so a node's certificate must list
    /// its IP address in `subjectAltName`. `false` is **UNSAFE**: the
    /// certificate must still be signed by the CA, but any certificate that
    /// CA ever signed — another node's, a client's — then passes for any
    /// node, so whoever holds one can stand in for the cluster. Use it only
    /// for certificates that cannot carry IP addresses, and only while you
    /// control every certificate the CA signs.
    /// Default: `true`.
    pub verify_hostname: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            ca_file: None,
            cert_file: None,
            key_file: None,
            verify_hostname: true,
        }
    }
}

impl TlsSettings {
    /// Whether TLS is on (a CA file is given).
    pub fn enabled(&self) -> bool {
        self.ca_file.is_some()
    }

    /// Whether a client certificate is presented.
    pub fn client_cert(&self) -> bool {
        self.cert_file.is_some()
    }
}

impl CqlSettings {
    pub(super) fn tls_problems(&self) -> Vec<InvalidSetting> {
        let tls = &self.tls;
        let mut out = Vec::new();
        for (key, path) in [
            ("store.cql.tls.ca_file", &tls.ca_file),
            ("store.cql.tls.cert_file", &tls.cert_file),
            ("store.cql.tls.key_file", &tls.key_file),
        ] {
            if let Some(path) = path
                && let Some(why) = unreadable_file(path)
            {
                out.push(InvalidSetting::new(
                    key,
                    format!("{key} ({}) {why}", show_path(path)),
                ));
            }
        }
        match (&tls.cert_file, &tls.key_file) {
            (Some(_), None) => out.push(InvalidSetting::new(
                "store.cql.tls.key_file",
                "store.cql.tls.cert_file is set, but store.cql.tls.key_file (its private key) is not",
            )),
            (None, Some(_)) => out.push(InvalidSetting::new(
                "store.cql.tls.cert_file",
                "store.cql.tls.key_file is set, but store.cql.tls.cert_file (the certificate) is not",
            )),
            _ => {}
        }
        if tls.ca_file.is_none() && (tls.cert_file.is_some() || tls.key_file.is_some()) {
            out.push(InvalidSetting::new(
                "store.cql.tls.ca_file",
                "store.cql.tls.cert_file/key_file are set, but store.cql.tls.ca_file is not: \
                 TLS needs the CA that signed the nodes' certificates",
            ));
        }
        out
    }
}
