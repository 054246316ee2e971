//! TLS trust: pinned fingerprints, a custom CA, the web roots and insecure mode.

use serde_json::json;

use flxp_pve::{Client, Error, Fingerprint, TlsTrust};

use crate::server::{Certs, Reply, Server, start};

fn version() -> Reply {
    Reply::data(json!({"version": "9.2.11", "release": "9.2", "repoid": "3a6b1f0c"}))
}

/// A server with a fresh self-signed certificate that answers every call with the version.
async fn self_signed_server() -> Server {
    start(Some(Certs::self_signed()), |_, _| version()).await
}

/// A client of `s` that trusts `trust`.
fn client_of(s: &Server, trust: TlsTrust) -> Client {
    crate::builder(&[s.host()], trust).build().unwrap()
}

#[tokio::test]
async fn a_self_signed_certificate_with_the_pinned_fingerprint_is_accepted() {
    let s = self_signed_server().await;
    let pin = s.fingerprint.unwrap();
    // The GUI format, lower-cased and without colons: all the same pin.
    let text = pin.to_string().to_lowercase().replace(':', "");
    let trust = TlsTrust::Pinned(vec![text.parse().unwrap()]);
    let c = client_of(&s, trust);
    assert_eq!(c.version().await.unwrap().release.as_deref(), Some("9.2"));
}

#[tokio::test]
async fn any_other_fingerprint_is_rejected_before_a_request_is_sent() {
    let s = self_signed_server().await;
    let wrong = Fingerprint::of_der(b"another certificate");
    let c = client_of(&s, TlsTrust::Pinned(vec![wrong]));
    let e = c.version().await.unwrap_err();
    let Error::Tls { host, message } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(host, &s.host());
    assert!(
        message.contains("matches no pinned fingerprint"),
        "{message}"
    );
    assert!(
        message.contains(&s.fingerprint.unwrap().to_string()),
        "{message}"
    );
    assert_eq!(s.count(), 0);
}

#[tokio::test]
async fn without_a_pin_a_self_signed_certificate_is_rejected() {
    let s = self_signed_server().await;
    let c = client_of(&s, TlsTrust::WebRoots);
    let e = c.version().await.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }), "{e:?}");
    assert_eq!(s.count(), 0);
}

#[tokio::test]
async fn insecure_mode_accepts_any_certificate() {
    let s = self_signed_server().await;
    let c = client_of(&s, TlsTrust::Insecure);
    assert!(c.version().await.is_ok());
}

#[tokio::test]
async fn a_custom_ca_file_verifies_the_chain_and_the_name() {
    let certs = Certs::with_ca();
    let dir = std::env::temp_dir().join(format!("flxp-pve-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("pve-root-ca.pem");
    std::fs::write(&ca_file, &certs.ca_pem).unwrap();
    let s = start(Some(certs), |_, _| version()).await;
    let trust = TlsTrust::from_ca_file(&ca_file).unwrap();
    let c = client_of(&s, trust);
    assert!(c.version().await.is_ok());

    // Another CA does not vouch for this server.
    std::fs::write(&ca_file, Certs::with_ca().ca_pem).unwrap();
    let trust = TlsTrust::from_ca_file(&ca_file).unwrap();
    let c = client_of(&s, trust);
    assert!(matches!(c.version().await, Err(Error::Tls { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn with_several_pins_each_node_certificate_is_accepted() {
    let a = self_signed_server().await;
    let b = self_signed_server().await;
    let pins = vec![a.fingerprint.unwrap(), b.fingerprint.unwrap()];
    for host in [a.host(), b.host()] {
        let c = crate::builder(&[host], TlsTrust::Pinned(pins.clone()))
            .build()
            .unwrap();
        assert!(c.version().await.is_ok());
    }
}
