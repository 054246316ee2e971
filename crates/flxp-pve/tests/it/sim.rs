//! The client against the simulator (`flxp_sim`) in-process: real Proxmox semantics end to end.

use std::time::Duration;

use flxp_pve::types::{ConfigUpdate, GuestKind, QemuMigrateParams, RrdQuery, RrdTimeframe};
use flxp_pve::{
    ApiErrorKind, Client, ClientBuilder, Credentials, Error, Fingerprint, Host, Secret, TaskWait,
    TlsTrust,
};
use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};

const SMALL: &str = include_str!("../../../flxp-sim/scenarios/small.json");
const TOKEN: &str = "root@pam!flxp=2f1c0e8b-8a6c-4d1e-9f9a-0b1c2d3e4f5a";

/// The `small` scenario (3 nodes, users root@pam/secret and audit@pve/readonly) over HTTPS, with
/// simulated time running `scale` times faster than real time.
async fn start_sim(scale: f64) -> (SimHandle, Fingerprint) {
    let mut scenario = Scenario::from_json(SMALL).unwrap();
    scenario.add_token(TOKEN).unwrap();
    scenario.sim.time_scale = Some(scale);
    scenario.sim.auth_failure_delay_ms = Some(1);
    let sim = Sim::new(scenario).unwrap();
    let identity = TlsIdentity::generate(&[]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = SimHandle::spawn(listener, sim, Some(&identity)).unwrap();
    let pin: Fingerprint = handle.fingerprint().unwrap().parse().unwrap();
    (handle, pin)
}

fn client(handle: &SimHandle, pin: Fingerprint, credentials: Credentials) -> Client {
    let host: Host = handle.addr().to_string().parse().unwrap();
    ClientBuilder::new(vec![host], credentials)
        .trust(TlsTrust::Pinned(vec![pin]))
        .backoff(Duration::from_millis(10))
        .build()
        .unwrap()
}

/// [`start_sim`] with a token client.
async fn token_sim(scale: f64) -> (SimHandle, Client) {
    let (sim, pin) = start_sim(scale).await;
    let c = client(&sim, pin, token());
    (sim, c)
}

/// A live migration to `target`.
fn live_to(target: &str) -> QemuMigrateParams {
    QemuMigrateParams {
        target: target.into(),
        online: Some(true),
        ..Default::default()
    }
}

fn token() -> Credentials {
    let (id, secret) = TOKEN.rsplit_once('=').unwrap();
    Credentials::Token {
        id: id.into(),
        secret: Secret::new(secret),
    }
}

fn password(user: &str, pw: &str) -> Credentials {
    Credentials::Password {
        username: user.into(),
        password: Secret::new(pw),
    }
}

fn fast_wait() -> TaskWait {
    TaskWait {
        interval: Duration::from_millis(20),
        timeout: Some(Duration::from_secs(20)),
        log_lines: 10,
    }
}

#[tokio::test]
async fn reads_over_pinned_https_with_a_token() {
    let (sim, c) = token_sim(1000.0).await;
    assert_eq!(c.version().await.unwrap().major(), Some(9));
    let resources = c.cluster_resources(None).await.unwrap();
    let kinds = |k: &str| {
        resources
            .iter()
            .filter(|r| r.kind.as_deref() == Some(k))
            .count()
    };
    assert_eq!((kinds("node"), kinds("qemu"), kinds("lxc")), (3, 5, 1));
    let vms = c
        .cluster_resources(Some(flxp_pve::types::ResourceType::Vm))
        .await
        .unwrap();
    assert_eq!(vms.len(), 6);
    assert_eq!(c.nodes().await.unwrap().len(), 3);
    assert!(c.node_config("pve1").await.is_ok());
    let rows = c
        .node_rrddata(
            "pve1",
            &RrdQuery {
                timeframe: RrdTimeframe::Hour,
                cf: None,
            },
        )
        .await
        .unwrap();
    assert!(
        rows.iter().any(|r| r.get("pressurememorysome").is_some()),
        "{rows:?}"
    );
    let qemu = c.guests("pve1", GuestKind::Qemu).await.unwrap();
    assert_eq!(qemu.iter().map(|g| g.vmid).collect::<Vec<_>>(), [100, 102]);
    assert_eq!(c.next_id(None).await.unwrap(), 106);
    let e = c.next_id(Some(100)).await.unwrap_err();
    assert!(e.is_already_exists(), "{e}");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn digest_guarded_config_writes() {
    let (sim, c) = token_sim(1000.0).await;
    let before = c.guest_config("pve1", GuestKind::Qemu, 100).await.unwrap();
    let digest = before.digest.clone().unwrap();
    let update = ConfigUpdate::new()
        .with("tags", "flxp.affinity.web;Web")
        .with_digest(&digest);
    c.update_guest_config("pve1", GuestKind::Qemu, 100, &update)
        .await
        .unwrap();
    let after = c.guest_config("pve1", GuestKind::Qemu, 100).await.unwrap();
    assert_eq!(after.get("tags").as_deref(), Some("flxp.affinity.web;web"));
    // The old digest is stale now.
    let e = c
        .update_guest_config("pve1", GuestKind::Qemu, 100, &update)
        .await
        .unwrap_err();
    assert!(e.is_checksum_mismatch(), "{e}");
    // A tag Proxmox rejects comes back as a parameter error naming `tags`.
    let bad = ConfigUpdate::new().with("tags", "flxp/affinity=web");
    let e = c
        .update_guest_config("pve1", GuestKind::Qemu, 100, &bad)
        .await
        .unwrap_err();
    let Error::Api { kind, errors, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(kind, &ApiErrorKind::InvalidParameters);
    assert!(errors.contains_key("tags"), "{errors:?}");
    // The config of a guest lives on its own node only.
    let e = c
        .guest_config("pve2", GuestKind::Qemu, 100)
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_live_migration_locks_the_vm_runs_as_a_task_and_lands() {
    // 4 GiB at 2 GiB/s is 2 simulated seconds: 200 ms at a scale of 10.
    let (sim, c) = token_sim(10.0).await;
    let params = live_to("pve2");
    let upid = c.migrate_qemu("pve1", 100, &params).await.unwrap();
    assert_eq!(
        (upid.node(), upid.kind(), upid.id()),
        ("pve1", "qmigrate", "100")
    );
    let e = crate::set_qemu_tags(&c, "pve1", 100, "x")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(&crate::locked("migrate")), "{e}");
    let done = c.wait_task(&upid, &fast_wait()).await.unwrap();
    assert_eq!(done.exitstatus.as_deref(), Some("OK"));
    let moved = c.cluster_resources(None).await.unwrap();
    let vm = moved
        .iter()
        .find(|r| r.id.as_deref() == Some("qemu/100"))
        .unwrap();
    assert_eq!(vm.node.as_deref(), Some("pve2"));
    assert_eq!(vm.lock, None);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn migration_failures_come_back_typed() {
    let (sim, c) = token_sim(1000.0).await;
    let to_self = live_to("pve1");
    let e = c.migrate_qemu("pve1", 100, &to_self).await.unwrap_err();
    let Error::Api { errors, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        errors.get("target").map(String::as_str),
        Some("target is local node.")
    );
    let offline = QemuMigrateParams {
        target: "pve2".into(),
        ..Default::default()
    };
    // Refused at once with HTTP 500, as qemu-server's `migrate_vm` does.
    let e = c.migrate_qemu("pve1", 100, &offline).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("can't migrate running VM without --online"),
        "{e}"
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn ticket_auth_against_the_simulator() {
    let (sim, pin) = start_sim(1000.0).await;
    let root = client(&sim, pin, password("root@pam", "secret"));
    let update = ConfigUpdate::new().with("tags", "flxp.ignore");
    root.update_guest_config("pve2", GuestKind::Qemu, 101, &update)
        .await
        .unwrap();
    assert_eq!(root.cluster_resources(None).await.unwrap().len(), 16);
    let audit = client(&sim, pin, password("audit@pve", "readonly"));
    assert!(audit.cluster_tasks().await.is_ok());
    let e = audit
        .update_guest_config("pve2", GuestKind::Qemu, 101, &update)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(&ApiErrorKind::PermissionDenied), "{e}");
    let wrong = client(&sim, pin, password("root@pam", "wrong"));
    let e = wrong.version().await.unwrap_err();
    assert_eq!(e.kind(), Some(&ApiErrorKind::AuthFailed), "{e}");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_wrong_token_or_pin_is_refused() {
    let (sim, pin) = start_sim(1000.0).await;
    let bad = Credentials::Token {
        id: "root@pam!flxp".into(),
        secret: Secret::new("00000000-0000-0000-0000-000000000000"),
    };
    let e = client(&sim, pin, bad).version().await.unwrap_err();
    assert_eq!(e.kind(), Some(&ApiErrorKind::AuthFailed), "{e}");
    let other = Fingerprint::of_der(b"not the simulator");
    let e = client(&sim, other, token()).version().await.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }), "{e:?}");
    sim.shutdown().await.unwrap();
}
