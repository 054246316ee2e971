//! Each error kind, as the real client reports Proxmox's real error answers.

use serde_json::json;

use flxp_pve::types::{CloneParams, ConfigUpdate, GuestKind};
use flxp_pve::{ApiErrorKind, Error};

use crate::server::{Reply, start};

async fn answer(reply: Reply) -> Error {
    let s = start(None, move |_, _| reply.clone()).await;
    let c = crate::client(&[s.host()]);
    let update = ConfigUpdate::new().with("tags", "x").with_digest("2f1c");
    c.update_guest_config("pve1", GuestKind::Qemu, 105, &update)
        .await
        .unwrap_err()
}

/// The error a call gets when Proxmox answers `status` with `message` and no errors map.
async fn error_answer(status: u16, message: &str) -> Error {
    answer(Reply::error(status, message, None)).await
}

#[tokio::test]
async fn locked_vm() {
    let e = error_answer(500, "VM is locked (migrate)").await;
    assert_eq!(e.kind(), Some(&crate::locked("migrate")));
    assert!(e.is_locked());
    assert_eq!(
        e.to_string(),
        "PUT /nodes/pve1/qemu/105/config: guest locked (migrate) (HTTP 500): VM is locked (migrate)"
    );
}

#[tokio::test]
async fn checksum_mismatch() {
    let e = error_answer(500, "checksum mismatch (file change by other user?)").await;
    assert!(e.is_checksum_mismatch());
}

#[tokio::test]
async fn config_does_not_exist() {
    let e = error_answer(
        500,
        "Configuration file 'nodes/pve1/qemu-server/105.conf' does not exist",
    )
    .await;
    assert!(e.is_not_found());
}

#[tokio::test]
async fn permission_denied() {
    let e = error_answer(403, "Permission check failed (/vms/105, VM.Config.Options)").await;
    assert_eq!(e.kind(), Some(&ApiErrorKind::PermissionDenied));
    assert!(
        e.to_string()
            .ends_with("Permission check failed (/vms/105, VM.Config.Options)")
    );
}

#[tokio::test]
async fn parameter_verification_keeps_the_errors_map() {
    let e = answer(Reply::error(
        400,
        "Parameter verification failed.",
        Some(json!({"tags": "invalid characters in tag\n"})),
    ))
    .await;
    let Error::Api {
        kind,
        status,
        errors,
        ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!((kind, *status), (&ApiErrorKind::InvalidParameters, 400));
    assert_eq!(errors["tags"], "invalid characters in tag");
}

#[tokio::test]
async fn already_exists_on_clone() {
    let s = start(None, |_, _| {
        Reply::error(
            400,
            "Parameter verification failed.",
            Some(json!({"newid": "VM 2004 already exists"})),
        )
    })
    .await;
    let c = crate::client(&[s.host()]);
    let p = CloneParams {
        newid: 2004,
        ..Default::default()
    };
    let e = c.clone_qemu("pve1", 9000, &p).await.unwrap_err();
    assert!(e.is_already_exists());
    assert_eq!(s.seen()[0].body, "newid=2004");
}

#[tokio::test]
async fn not_implemented() {
    let e = error_answer(
        501,
        "Method 'PUT /nodes/pve1/qemu/105/config' not implemented",
    )
    .await;
    assert_eq!(e.kind(), Some(&ApiErrorKind::NotImplemented));
}

#[tokio::test]
async fn a_body_of_the_wrong_shape_names_the_endpoint_and_path() {
    let s = start(None, |_, _| {
        Reply::data(json!([{"id": "node/pve1", "maxmem": "lots"}]))
    })
    .await;
    let c = crate::client(&[s.host()]);
    let e = c.cluster_resources(None).await.unwrap_err();
    let Error::BadResponse { endpoint, message } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(endpoint, "/cluster/resources");
    assert!(message.starts_with("data[0].maxmem"), "{message}");
    let s = start(None, |_, _| Reply::raw(200, "<html>proxy error</html>")).await;
    let e = crate::client(&[s.host()]).version().await.unwrap_err();
    assert!(matches!(e, Error::BadResponse { .. }), "{e:?}");
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    let port = crate::server::refused_port().await;
    let c = crate::builder(
        &[format!("http://127.0.0.1:{port}")],
        flxp_pve::TlsTrust::WebRoots,
    )
    .retries(0)
    .build()
    .unwrap();
    let e = c.nodes().await.unwrap_err();
    let Error::Connect { host, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(host, &format!("127.0.0.1:{port}"));
}
