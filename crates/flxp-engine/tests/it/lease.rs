//! The zone lease against the simulator: Proxmox's digest check refuses a stale write, and of two
//! keepers one holds the lease and the other stands by.

use std::time::Duration;

use flxp_engine::{LeaseKeeper, LeaseOptions, LeaseState};
use flxp_pve::types::NodeConfigUpdate;

use super::support::{UNBALANCED, zone};

fn keeper(z: &super::support::Zone, holder: &str) -> LeaseKeeper {
    LeaseKeeper::new(
        z.api.clone(),
        "lab".into(),
        None,
        LeaseOptions {
            ttl: Duration::from_secs(30),
            margin: Duration::from_secs(5),
            holder: holder.into(),
            command: None,
            hold: flxp_engine::LeaseHold::Acting,
        },
    )
}

#[tokio::test]
async fn a_write_with_a_stale_digest_is_refused_as_proxmox_does() {
    let z = zone(UNBALANCED, 1.0, |_| {}).await;
    let read = z.api.node_config("pve1").await.unwrap();
    let write = |text: &str| NodeConfigUpdate {
        description: Some(text.into()),
        delete: None,
        digest: read.digest.clone(),
    };
    z.api
        .update_node_config("pve1", &write("first"))
        .await
        .unwrap();
    let e = z
        .api
        .update_node_config("pve1", &write("second"))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("detected modified configuration - file changed by other user? Try again."),
        "{e}"
    );
    let now = z.api.node_config("pve1").await.unwrap();
    assert_eq!(now.description.as_deref(), Some("first"));
}

#[tokio::test]
async fn of_two_keepers_on_the_simulator_one_holds_the_lease() {
    let z = zone(UNBALANCED, 1.0, |_| {}).await;
    let a = keeper(&z, "a:1:1");
    let b = keeper(&z, "b:2:2");
    let (x, y) = tokio::join!(a.tick(), b.tick());
    let held = [&x, &y]
        .into_iter()
        .filter(|s| **s == LeaseState::Held)
        .count();
    assert_eq!(held, 1, "{x:?} {y:?}");
    // Again, now that one holds it: the holder renews, the other stands by.
    let (x, y) = tokio::join!(a.tick(), b.tick());
    assert_eq!(a.holding(), x == LeaseState::Held);
    assert_eq!(b.holding(), y == LeaseState::Held);
    assert!(a.holding() != b.holding(), "{x:?} {y:?}");
    // The lease sits on the alphabetically first node, as one comment line.
    let notes = z
        .api
        .node_config("pve1")
        .await
        .unwrap()
        .description
        .unwrap();
    assert_eq!(
        notes.matches("<!-- flxp-lease zone=lab ").count(),
        1,
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_without_rounds_keeps_its_lease_and_runs_no_round() {
    // `flxp serve` with `[daemon] zones` naming others: the API acts here, so the lease is kept.
    let z = zone(UNBALANCED, 1.0, |_| {}).await;
    let lab = flxp_engine::Zone {
        name: "lab".into(),
        api: z.api.clone(),
        overrides: flxp_core::Overrides::default(),
        reservations: None,
    };
    let lease = flxp_engine::daemon::LeaseSettings {
        options: LeaseOptions {
            ttl: Duration::from_secs(30),
            margin: Duration::from_secs(5),
            holder: "serve:1:1".into(),
            command: Some("serve".into()),
            // Kept all the time, though no round runs: what this test is about.
            hold: flxp_engine::LeaseHold::Always,
        },
        nodes: std::collections::BTreeMap::new(),
    };
    let d = flxp_engine::Daemon::new(
        Vec::new(),
        &super::support::scheduler(),
        flxp_engine::DaemonOptions::default(),
    )
    .with_idle_zones(vec![lab])
    .with_lease(lease);
    assert!(d.zones().is_empty(), "{:?}", d.zones());
    let runner = d.clone();
    let run = tokio::spawn(async move { runner.run(std::future::pending()).await });
    let start = std::time::Instant::now();
    while !z.notes("pve1").contains("holder=serve:1:1") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}",
            z.notes("pve1")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(d.may_act("lab").await.unwrap().is_some());
    let cli = keeper(&z, "cli:2:2");
    assert!(matches!(cli.tick().await, LeaseState::Standby { .. }));
    assert!(
        cli.refusal()
            .starts_with("zone lab is held by another flxp (serve:1:1, running `flxp serve`)"),
        "{}",
        cli.refusal()
    );
    let e = d.run_round("lab").await.unwrap_err();
    assert!(matches!(e, flxp_engine::Error::UnknownZone { .. }), "{e}");
    d.stop();
    run.await.unwrap();
    d.release_leases().await;
    // Given back: the line stays, expired.
    let notes = z.notes("pve1");
    let left = flxp_engine::lease::find(&notes, "").map(|r| r.expires);
    assert_eq!(left, Some(flxp_engine::lease::FREE), "{notes}");
    assert_eq!(z.migrations_of(100), 0);
}
