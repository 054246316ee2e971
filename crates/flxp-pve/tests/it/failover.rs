//! Host failover and retries: reads retry, writes that may have reached Proxmox never do.

use std::time::Duration;

use serde_json::json;

use flxp_pve::types::{GuestKind, QemuMigrateParams};
use flxp_pve::{ApiErrorKind, Error, TlsTrust};

use crate::server::{Reply, refused_port, start};

const UPID: &str = "UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam!flxp:";

fn migrate() -> QemuMigrateParams {
    QemuMigrateParams {
        target: "pve2".into(),
        online: Some(true),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_refused_first_host_fails_over_to_the_second_and_is_remembered() {
    let dead = format!("http://127.0.0.1:{}", refused_port().await);
    let s = start(None, |_, _| Reply::data(json!([]))).await;
    let c = crate::client(&[dead, s.host()]);
    assert!(c.cluster_resources(None).await.unwrap().is_empty());
    assert_eq!(c.preferred_host().port, s.port);
    assert!(c.cluster_tasks().await.unwrap().is_empty());
    assert_eq!(s.count(), 2);
}

#[tokio::test]
async fn a_write_fails_over_when_nothing_was_sent() {
    let dead = format!("http://127.0.0.1:{}", refused_port().await);
    let s = start(None, |_, _| Reply::data(json!(UPID))).await;
    let c = crate::client(&[dead, s.host()]);
    let upid = c.migrate_qemu("pve1", 105, &migrate()).await.unwrap();
    assert_eq!(upid.as_str(), UPID);
    assert_eq!(s.count(), 1);
    assert_eq!(s.seen()[0].body, "target=pve2&online=1");
}

#[tokio::test]
async fn all_hosts_refusing_is_a_connect_error_after_the_retry_rounds() {
    let a = refused_port().await;
    let b = refused_port().await;
    let c = crate::builder(
        &[
            format!("http://127.0.0.1:{a}"),
            format!("http://127.0.0.1:{b}"),
        ],
        TlsTrust::WebRoots,
    )
    .retries(1)
    .build()
    .unwrap();
    let e = c.version().await.unwrap_err();
    assert!(matches!(&e, Error::Connect { .. }), "{e:?}");
    assert!(
        e.to_string().contains("cannot connect to 127.0.0.1:"),
        "{e}"
    );
}

#[tokio::test]
async fn a_read_is_retried_on_5xx_until_it_succeeds() {
    let s = start(None, |_, i| {
        if i < 2 {
            Reply::error(503, "Service Unavailable", None)
        } else {
            Reply::data(json!([{"id": "node/pve1", "type": "node", "node": "pve1"}]))
        }
    })
    .await;
    let c = crate::client(&[s.host()]);
    let r = c.cluster_resources(None).await.unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(s.count(), 3);
}

#[tokio::test]
async fn a_read_gives_up_after_its_retry_rounds() {
    let s = start(None, |_, _| Reply::error(596, "Broken pipe", None)).await;
    let c = crate::builder(&[s.host()], TlsTrust::WebRoots)
        .retries(2)
        .build()
        .unwrap();
    let e = c.version().await.unwrap_err();
    assert_eq!(e.kind(), Some(&ApiErrorKind::ProxyUnreachable));
    assert_eq!(s.count(), 3, "one try plus two retry rounds");
}

#[tokio::test]
async fn a_59x_read_moves_on_to_the_next_host() {
    let a = start(None, |_, _| Reply::error(595, "Connection refused", None)).await;
    let b = start(None, |_, _| Reply::data(json!([]))).await;
    let c = crate::client(&[a.host(), b.host()]);
    assert!(c.cluster_tasks().await.unwrap().is_empty());
    assert_eq!((a.count(), b.count()), (1, 1));
}

#[tokio::test]
async fn a_write_answered_with_5xx_is_never_retried() {
    let s = start(None, |_, _| Reply::error(503, "Service Unavailable", None)).await;
    let other = start(None, |_, _| Reply::data(json!(UPID))).await;
    let c = crate::client(&[s.host(), other.host()]);
    let e = c.migrate_qemu("pve1", 105, &migrate()).await.unwrap_err();
    assert_eq!(e.status(), Some(503));
    assert_eq!(s.count(), 1);
    assert_eq!(
        other.count(),
        0,
        "the write may have happened: no second host"
    );
}

#[tokio::test]
async fn a_write_that_timed_out_is_never_retried() {
    let slow = start(None, |_, _| {
        Reply::data(json!(UPID)).after(Duration::from_secs(3))
    })
    .await;
    let other = start(None, |_, _| Reply::data(json!(UPID))).await;
    let c = crate::builder(&[slow.host(), other.host()], TlsTrust::WebRoots)
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let e = c
        .start_guest("pve1", GuestKind::Qemu, 105, &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(e.may_have_been_applied());
    assert_eq!(
        e.to_string(),
        format!(
            "POST /nodes/pve1/qemu/105/status/start on {} timed out",
            slow.host().trim_start_matches("http://")
        )
    );
    assert_eq!((slow.count(), other.count()), (1, 0));
}

#[tokio::test]
async fn a_read_that_timed_out_is_retried_on_the_next_host() {
    let slow = start(None, |_, _| {
        Reply::data(json!([])).after(Duration::from_secs(3))
    })
    .await;
    let other = start(None, |_, _| Reply::data(json!([]))).await;
    let c = crate::builder(&[slow.host(), other.host()], TlsTrust::WebRoots)
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    assert!(c.cluster_tasks().await.unwrap().is_empty());
    assert_eq!((slow.count(), other.count()), (1, 1));
}

#[tokio::test]
async fn a_login_that_failed_over_leaves_the_working_host_preferred() {
    let dead = format!("http://127.0.0.1:{}", refused_port().await);
    let s = start(None, |seen, _| {
        if seen.path.ends_with("/access/ticket") {
            Reply::data(
                json!({"username": "root@pam", "ticket": "PVE:t", "CSRFPreventionToken": "c"}),
            )
        } else {
            Reply::data(json!([]))
        }
    })
    .await;
    let hosts: Vec<flxp_pve::Host> = [dead, s.host()]
        .iter()
        .map(|h| h.parse().unwrap())
        .collect();
    let c = flxp_pve::ClientBuilder::new(
        hosts,
        flxp_pve::Credentials::Password {
            username: "root@pam".into(),
            password: flxp_pve::Secret::new("pw"),
        },
    )
    .build()
    .unwrap();
    assert!(c.cluster_tasks().await.unwrap().is_empty());
    assert_eq!(c.preferred_host().port, s.port);
    let paths: Vec<String> = s.seen().into_iter().map(|x| x.path).collect();
    assert_eq!(
        paths,
        ["/api2/json/access/ticket", "/api2/json/cluster/tasks"]
    );
}

#[tokio::test]
async fn a_resize_is_never_repeated_after_an_error_answer_or_a_timeout() {
    use flxp_pve::types::ResizeParams;

    let grow = ResizeParams::to_size("scsi0", 64 << 30);
    // A 500 would make a read move on and retry; a resize stays one request.
    let busy = start(None, |_, _| {
        Reply::error(
            500,
            "can't lock file '/var/lock/qemu-server/lock-120.conf' - got timeout",
            None,
        )
    })
    .await;
    let spare = start(None, |_, _| Reply::data(json!(UPID))).await;
    let c = crate::client(&[busy.host(), spare.host()]);
    let e = c.resize_disk("pve1", 120, &grow).await.unwrap_err();
    assert_eq!(e.status(), Some(500), "{e:?}");
    assert_eq!((busy.count(), spare.count()), (1, 0));

    // No answer in time: the disk may have grown, so the call is not sent again anywhere.
    let slow = start(None, |_, _| {
        Reply::data(json!(UPID)).after(Duration::from_secs(3))
    })
    .await;
    let c = crate::builder(&[slow.host(), spare.host()], TlsTrust::WebRoots)
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let e = c.resize_disk("pve1", 120, &grow).await.unwrap_err();
    assert!(e.may_have_been_applied(), "{e:?}");
    assert_eq!((slow.count(), spare.count()), (1, 0));
}
