//! Clients of the in-process simulator, shared by the integration tests and the unit tests (the
//! crate includes this file by path under `cfg(test)`): one place builds a token client.

use std::time::Duration;

use flxp_core::Snapshot;
use flxp_pve::{Client, ClientBuilder, Credentials, Fingerprint, Host, Secret, TlsTrust};
use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};

/// The API token the TLS simulator of [`serve_tls`] accepts.
pub const TLS_TOKEN: &str = "root@pam!flxp=2f1c0e8b-8a6c-4d1e-9f9a-0b1c2d3e4f5a";

/// A client of `host` logging in with `token` (`id=secret`), trusting only `pin` when given.
pub fn token_client(host: Host, token: &str, pin: Option<Fingerprint>) -> Client {
    let (id, secret) = token.rsplit_once('=').unwrap();
    let builder = ClientBuilder::new(
        vec![host],
        Credentials::Token {
            id: id.into(),
            secret: Secret::new(secret),
        },
    )
    .timeout(Duration::from_secs(10));
    match pin {
        Some(pin) => builder.trust(TlsTrust::Pinned(vec![pin])),
        None => builder,
    }
    .build()
    .unwrap()
}

/// Serves `scenario`, which accepts `token`, over plain HTTP on `127.0.0.1:0`, with a client
/// logging in with it.
pub async fn serve_http(scenario: Scenario, token: &str) -> (SimHandle, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = SimHandle::spawn(listener, Sim::new(scenario).unwrap(), None).unwrap();
    let host: Host = format!("http://{}", handle.addr()).parse().unwrap();
    let client = token_client(host, token, None);
    (handle, client)
}

/// Serves the cluster of `snapshot` (a unit test's world, built with the core's builder) over
/// plain HTTP, with a client of it.
#[allow(dead_code)] // the unit tests': the integration tests start scenario documents
pub async fn serve_snapshot(snapshot: &Snapshot) -> (SimHandle, Client) {
    let mut scenario = Scenario::from_value(serde_json::to_value(snapshot).unwrap()).unwrap();
    scenario.add_token(TLS_TOKEN).unwrap();
    serve_http(scenario, TLS_TOKEN).await
}

/// Every API call the simulator answered so far, as `METHOD /path` (the route's template),
/// once per call, grouped by endpoint.
#[allow(dead_code)] // the unit tests'
pub fn calls(sim: &SimHandle) -> Vec<String> {
    let w = sim.sim().world();
    w.records
        .requests
        .iter()
        .flat_map(|(k, &n)| (0..n).map(move |_| format!("{} {}", k.method, k.path)))
        .collect()
}

/// Serves `scenario` (with [`TLS_TOKEN`] added) over HTTPS on `127.0.0.1:0`, with a client
/// pinned to its fresh certificate.
pub async fn serve_tls(mut scenario: Scenario) -> (SimHandle, Client) {
    scenario.add_token(TLS_TOKEN).unwrap();
    let identity = TlsIdentity::generate(&[]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = SimHandle::spawn(listener, Sim::new(scenario).unwrap(), Some(&identity)).unwrap();
    let pin: Fingerprint = handle.fingerprint().unwrap().parse().unwrap();
    let host = handle.addr().to_string().parse::<Host>().unwrap();
    let client = token_client(host, TLS_TOKEN, Some(pin));
    (handle, client)
}
