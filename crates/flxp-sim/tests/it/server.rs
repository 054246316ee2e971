//! The simulator on a real socket: HTTPS with the generated certificate (fingerprint, trust by
//! PEM), plain HTTP, the reason phrase on the wire, graceful shutdown.

use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{TOKEN, cluster};

fn sim() -> Sim {
    let mut s = Scenario::from_value(cluster()).unwrap();
    s.add_token(TOKEN).unwrap();
    Sim::new(s).unwrap()
}

#[tokio::test]
async fn https_with_the_generated_certificate() {
    let id = TlsIdentity::generate(&[]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = SimHandle::spawn(listener, sim(), Some(&id)).unwrap();
    assert!(handle.base_url().starts_with("https://127.0.0.1:"));
    assert_eq!(handle.fingerprint(), Some(id.fingerprint().as_str()));

    let trusted = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(id.cert_pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    let r = trusted
        .get(format!("{}/nodes", handle.base_url()))
        .header("Authorization", format!("PVEAPIToken={TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["data"][0]["ssl_fingerprint"], id.fingerprint());

    let untrusted = reqwest::Client::new();
    assert!(
        untrusted
            .get(format!("{}/version", handle.base_url()))
            .send()
            .await
            .is_err()
    );
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn plain_http_carries_proxmox_reason_phrases() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = SimHandle::spawn(listener, sim(), None).unwrap();
    let mut stream = tokio::net::TcpStream::connect(handle.addr()).await.unwrap();
    let req = format!(
        "GET /api2/json/nodes/pve2/qemu/100/config HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken={TOKEN}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    assert!(
        text.starts_with(
            "HTTP/1.1 500 Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist\r\n"
        ),
        "{text}"
    );
    let mut stream = tokio::net::TcpStream::connect(handle.addr()).await.unwrap();
    stream
        .write_all(b"GET /api2/json/version HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken=root@pam!test=wrong\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    assert!(
        text.starts_with("HTTP/1.1 401 Authentication failed!\r\n"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\n"), "empty body: {text:?}");
    let addr = handle.addr();
    handle.shutdown().await.unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener is closed after shutdown"
    );
}
