//! `collect_snapshot` over HTTPS against the simulated cluster.

use std::time::Duration;

use flxp_core::{Cluster, Overrides, Snapshot};
use flxp_pve::{ClientBuilder, Credentials, Fingerprint, Host, Secret, TlsTrust};
use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};

const DEMO: &str = include_str!("../../../flxp-sim/scenarios/demo.json");
const TOKEN: &str = "root@pam!flxp=2f1c0e8b-8a6c-4d1e-9f9a-0b1c2d3e4f5a";

#[tokio::test]
async fn a_snapshot_of_the_demo_cluster_reads_back_as_the_same_cluster() {
    let mut scenario = Scenario::from_json(DEMO).unwrap();
    scenario.add_token(TOKEN).unwrap();
    let identity = TlsIdentity::generate(&[]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = SimHandle::spawn(
        listener,
        Sim::new(scenario.clone()).unwrap(),
        Some(&identity),
    )
    .unwrap();
    let pin: Fingerprint = sim.fingerprint().unwrap().parse().unwrap();
    let (id, secret) = TOKEN.rsplit_once('=').unwrap();
    let client = ClientBuilder::new(
        vec![sim.addr().to_string().parse::<Host>().unwrap()],
        Credentials::Token {
            id: id.into(),
            secret: Secret::new(secret),
        },
    )
    .trust(TlsTrust::Pinned(vec![pin]))
    .timeout(Duration::from_secs(10))
    .build()
    .unwrap();

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
