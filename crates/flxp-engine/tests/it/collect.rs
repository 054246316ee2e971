//! `collect_snapshot` over HTTPS against the simulated cluster.

use flxp_core::{Cluster, Overrides, Snapshot};
use flxp_sim::Scenario;

use crate::sim_client::serve_tls;
use crate::support::DEMO;

#[tokio::test]
async fn a_snapshot_of_the_demo_cluster_reads_back_as_the_same_cluster() {
    let scenario = Scenario::from_json(DEMO).unwrap();
    let (sim, client) = serve_tls(scenario.clone()).await;

    // This machine's clock says a year later: the snapshot keeps the cluster's (the sim's), the
    // clock its task times come from.
    let snap = flxp_engine::collect_snapshot(&client, 1_795_936_000)
        .await
        .unwrap();
    let start = scenario.snapshot.time.unwrap();
    let time = snap.time.unwrap();
    assert!((start..start + 60).contains(&time), "{time}");
    let guests = |s: &Snapshot| {
        let mut ids: Vec<(u32, String)> = s
            .resources
            .iter()
            .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
            .map(|r| (r.vmid.unwrap(), r.node.clone().unwrap()))
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(guests(&snap), guests(&scenario.snapshot));
    let online = snap
        .resources
        .iter()
        .filter(|r| r.kind.as_deref() == Some("node") && r.status.as_deref() == Some("online"))
        .count();
    assert!(online > 0);
    assert_eq!(
        snap.nodes.values().filter(|n| n.rrddata.is_some()).count(),
        online,
        "every online node has its latest rrd row"
    );
    for (name, extra) in &scenario.snapshot.nodes {
        if let Some(notes) = &extra.notes {
            assert_eq!(snap.nodes[name].notes.as_ref(), Some(notes), "{name}");
        }
    }
    assert!(!snap.ha.rules.is_empty(), "the demo has an HA rule");
    assert!(!snap.ha.status.is_empty());
    // What flxp snapshot writes is what the core reads.
    Cluster::from_json(&snap.to_json_pretty(), &Overrides::default()).unwrap();
    sim.shutdown().await.unwrap();
}
