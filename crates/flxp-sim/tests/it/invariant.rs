//! The simulator's promise: no guest is ever lost or on two nodes, no node is pushed over its
//! memory, and no disk shrinks — under concurrent migrations through the API, and under random
//! operation sequences (migrations, resizes, node failures, aborted tasks) on the world itself.

use std::collections::BTreeMap;
use std::time::Duration;

use flxp_pve::types::SizeSpec;
use flxp_sim::Scenario;
use flxp_sim::world::{GuestKind, MigrateRequest, ResizeRequest, World};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{GIB, TestSim, cluster};

fn many_guests() -> Value {
    let mut res = Vec::new();
    for n in ["pve1", "pve2", "pve3"] {
        res.push(
            json!({"id": format!("node/{n}"), "type": "node", "node": n, "status": "online",
            "maxcpu": 32, "cpu": 0.1, "maxmem": 128 * GIB, "mem": 0}),
        );
        res.push(
            json!({"id": format!("storage/{n}/ceph"), "type": "storage", "node": n,
            "storage": "ceph", "plugintype": "rbd", "shared": 1, "content": "images,rootdir"}),
        );
    }
    for i in 0..30u32 {
        let node = ["pve1", "pve2", "pve3"][(i % 3) as usize];
        res.push(
            json!({"id": format!("qemu/{}", 100 + i), "type": "qemu", "vmid": 100 + i,
            "name": format!("g{i}"), "node": node, "status": "running", "maxmem": 4 * GIB,
            "mem": 2 * GIB, "memhost": 3 * GIB, "maxcpu": 2, "cpu": 0.3}),
        );
    }
    json!({"resources": res, "time": 1_764_400_000,
           "sim": {"migration_bandwidth": GIB, "auth_failure_delay_ms": 0}})
}

/// Every guest exactly once in `/cluster/resources` and in exactly one node's list.
async fn check_views(s: &TestSim, expected: usize) {
    let res = s.get("/cluster/resources?type=vm").await.data().clone();
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for r in res.as_array().unwrap() {
        *seen.entry(r["vmid"].as_u64().unwrap()).or_default() += 1;
    }
    assert_eq!(seen.len(), expected, "a guest was lost or invented");
    assert!(
        seen.values().all(|c| *c == 1),
        "a guest appears twice: {seen:?}"
    );
    let mut listed: BTreeMap<u64, usize> = BTreeMap::new();
    for n in ["pve1", "pve2", "pve3"] {
        for g in s
            .get(&format!("/nodes/{n}/qemu"))
            .await
            .data()
            .as_array()
            .unwrap()
        {
            *listed.entry(g["vmid"].as_u64().unwrap()).or_default() += 1;
        }
    }
    assert_eq!(listed.len(), expected);
    assert!(
        listed.values().all(|c| *c == 1),
        "a guest is listed on two nodes: {listed:?}"
    );
    for n in s
        .get("/cluster/resources?type=node")
        .await
        .data()
        .as_array()
        .unwrap()
    {
        assert!(n["mem"].as_u64().unwrap() <= n["maxmem"].as_u64().unwrap());
    }
}

#[tokio::test(start_paused = true)]
async fn concurrent_migrations_never_lose_or_duplicate_a_guest() {
    let s = TestSim::new(many_guests());
    let nodes = ["pve1", "pve2", "pve3"];
    for round in 0..4u32 {
        let res = s.get("/cluster/resources?type=vm").await.data().clone();
        let mut handles = Vec::new();
        for g in res.as_array().unwrap() {
            let vmid = g["vmid"].as_u64().unwrap() as u32;
            let from = g["node"].as_str().unwrap().to_string();
            let to = nodes[((vmid + round) % 3) as usize];
            if to == from {
                continue;
            }
            let s = s.clone();
            handles.push(tokio::spawn(async move {
                s.post_task(
                    &format!("/nodes/{from}/qemu/{vmid}/migrate"),
                    &[("target", to), ("online", "1")],
                )
                .await
            }));
        }
        let mut upids = Vec::new();
        for h in handles {
            upids.push(h.await.unwrap());
        }
        // Poll while they run: the invariant holds at every moment, not only at the end.
        for _ in 0..12 {
            check_views(&s, 30).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        for u in &upids {
            assert_eq!(s.wait(u).await["exitstatus"], "OK", "{u}");
        }
        check_views(&s, 30).await;
    }
}

#[derive(Debug, Clone)]
enum Op {
    Migrate {
        vmid: u32,
        target: usize,
        online: bool,
        local_disks: bool,
    },
    Resize {
        vmid: u32,
        size: SizeSpec,
    },
    Advance(f64),
    Offline(usize),
    Online(usize),
    Maintenance(usize, bool),
    StopNewestTask,
}

fn op() -> impl Strategy<Value = Op> {
    let vmids = prop::sample::select(vec![100u32, 101, 102, 103, 104, 110, 120, 9000]);
    prop_oneof![
        4 => (vmids, 0..3usize, any::<bool>(), any::<bool>())
            .prop_map(|(vmid, target, online, local_disks)| Op::Migrate { vmid, target, online, local_disks }),
        2 => (prop::sample::select(vec![100u32, 101, 102, 110, 120]), any::<bool>(), 0u64..80)
            .prop_map(|(vmid, grow, gib)| Op::Resize {
                vmid,
                size: if grow { SizeSpec::Grow(gib << 30) } else { SizeSpec::Absolute(gib << 30) },
            }),
        4 => (0.1f64..20.0).prop_map(Op::Advance),
        1 => (0..3usize).prop_map(Op::Offline),
        1 => (0..3usize).prop_map(Op::Online),
        1 => (0..3usize, any::<bool>()).prop_map(|(n, on)| Op::Maintenance(n, on)),
        1 => Just(Op::StopNewestTask),
    ]
}

fn check_world(w: &World, expected: usize) -> Result<(), TestCaseError> {
    w.check_invariant()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(w.guests.len(), expected);
    for n in w.nodes.values().filter(|n| n.online) {
        let used: u64 = n.base_mem
            + w.guests
                .values()
                .filter(|g| g.node == n.name)
                .map(|g| g.host_mem())
                .sum::<u64>()
            + w.reservations
                .values()
                .filter(|(t, _)| *t == n.name)
                .map(|(_, b)| *b)
                .sum::<u64>();
        prop_assert!(
            used <= n.maxmem,
            "node {} uses {} of {}",
            n.name,
            used,
            n.maxmem
        );
    }
    for g in w.guests.values() {
        let locked_by_migration = g.lock() == Some("migrate");
        let has_task =
            w.tasks.all().iter().any(|t| {
                t.is_running() && t.id == g.vmid.to_string() && t.kind.ends_with("migrate")
            });
        // A migration lock never outlives its task (a task may fail before it takes the lock).
        prop_assert!(
            !locked_by_migration || has_task,
            "stale migrate lock on {}",
            g.vmid
        );
        if w.reservations.contains_key(&g.vmid) {
            prop_assert!(
                locked_by_migration,
                "memory reserved for {} without a migration",
                g.vmid
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_every_guest_on_exactly_one_node(ops in prop::collection::vec(op(), 1..40)) {
        let scenario = Scenario::from_value(cluster()).unwrap();
        let mut w = World::build(&scenario, 1_000.0).unwrap();
        let expected = w.guests.len();
        let nodes = ["pve1", "pve2", "pve3"];
        let mut now = 1_000.0;
        let mut disks: BTreeMap<u32, u64> = w.guests.values().map(|g| (g.vmid, g.maxdisk())).collect();
        for op in ops {
            match op {
                Op::Migrate { vmid, target, online, local_disks } => {
                    let Some(g) = w.guests.get(&vmid).cloned() else { continue };
                    let _ = w.migrate(MigrateRequest {
                        kind: g.kind,
                        node: g.node.clone(),
                        vmid,
                        target: nodes[target].to_string(),
                        online,
                        with_local_disks: local_disks,
                        restart: online && g.kind == GuestKind::Lxc,
                        bwlimit_kib: None,
                        user: "root@pam".into(),
                    });
                }
                Op::Resize { vmid, size } => {
                    let Some(g) = w.guests.get(&vmid).cloned() else { continue };
                    let _ = w.resize_disk(ResizeRequest {
                        node: g.node.clone(),
                        vmid,
                        disk: "scsi0".into(),
                        size,
                        digest: None,
                        skiplock: false,
                        user: "root@pam".into(),
                    });
                }
                Op::Advance(secs) => {
                    now += secs;
                    w.advance(now);
                }
                Op::Offline(n) => w.set_online(nodes[n], false),
                Op::Online(n) => w.set_online(nodes[n], true),
                Op::Maintenance(n, on) => w.set_maintenance(nodes[n], on),
                Op::StopNewestTask => {
                    if let Some(t) = w.tasks.all().iter().rev().find(|t| t.is_running()).map(|t| t.upid.clone()) {
                        w.stop_task(&t);
                    }
                }
            }
            check_world(&w, expected)?;
            for g in w.guests.values() {
                let before = disks.insert(g.vmid, g.maxdisk()).unwrap_or(0);
                prop_assert!(g.maxdisk() >= before, "the disk of {} shrank from {}", g.vmid, before);
            }
        }
        now += 10_000.0;
        w.advance(now);
        check_world(&w, expected)?;
        prop_assert!(w.reservations.is_empty(), "reservations left after everything ended");
    }
}
