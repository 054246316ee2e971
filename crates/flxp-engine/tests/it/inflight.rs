//! A migration in flight counts on its target: started by hand towards a
//! node, it keeps every other member of its anti-affinity group away from that node in the plan
//! and in every step of the execution, until it lands.

use std::time::Duration;

use flxp_core::balance::BalanceOptions;
use flxp_engine::{Goal, Limits};
use flxp_pve::types::QemuMigrateParams;
use serde_json::Value;

use crate::support::{UNBALANCED, zone};

const DB: &str = "flxp.anti-affinity.db";

/// UNBALANCED with 100, 101 and 102 (all on the crowded pve1) and 112 (on pve2) in group `db`.
fn tag_db(v: &mut Value) {
    for r in v["resources"].as_array_mut().unwrap() {
        if matches!(r["vmid"].as_u64(), Some(100..=102 | 112)) {
            let tags = r["tags"]
                .as_str()
                .map_or(DB.to_owned(), |t| format!("{t};{DB}"));
            r["tags"] = tags.into();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_member_goes_to_where_another_is_migrating() {
    let z = zone(UNBALANCED, 50.0, tag_db).await;
    // 112 heads for pve3, the emptiest node, slowly: 1 MiB/s for its memory is minutes of
    // simulated time, seconds of real time at scale 50, while the balance's moves take ms.
    let params = QemuMigrateParams {
        target: "pve3".into(),
        online: Some(true),
        bwlimit: Some(1024),
        ..QemuMigrateParams::default()
    };
    z.api.migrate_qemu("pve2", 112, &params).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(z.node_of(112), "pve2", "112 is still on its way");

    let goal = Goal::Balance(BalanceOptions {
        max_migrations: 20,
        ..BalanceOptions::default()
    });
    let exec = z.executor(Limits::default());
    let model = exec.read().await.unwrap();
    let g112 = model.cluster.guest(model.cluster.guest_idx(112).unwrap());
    assert_eq!(
        g112.migrating_to()
            .map(|n| model.cluster.node(n).name.clone()),
        Some("pve3".into()),
        "the collector read the target from the task log"
    );
    let plan = exec.plan(&goal).await.unwrap();
    let db_moves: Vec<(u32, &str)> = plan
        .migrations
        .iter()
        .filter(|m| matches!(m.vmid, 100..=102))
        .map(|m| (m.vmid, m.to.as_str()))
        .collect();
    assert!(
        !db_moves
            .iter()
            .any(|(_, to)| *to == "pve3" || *to == "pve2"),
        "{db_moves:?}"
    );
    let report = exec.execute(plan.clone(), &goal).await;
    assert!(report.failed.is_empty(), "{report:#?}");
    assert_eq!(
        z.node_of(112),
        "pve2",
        "112 is still on its way: {report:#?}"
    );
    for vmid in 100..=102 {
        let at = z.node_of(vmid);
        assert!(at != "pve3" && at != "pve2", "{vmid} went to {at}");
    }
    z.shutdown().await;
}
