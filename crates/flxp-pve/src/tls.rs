//! TLS trust for the Proxmox API: verified by default, a custom CA, pinned fingerprints, or
//! (only when asked for) insecure.
//!
//! Proxmox clusters usually run self-signed certificates, so pinning the SHA-256 fingerprint the
//! GUI shows is the common setup. A pin replaces chain and name checks entirely: the certificate
//! is trusted exactly when its fingerprint matches. Handshake signatures are always verified.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use subtle::{Choice, ConstantTimeEq};

use crate::error::{Error, Result};

/// A certificate's SHA-256 fingerprint, as the Proxmox GUI shows it (`AA:BB:...`, 32 pairs).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of_der(der: &[u8]) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let mut out = [0u8; 32];
        out.copy_from_slice(digest.as_ref());
        Self(out)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// Why a text is not a SHA-256 fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FingerprintError {
    /// Not 64 hex digits once the colons are dropped.
    #[error(
        "expected 32 hex pairs (a SHA-256 fingerprint like AA:BB:...), got {digits} hex digits"
    )]
    Length {
        /// How many digits there were.
        digits: usize,
    },
    /// A character that is not ASCII split a pair.
    #[error("not ASCII hex")]
    NotAscii,
    /// A pair that is not hex.
    #[error("{pair:?} is not a hex pair")]
    NotHex {
        /// The pair as given.
        pair: String,
    },
}

impl FromStr for Fingerprint {
    type Err = FingerprintError;

    /// Reads hex pairs, case-insensitive, with or without `:` between them.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let hex: String = s.trim().chars().filter(|c| *c != ':').collect();
        if hex.len() != 64 {
            return Err(FingerprintError::Length { digits: hex.len() });
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = hex
                .get(2 * i..2 * i + 2)
                .ok_or(FingerprintError::NotAscii)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| FingerprintError::NotHex {
                pair: pair.to_owned(),
            })?;
        }
        Ok(Self(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// How the client decides to trust a server certificate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TlsTrust {
    /// The usual chain and name checks against the built-in web roots.
    #[default]
    WebRoots,
    /// Chain and name checks against these CA certificates only (e.g. `pve-root-ca.pem`).
    CustomCa(Vec<CertificateDer<'static>>),
    /// Trust exactly the certificates with one of these fingerprints (one per cluster node).
    Pinned(Vec<Fingerprint>),
    /// Trust any certificate. Logged as a warning whenever a client is built with it.
    Insecure,
}

impl TlsTrust {
    /// Reads CA certificates from a PEM file; the error names the file.
    pub fn from_ca_file(path: &std::path::Path) -> Result<Self> {
        let fail = |message: String| Error::Config {
            key: "ca-file".into(),
            message: format!("{}: {message}", path.display()),
        };
        let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| fail(format!("not a PEM certificate file: {e}")))?;
        if certs.is_empty() {
            return Err(fail("holds no PEM certificate".into()));
        }
        Ok(Self::CustomCa(certs))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the rustls client configuration for a trust mode (HTTP/1.1 only, ring crypto).
pub fn client_config(trust: &TlsTrust) -> Result<rustls::ClientConfig> {
    let tls_err = |e: rustls::Error| Error::Config {
        key: "tls".into(),
        message: e.to_string(),
    };
    let provider = provider();
    let algorithms = provider.signature_verification_algorithms;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?;
    let mut config = match trust {
        TlsTrust::WebRoots => {
            let roots = RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        TlsTrust::CustomCa(certs) => {
            let mut roots = RootCertStore::empty();
            for cert in certs {
                roots.add(cert.clone()).map_err(|e| Error::Config {
                    key: "ca-file".into(),
                    message: format!("unusable CA certificate: {e}"),
                })?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        TlsTrust::Pinned(pins) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CustomVerifier {
                pins: Some(pins.clone()),
                algorithms,
            }))
            .with_no_client_auth(),
        TlsTrust::Insecure => {
            tracing::warn!(
                "TLS certificate verification is disabled (insecure = true): anyone on the path can read and change API traffic"
            );
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(CustomVerifier {
                    pins: None,
                    algorithms,
                }))
                .with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Trusts a certificate exactly when its SHA-256 fingerprint is pinned, or any certificate without
/// pins (`insecure`); handshake signatures are checked either way, so the peer holds the key.
#[derive(Debug)]
struct CustomVerifier {
    pins: Option<Vec<Fingerprint>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for CustomVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(pins) = &self.pins else {
            return Ok(ServerCertVerified::assertion());
        };
        let seen = Fingerprint::of_der(end_entity.as_ref());
        // Compare every pin without an early exit, so timing does not tell which byte differed.
        let matched = pins.iter().fold(Choice::from(0), |acc, pin| {
            acc | pin.as_bytes()[..].ct_eq(&seen.as_bytes()[..])
        });
        if bool::from(matched) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "server certificate fingerprint {seen} matches no pinned fingerprint"
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    const GUI: &str = "9A:1F:3C:00:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:FF";

    #[test]
    fn fingerprints_read_gui_format_any_case_with_or_without_colons() {
        let a: Fingerprint = GUI.parse().unwrap();
        let b: Fingerprint = GUI.to_lowercase().parse().unwrap();
        let c: Fingerprint = GUI.replace(':', "").parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.to_string(), GUI);
        assert_eq!(a.as_bytes()[0], 0x9A);
        assert_eq!(a.as_bytes()[31], 0xFF);
    }

    #[test]
    fn bad_fingerprints_say_why() {
        let e = "AA:BB".parse::<Fingerprint>().unwrap_err().to_string();
        assert!(e.contains("got 4 hex digits"), "{e}");
        let e = GUI
            .replace("9A", "ZZ")
            .parse::<Fingerprint>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"ZZ\" is not a hex pair"), "{e}");
    }

    #[test]
    fn fingerprint_of_der_is_sha256() {
        // SHA-256 of the empty input.
        assert_eq!(
            Fingerprint::of_der(b"").to_string().replace(':', ""),
            "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"
        );
    }

    #[test]
    fn ca_file_errors_name_the_file() {
        let e = TlsTrust::from_ca_file(std::path::Path::new("/nonexistent/ca.pem")).unwrap_err();
        assert!(
            e.to_string().contains("ca-file: /nonexistent/ca.pem"),
            "{e}"
        );
    }

    #[test]
    fn every_trust_mode_builds_a_config() {
        for trust in [
            TlsTrust::WebRoots,
            TlsTrust::Pinned(vec![GUI.parse().unwrap()]),
            TlsTrust::Insecure,
        ] {
            let c = client_config(&trust).unwrap();
            assert_eq!(c.alpn_protocols, vec![b"http/1.1".to_vec()]);
        }
    }
}
