//! Client tests against in-process HTTP(S) servers on `127.0.0.1:0`.
// Tests may panic: a failed unwrap is the failure report.
#![allow(clippy::unwrap_used)]

mod auth;
mod endpoints;
mod errors;
mod failover;
mod server;
mod sim;
mod tls;

use std::time::Duration;

use flxp_pve::types::{ConfigUpdate, GuestKind};
use flxp_pve::{ApiErrorKind, Client, ClientBuilder, Credentials, Host, Secret, TlsTrust};

/// The token every test client uses.
pub const TOKEN_ID: &str = "root@pam!flxp";
/// Its secret.
pub const TOKEN_SECRET: &str = "0f3b6c1e-1111-2222-3333-444455556666";

/// A token client for these hosts with short timeouts and fast retries.
pub fn builder(hosts: &[String], trust: TlsTrust) -> ClientBuilder {
    let hosts: Vec<Host> = hosts.iter().map(|h| h.parse().unwrap()).collect();
    ClientBuilder::new(
        hosts,
        Credentials::Token {
            id: TOKEN_ID.into(),
            secret: Secret::new(TOKEN_SECRET),
        },
    )
    .trust(trust)
    .connect_timeout(Duration::from_secs(2))
    .timeout(Duration::from_secs(5))
    .backoff(Duration::from_millis(10))
}

/// A plain-HTTP token client.
pub fn client(hosts: &[String]) -> Client {
    builder(hosts, TlsTrust::WebRoots).build().unwrap()
}

/// Sets the tags of qemu guest `vmid` on `node`: the plain config write the tests send.
pub async fn set_qemu_tags(c: &Client, node: &str, vmid: u32, tags: &str) -> flxp_pve::Result<()> {
    let update = ConfigUpdate::new().with("tags", tags);
    c.update_guest_config(node, GuestKind::Qemu, vmid, &update)
        .await
}

/// The kind of error a guest locked by `lock` answers with.
pub fn locked(lock: &str) -> ApiErrorKind {
    ApiErrorKind::Locked { lock: lock.into() }
}

#[tokio::test]
async fn the_client_works_behind_a_type_erased_pve() {
    use flxp_pve::Pve;

    let s = server::start(None, |_, _| {
        server::Reply::data(
            serde_json::json!({"version": "9.2.11", "release": "9.2", "repoid": "ab12cd34"}),
        )
    })
    .await;
    let api: Pve = client(&[s.host()]).into();
    let shared = api.clone();
    let answer = tokio::spawn(async move { shared.version().await })
        .await
        .unwrap();
    assert_eq!(answer.unwrap().release.as_deref(), Some("9.2"));
}
