//! 200 `createVM` at once on a cluster with room for 12: no node over its memory, no VMID twice,
//! every call either creates a VM or says there is no capacity.
//!
//! Three nodes of 16 GiB with nothing running; VMs of 4 GiB; `max-memory-commit = 1.0`, so each
//! node takes exactly four whatever the timing, as long as decisions in flight reserve their
//! memory until Proxmox shows the VM. Without reservations, decisions made before the first clone
//! is visible would all pick the same node and the simulator would refuse the starts.

use std::collections::{BTreeMap, BTreeSet};

use flxp_sim::Scenario;
use serde_json::{Value, json};

use super::serve::{CREATE, KEY, PASSWORD, code, start};

use flxp_core::units::GIB;

fn small_cluster() -> Scenario {
    let node = |n: &str| {
        json!({ "id": format!("node/{n}"), "type": "node", "node": n, "status": "online",
                "maxcpu": 16, "cpu": 0, "maxmem": 16 * GIB, "mem": 0 })
    };
    let ceph = |n: &str| {
        json!({ "id": format!("storage/{n}/ceph"), "type": "storage", "node": n, "storage": "ceph",
                "plugintype": "rbd", "shared": 1, "content": "images,rootdir", "status": "available",
                "maxdisk": 1u64 << 44, "disk": 0 })
    };
    let doc = json!({
        "resources": [
            node("n1"), node("n2"), node("n3"), ceph("n1"), ceph("n2"), ceph("n3"),
            { "id": "qemu/9000", "type": "qemu", "vmid": 9000, "name": "ubuntu-2404", "node": "n1",
              "status": "stopped", "template": 1, "maxmem": 2 * GIB, "maxcpu": 2, "maxdisk": 32 * GIB },
        ],
        "time": 1_764_400_000,
        "sim": {
            "guests": { "9000": { "config": {
                "scsi0": "ceph:base-9000-disk-0,size=32G",
                "ide2": "ceph:vm-9000-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:00:90:00,bridge=vmbr0",
                "boot": "order=scsi0",
            } } }
        }
    });
    Scenario::from_value(doc).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_creations_at_once_never_overcommit_a_node() {
    let s = start(
        small_cluster(),
        "[placement]\nmax-memory-commit = 1.0\n",
        &[("RUST_LOG", "info")],
    )
    .await;
    let options = json!({
        "image": "ubuntu-2404", "computeProfile": "medium", "storageProfile": "standard",
        "sshPublicKey": KEY, "interfaces": [{ "network": "100" }],
        "user": "admin", "password": PASSWORD, "backup": true,
    });
    let calls = (0..200).map(|i| {
        let vars = json!({ "zone": "lab", "name": format!("vm-{i}"), "options": options });
        let s = &s;
        async move { s.gql(CREATE, vars).await }
    });
    let answers: Vec<Value> = futures_util::future::join_all(calls).await;

    let mut created: BTreeMap<u32, String> = BTreeMap::new();
    let mut no_capacity = 0;
    for v in &answers {
        match code(v) {
            "<none>" => {
                let vm = &v["data"]["createVM"];
                let vmid: u32 = vm["id"].as_str().unwrap().parse().unwrap();
                let host = vm["host"]["name"].as_str().unwrap().to_owned();
                assert!(
                    created.insert(vmid, host).is_none(),
                    "VMID {vmid} handed out twice"
                );
            }
            "NO_CAPACITY" => no_capacity += 1,
            other => panic!("unexpected answer {other}: {v}"),
        }
    }
    assert_eq!(created.len(), 12, "room for 4 × 4 GiB on each of 3 nodes");
    assert_eq!(no_capacity, 188);

    let world = s.sim.sim().world();
    let mut per_node: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    for g in world.guests.values().filter(|g| g.running) {
        let e = per_node.entry(g.node.as_str()).or_default();
        e.0 += g.maxmem();
        e.1 += 1;
    }
    for (name, node) in &world.nodes {
        let (committed, count) = per_node.get(name.as_str()).copied().unwrap_or_default();
        assert!(
            committed <= node.maxmem,
            "{name} carries {committed} bytes of VMs on {} bytes",
            node.maxmem
        );
        let used: u64 = node.base_mem
            + world
                .guests
                .values()
                .filter(|g| g.running && g.node == *name)
                .map(|g| g.host_mem())
                .sum::<u64>();
        assert!(used <= node.maxmem, "{name} uses {used} of {}", node.maxmem);
        assert_eq!(count, 4, "{name}: {per_node:?}");
    }
    // Every VM answered exists, runs, and is where the answer says.
    let ids: BTreeSet<u32> = world
        .guests
        .values()
        .filter(|g| g.vmid != 9000)
        .map(|g| g.vmid)
        .collect();
    assert_eq!(ids, created.keys().copied().collect());
    for (vmid, host) in &created {
        let g = &world.guests[vmid];
        assert!(
            g.running && &g.node == host,
            "{vmid}: {} running={}",
            g.node,
            g.running
        );
    }
}

/// `n` `createVM` calls sent together, each tagged `tag`: the node of each VM created, and how
/// many were refused for capacity.
async fn created_together(tag: &str, n: usize) -> (Vec<String>, usize) {
    let s = start(small_cluster(), "", &[("RUST_LOG", "info")]).await;
    let options = json!({
        "image": "ubuntu-2404", "computeProfile": "medium", "storageProfile": "standard",
        "sshPublicKey": KEY, "interfaces": [{ "network": "100" }],
        "user": "admin", "password": PASSWORD, "tags": [tag],
    });
    let calls = (0..n).map(|i| {
        let vars = json!({ "zone": "lab", "name": format!("vm-{i}"), "options": options });
        let s = &s;
        async move { s.gql(CREATE, vars).await }
    });
    let answers: Vec<Value> = futures_util::future::join_all(calls).await;
    let mut nodes = Vec::new();
    let mut refused = 0;
    for v in &answers {
        match code(v) {
            "<none>" => nodes.push(
                v["data"]["createVM"]["host"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
            "NO_CAPACITY" => refused += 1,
            other => panic!("unexpected answer {other}: {v}"),
        }
    }
    // What Proxmox shows agrees with the answers.
    let world = s.sim.sim().world();
    let mut shown: Vec<String> = world
        .guests
        .values()
        .filter(|g| g.vmid != 9000)
        .map(|g| g.node.clone())
        .collect();
    shown.sort();
    nodes.sort();
    assert_eq!(shown, nodes);
    (nodes, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_at_once_keep_a_new_anti_affinity_group_apart() {
    // Three nodes: three of five members fit, one a node; before, all went to the emptiest.
    let (nodes, refused) = created_together("flxp.anti-affinity.fresh", 5).await;
    assert_eq!(nodes, ["n1", "n2", "n3"]);
    assert_eq!(refused, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_at_once_keep_a_new_affinity_group_together() {
    let (nodes, refused) = created_together("flxp.affinity.pair", 3).await;
    assert_eq!(refused, 0);
    assert!(nodes.iter().all(|n| *n == nodes[0]), "{nodes:?}");
}
