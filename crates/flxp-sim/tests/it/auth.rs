//! Authentication: API tokens (both header forms), tickets with CSRF, 401s with empty bodies and
//! the configured delay, read-only principals getting 403.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use serde_json::json;

use crate::support::{RO_TOKEN, TOKEN, TestSim, cluster_with, live_to};

#[tokio::test(start_paused = true)]
async fn token_header_in_both_forms_is_accepted() {
    let s = TestSim::cluster();
    assert_eq!(s.get("/version").await.data()["release"], "9.2");
    let spaced = s.with_auth(Some(format!("PVEAPIToken {TOKEN}")));
    assert_eq!(spaced.get("/version").await.status, 200);
}

#[tokio::test(start_paused = true)]
async fn bad_token_is_401_with_empty_body() {
    let s = TestSim::cluster();
    let wrong = TOKEN.replace("0b6a", "1b6a");
    let r = s
        .with_auth(Some(format!("PVEAPIToken={wrong}")))
        .get("/version")
        .await;
    r.assert_refused(401, "Authentication failed!");
    assert_eq!(r.body, "");
    let r = s.with_auth(None).get("/cluster/resources").await;
    r.assert_refused(401, "No ticket");
    assert_eq!(r.body, "");
}

#[tokio::test(start_paused = true)]
async fn failed_authentication_waits_the_configured_delay() {
    let s = cluster_with(|doc| doc["sim"]["auth_failure_delay_ms"] = json!(3000))
        .with_auth(Some("PVEAPIToken=root@pam!test=nope".into()));
    let start = tokio::time::Instant::now();
    assert_eq!(s.get("/version").await.status, 401);
    assert!(
        start.elapsed() >= Duration::from_millis(3000),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn ticket_login_then_cookie_and_csrf_on_writes() {
    let s = TestSim::cluster();
    let anon = s.with_auth(None);
    assert_eq!(anon.get("/access/ticket").await.data(), &json!(null));
    let wrong = [("username", "root@pam"), ("password", "wrong")];
    let bad = anon.post("/access/ticket", &wrong).await;
    bad.assert_refused(401, "authentication failure");
    let realm = [
        ("username", "root"),
        ("realm", "pam"),
        ("password", "secret"),
    ];
    let r = anon.post("/access/ticket", &realm).await;
    let d = r.data();
    assert_eq!(d["username"], "root@pam");
    let ticket = d["ticket"].as_str().unwrap().to_string();
    let csrf = d["CSRFPreventionToken"].as_str().unwrap().to_string();
    assert!(ticket.starts_with("PVE:root@pam:"), "{ticket}");

    let cookie =
        |b: axum::http::request::Builder| b.header("cookie", format!("PVEAuthCookie={ticket}"));
    let get = cookie(Request::builder().uri("/api2/json/nodes"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(s.send(get).await.status, 200);

    let write = |csrf: Option<&str>| {
        let mut b = cookie(
            Request::builder()
                .method("PUT")
                .uri("/api2/json/nodes/pve1/config"),
        )
        .header("content-type", "application/x-www-form-urlencoded");
        if let Some(c) = csrf {
            b = b.header("CSRFPreventionToken", c);
        }
        b.body(Body::from("description=hello")).unwrap()
    };
    let r = s.send(write(None)).await;
    r.assert_refused(401, "Permission denied - invalid csrf token");
    let r = s.send(write(Some("00000000:forged"))).await;
    assert_eq!(r.status, 401);
    assert_eq!(s.send(write(Some(&csrf))).await.status, 200);
    assert_eq!(
        s.get_data("/nodes/pve1/config").await["description"],
        "hello"
    );

    // The ticket renews itself as a password.
    let renewed = anon
        .post(
            "/access/ticket",
            &[("username", "root@pam"), ("password", &ticket)],
        )
        .await;
    assert_eq!(renewed.status, 200);
}

#[tokio::test(start_paused = true)]
async fn read_only_token_reads_but_writes_get_403() {
    let s = TestSim::cluster().with_auth(Some(format!("PVEAPIToken={RO_TOKEN}")));
    assert_eq!(s.get("/cluster/resources").await.status, 200);
    let r = s.post_migrate("pve1", "qemu/100", &live_to("pve2")).await;
    r.assert_refused(403, "Permission check failed (/vms/100, VM.Migrate)");
    let perms = s.get("/access/permissions").await;
    assert_eq!(perms.data()["/"]["VM.Audit"], 1);
    assert!(perms.data()["/"].get("VM.Migrate").is_none());
}
