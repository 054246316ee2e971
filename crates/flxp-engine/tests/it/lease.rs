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
