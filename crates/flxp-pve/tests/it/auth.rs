//! Token and ticket authentication as Proxmox checks it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;

use flxp_pve::{ApiErrorKind, ClientBuilder, Credentials, Host, Secret, TlsTrust};

use crate::server::{Reply, start};

#[tokio::test]
async fn token_auth_sends_the_pveapitoken_header_on_every_call_and_no_csrf() {
    let s = start(None, |_, _| Reply::data(json!(null))).await;
    let c = crate::client(&[s.host()]);
    c.permissions(&Default::default()).await.unwrap();
    crate::set_qemu_tags(&c, "pve1", 105, "a").await.unwrap();
    for seen in s.seen() {
        assert_eq!(
            seen.authorization.as_deref(),
            Some("PVEAPIToken=root@pam!flxp=0f3b6c1e-1111-2222-3333-444455556666")
        );
        assert_eq!(seen.csrf, None);
        assert_eq!(seen.cookie, None);
    }
}

fn ticket_answer(n: usize) -> Reply {
    Reply::data(json!({
        "username": "flxp@pve",
        "ticket": format!("PVE:flxp@pve:6929A5C{n}::c2lnbmF0dXJl"),
        "CSRFPreventionToken": format!("6929A5C{n}:csrf{n}"),
        "clustername": "lab",
    }))
}

fn password_client(host: &str, renew_after: Duration) -> flxp_pve::Client {
    ClientBuilder::new(
        vec![host.parse::<Host>().unwrap()],
        Credentials::Password {
            username: "flxp@pve".into(),
            password: Secret::new("pa;ss=word"),
        },
    )
    .trust(TlsTrust::WebRoots)
    .ticket_renew_after(renew_after)
    .build()
    .unwrap()
}

/// Answers logins with numbered tickets and checks cookie and CSRF like Proxmox.
fn ticket_server_script(
    logins: Arc<AtomicUsize>,
) -> impl Fn(&crate::server::Seen, usize) -> Reply + Send + Sync + 'static {
    move |seen, _| {
        if seen.path == "/api2/json/access/ticket" {
            assert_eq!(seen.method, "POST");
            assert_eq!(seen.body, "username=flxp%40pve&password=pa%3Bss%3Dword");
            assert_eq!(seen.cookie, None);
            let n = logins.fetch_add(1, Ordering::SeqCst) + 1;
            return ticket_answer(n);
        }
        let n = logins.load(Ordering::SeqCst);
        let want_cookie = format!("PVEAuthCookie=PVE:flxp@pve:6929A5C{n}::c2lnbmF0dXJl");
        if seen.cookie.as_deref() != Some(want_cookie.as_str()) {
            return Reply::unauthorized("No ticket");
        }
        if seen.method != "GET"
            && seen.csrf.as_deref() != Some(format!("6929A5C{n}:csrf{n}").as_str())
        {
            return Reply::unauthorized("Permission denied - invalid csrf token");
        }
        Reply::data(json!(null))
    }
}

#[tokio::test]
async fn ticket_auth_logs_in_once_sends_the_cookie_and_csrf_only_on_writes() {
    let logins = Arc::new(AtomicUsize::new(0));
    let s = start(None, ticket_server_script(logins.clone())).await;
    let c = password_client(&s.host(), Duration::from_secs(3600));
    c.cluster_options().await.unwrap_or_default();
    crate::set_qemu_tags(&c, "pve1", 105, "a").await.unwrap();
    c.version().await.ok();
    assert_eq!(logins.load(Ordering::SeqCst), 1);
    let seen = s.seen();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[1].csrf, None, "no CSRF token on a GET");
    assert_eq!(seen[2].method, "PUT");
    assert_eq!(seen[2].csrf.as_deref(), Some("6929A5C1:csrf1"));
    assert_eq!(seen[2].body, "tags=a");
    assert_eq!(
        seen[2].content_type.as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(seen[1].authorization, None);
}

#[tokio::test]
async fn concurrent_first_calls_share_one_login() {
    let logins = Arc::new(AtomicUsize::new(0));
    let s = start(None, ticket_server_script(logins.clone())).await;
    let c = password_client(&s.host(), Duration::from_secs(3600));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.cluster_tasks().await })
        })
        .collect();
    for h in handles {
        let r = h.await.unwrap();
        // `data: null` is not a task list; only the auth matters here.
        assert!(
            matches!(r, Err(flxp_pve::Error::BadResponse { .. })),
            "{r:?}"
        );
    }
    assert_eq!(logins.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_ticket_is_renewed_when_due() {
    let logins = Arc::new(AtomicUsize::new(0));
    let s = start(None, ticket_server_script(logins.clone())).await;
    let c = password_client(&s.host(), Duration::from_millis(150));
    c.update_node_config("pve1", &Default::default())
        .await
        .unwrap();
    c.update_node_config("pve1", &Default::default())
        .await
        .unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.update_node_config("pve1", &Default::default())
        .await
        .unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 2, "renewed after 150 ms");
}

#[tokio::test]
async fn a_401_with_a_ticket_logs_in_again_once() {
    let logins = Arc::new(AtomicUsize::new(0));
    let inner = ticket_server_script(logins.clone());
    let revoked = Arc::new(AtomicUsize::new(0));
    let r = revoked.clone();
    // The first write after the first login finds its ticket revoked (a server restart).
    let s = start(None, move |seen, i| {
        if seen.path.ends_with("/config") && r.fetch_add(1, Ordering::SeqCst) == 0 {
            return Reply::unauthorized("Authentication failed!");
        }
        inner(seen, i)
    })
    .await;
    let c = password_client(&s.host(), Duration::from_secs(3600));
    c.update_node_config("pve1", &Default::default())
        .await
        .unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 2);
    let paths: Vec<_> = s.seen().iter().map(|x| x.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/api2/json/access/ticket",
            "/api2/json/nodes/pve1/config",
            "/api2/json/access/ticket",
            "/api2/json/nodes/pve1/config"
        ]
    );
}

#[tokio::test]
async fn a_wrong_password_is_an_auth_failure_without_a_login_loop() {
    let s = start(None, |_, _| Reply::unauthorized("Authentication failed!")).await;
    let c = password_client(&s.host(), Duration::from_secs(3600));
    let e = c.version().await.unwrap_err();
    assert_eq!(e.kind(), Some(&ApiErrorKind::AuthFailed));
    assert!(e.to_string().contains("Authentication failed!"), "{e}");
    assert!(!e.to_string().contains("pa;ss"), "{e}");
    // A refused login is not repeated (Proxmox delays each failure by about 3 s).
    assert_eq!(s.count(), 1);
    assert!(
        s.seen()
            .iter()
            .all(|x| x.path == "/api2/json/access/ticket")
    );
}

#[tokio::test]
async fn a_bad_token_is_an_auth_failure_with_proxmox_reason() {
    let s = start(None, |_, _| Reply::unauthorized("Authentication failed!")).await;
    let c = crate::client(&[s.host()]);
    let e = c.cluster_resources(None).await.unwrap_err();
    assert_eq!(e.kind(), Some(&ApiErrorKind::AuthFailed));
    assert_eq!(
        e.to_string(),
        "GET /cluster/resources: authentication failed (HTTP 401): Authentication failed!"
    );
    assert!(!format!("{e:?}").contains(crate::TOKEN_SECRET));
    assert_eq!(s.count(), 1, "a 401 is not retried with a token");
}
