//! The simulator's TLS identity: a self-signed certificate generated at start (rcgen, ring), its
//! SHA-256 fingerprint in the Proxmox GUI format (`AA:BB:...`), and the rustls server config.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::{Error, Result};

/// A certificate and its private key.
pub struct TlsIdentity {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
    cert_pem: String,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("fingerprint", &self.fingerprint())
            .field("key", &"<redacted>")
            .finish()
    }
}

impl TlsIdentity {
    /// A new self-signed certificate valid for `localhost`, `127.0.0.1`, `::1` and `names`.
    pub fn generate(names: &[String]) -> Result<Self> {
        let mut sans = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        sans.extend(names.iter().filter(|n| !n.is_empty()).cloned());
        sans.dedup();
        let certified =
            rcgen::generate_simple_self_signed(sans).map_err(|e| Error::Tls(e.to_string()))?;
        Ok(TlsIdentity {
            cert: certified.cert.der().clone(),
            key: certified.signing_key.serialize_der(),
            cert_pem: certified.cert.pem(),
        })
    }

    /// SHA-256 fingerprint of the certificate, `AA:BB:...` as the Proxmox GUI shows it.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(self.cert.as_ref())
    }

    /// The certificate in PEM form (to trust it as a CA file).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A rustls server config (ring provider, HTTP/1.1 only, as pveproxy speaks).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], key)
            .map_err(|e| Error::Tls(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// `AA:BB:...` SHA-256 fingerprint of DER bytes.
pub fn fingerprint_of(der: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    #[test]
    fn identity_has_a_gui_style_fingerprint_and_a_server_config() {
        let id = TlsIdentity::generate(&["pve.example".into()]).unwrap();
        let fp = id.fingerprint();
        assert_eq!(fp.len(), 32 * 3 - 1);
        assert!(fp.split(':').all(|p| {
            p.len() == 2
                && p.chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
        }));
        assert!(id.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(id.server_config().is_ok());
        assert!(!format!("{id:?}").contains("BEGIN"));
    }
}
