//! Scenario loading: the shipped scenarios load, and bad scenarios get errors naming the entry.

use flxp_sim::Scenario;
use serde_json::{Value, json};

use crate::support::{TestSim, cluster, cluster_with, live_with_local_disks, resource_entry};

fn err(doc: Value) -> String {
    Scenario::from_value(doc).unwrap_err().to_string()
}

/// The standard cluster's document with `value` at `path` (dot-separated keys; a number indexes
/// an array).
fn with(path: &str, value: Value) -> Value {
    let mut doc = cluster();
    let mut at = &mut doc;
    for key in path.split('.') {
        at = match key.parse::<usize>() {
            Ok(i) if at.is_array() => &mut at[i],
            _ => &mut at[key],
        };
    }
    *at = value;
    doc
}

/// Asserts that the standard cluster with `value` at `path` fails to load with an error that
/// names every one of `parts`.
fn assert_refused(path: &str, value: Value, parts: &[&str]) {
    let e = err(with(path, value));
    for part in parts {
        assert!(e.contains(part), "{path}: {e}");
    }
}

#[test]
fn the_demo_world_has_what_flxp_serve_needs() {
    let demo = Scenario::demo();
    let res = &demo.snapshot.resources;
    let nodes: Vec<_> = res
        .iter()
        .filter(|r| r.kind.as_deref() == Some("node"))
        .collect();
    assert_eq!(nodes.len(), 4);
    let sizes: std::collections::BTreeSet<_> = nodes.iter().map(|n| n.maxmem).collect();
    assert!(sizes.len() >= 3, "heterogeneous nodes");
    let guests = res
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .count();
    assert!((18..=24).contains(&guests), "{guests}");
    assert_eq!(demo.snapshot.ha.rules.len(), 1);
    let sim = flxp_sim::Sim::new(demo).unwrap();
    let w = sim.world();
    let t = &w.guests[&9000];
    assert_eq!(t.name(), Some("ubuntu-2404"));
    assert!(t.is_template());
    let disks = t.disks();
    assert!(
        disks
            .iter()
            .any(|d| d.key == "scsi0" && d.storage.as_deref() == Some("ceph"))
    );
    assert!(disks.iter().any(|d| d.cloudinit));
    assert!(t.config.get("net0").unwrap().contains("bridge=vmbr0"));
    assert!(w.storages["ceph"].shared && w.storages["ceph"].nodes.is_empty());
    assert!(!w.storages["local-lvm"].shared);
    assert!(
        w.guests
            .values()
            .any(|g| g.tags().is_some_and(|t| t.contains("flxp.")))
    );
}

#[test]
fn the_shipped_scenarios_load() {
    for name in ["demo", "small", "unbalanced"] {
        let path = format!("{}/scenarios/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let s =
            Scenario::load(std::path::Path::new(&path)).unwrap_or_else(|e| panic!("{name}: {e}"));
        flxp_sim::Sim::new(s).unwrap();
    }
}

#[test]
fn a_bare_resources_dump_is_a_scenario() {
    let doc = cluster();
    let bare = doc["resources"].clone();
    let s = Scenario::from_value(json!({"data": bare.clone()})).unwrap();
    assert_eq!(s.snapshot.resources.len(), bare.as_array().unwrap().len());
    Scenario::from_value(bare).unwrap();
}

#[test]
fn bad_scenarios_name_the_offending_entry() {
    for (path, value, parts) in [
        (
            "resources.10.vmid",
            json!(100),
            &["resources[10]", "duplicate guest 100"][..],
        ),
        (
            "resources.9.node",
            json!("pve9"),
            &["resources[9].node", "'pve9'"],
        ),
        ("sim.tokenz", json!([]), &["sim", "unknown field `tokenz`"]),
        (
            "resources.9.tags",
            json!("ok;not/ok"),
            &["resources[9].tags", "not/ok"],
        ),
        (
            "sim.guests.100",
            json!({"config": {"bogus": "1"}}),
            &["sim.guests.100.config.bogus"],
        ),
        (
            "sim.guests.100",
            json!({"config": {"net0": "virtio=zz,bridge=vmbr0"}}),
            &["sim.guests.100.config.net0", "MAC"],
        ),
        (
            "sim.guests.100",
            json!({"config": {"scsi0": "nowhere:vm-100-disk-0,size=8G"}}),
            &["no such storage 'nowhere'"],
        ),
        ("sim.guests.555", json!({"cpu": 0.5}), &["sim.guests.555"]),
        ("sim.time_scale", json!(0), &["sim.time_scale"]),
        (
            "sim.faults",
            json!({"errors": [{"path": "/x", "rate": 1.5}]}),
            &["sim.faults.errors[0].rate"],
        ),
        (
            "ha.resources",
            json!([{"sid": "vm:777"}]),
            &["ha.resources[0].sid", "777"],
        ),
        (
            "ha.resources",
            json!([{"sid": "ct:100"}]),
            &["guest 100 is qemu"],
        ),
        (
            "ha.rules",
            json!([{"rule": "r", "type": "location", "resources": "vm:110"}]),
            &["ha.rules[0].type"],
        ),
        (
            "sim.nodes",
            json!({"pve7": {"base_cpu": 1}}),
            &["sim.nodes.pve7"],
        ),
        (
            "resources.3.maxmem",
            json!("lots"),
            &["resources[3].maxmem"],
        ),
        // u64::MAX bytes used to overflow the memory arithmetic (a panic while loading).
        (
            "resources.9.maxmem",
            json!(u64::MAX),
            &["resources[9].maxmem", "more than 1 PiB"],
        ),
        (
            "resources.0.maxmem",
            json!(u64::MAX),
            &["resources[0].maxmem", "more than 1 PiB"],
        ),
    ] {
        assert_refused(path, value, parts);
    }

    let e = err(with("sim.tokens", json!(["root@pam=nosecret"])));
    assert!(e.contains("sim.tokens[0]"), "{e}");
    assert!(!e.contains("nosecret") || e.contains("root@pam"), "{e}");

    assert!(
        Scenario::from_json("{not json")
            .unwrap_err()
            .to_string()
            .contains("line 1")
    );
    assert!(err(json!({"resources": []})).contains("no node entries"));
}

#[test]
fn synthetic_scenarios_are_valid_deterministic_and_not_overcommitted() {
    let a = Scenario::synthetic(32, 2000, 7);
    assert_eq!(a, Scenario::synthetic(32, 2000, 7));
    a.validate().unwrap();
    let guests = a
        .snapshot
        .resources
        .iter()
        .filter(|r| r.vmid.is_some())
        .count();
    assert_eq!(guests, 2000);
    let sim = flxp_sim::Sim::new(a).unwrap();
    let w = sim.world();
    for (name, s) in w.node_stats_all() {
        assert!(s.mem < w.nodes[&name].maxmem, "{name} is full");
    }
}

#[test]
fn generated_values_are_checked_under_their_resource_entry() {
    assert_refused(
        "resources.9.name",
        json!("Web Server"),
        &["resources[9].name", "DNS name"],
    );
}

#[test]
fn a_dump_without_disk_storage_gets_a_local_thin_pool() {
    let doc = json!([
        {"id": "node/a", "type": "node", "node": "a", "status": "online", "maxcpu": 4, "maxmem": 8u64 << 30},
        {"id": "storage/a/local", "type": "storage", "node": "a", "storage": "local", "plugintype": "dir",
         "shared": 0, "content": "iso,backup"},
        {"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "a", "status": "running", "maxmem": 1u64 << 30},
        {"id": "sdn/a/localnetwork", "type": "sdn", "node": "a", "sdn": "localnetwork"},
    ]);
    let s = Scenario::from_value(doc).unwrap();
    let sim = flxp_sim::Sim::new(s).unwrap();
    let w = sim.world();
    assert!(
        w.guests[&100]
            .config
            .get("scsi0")
            .unwrap()
            .starts_with("local-lvm:vm-100-disk-0")
    );
}

#[tokio::test]
async fn disks_whose_sizes_add_up_past_u64_do_not_crash_the_server() {
    // Two 16 million TiB disks: each fits a u64, their sum does not. Summing them panicked in
    // the storage view (every /cluster/resources) and in the migration estimate.
    let config = json!({
        "scsi0": "local-lvm:vm-101-disk-0,size=16000000T",
        "scsi1": "local-lvm:vm-101-disk-1,size=16000000T"
    });
    let sim = TestSim::new(with("sim.guests.101.config", config));
    let r = sim.get("/cluster/resources").await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = sim
        .post_migrate("pve1", "qemu/101", &live_with_local_disks("pve2"))
        .await;
    assert!(r.status == 200 || r.status == 500, "{r:?}");
    assert_eq!(sim.get("/cluster/resources").await.status, 200);
}

#[test]
fn impossible_guest_states_are_refused_with_their_path() {
    assert_eq!(cluster()["resources"][16]["vmid"], 9000);
    let parts = ["resources[16].status", "guest 9000 is a template"];
    assert_refused("resources.16.status", json!("running"), &parts);

    // As `POST /_sim/guests/{vmid}/usage` refuses it.
    for (path, value, parts) in [
        (
            "sim.guests.100",
            json!({"cpu": 7}),
            &["sim.guests.100.cpu", "must be a fraction 0..1"][..],
        ),
        (
            "sim.guests.100",
            json!({"cpu": -0.5}),
            &["sim.guests.100.cpu"],
        ),
        (
            "sim.guests.100",
            json!({"mem": 1u64 << 51}),
            &["sim.guests.100.mem", "1 PiB"],
        ),
        (
            "sim.nodes.pve1",
            json!({"base_mem": 1u64 << 51}),
            &["sim.nodes.pve1.base_mem"],
        ),
    ] {
        assert_refused(path, value, parts);
    }

    // A dump's own guest `cpu` may read a little over 1: it is kept, capped.
    Scenario::from_value(with("resources.9.cpu", json!(1.02))).unwrap();
}

#[test]
fn memory_beyond_a_node_is_a_warning_not_an_error() {
    let mut d = cluster();
    // pve3 has 16 GiB: a 24 GiB guest running there, plus more guests than fit.
    d["resources"][15]["node"] = json!("pve3");
    d["resources"][15]["memhost"] = json!(20u64 << 30);
    let s = Scenario::from_value(d).unwrap();
    let sim = flxp_sim::Sim::new(s).unwrap();
    let w = sim.world();
    let warnings = w.memory_warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("guest 120 has 24576 MiB")
            && warnings[0].contains("node 'pve3' has (16384 MiB)"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].starts_with("node 'pve3' uses") && warnings[1].contains("reported as full"),
        "{warnings:?}"
    );
    let stats = w.node_stats_all();
    assert_eq!(stats["pve3"].mem, w.nodes["pve3"].maxmem);
    // The standard cluster fits.
    let sim = flxp_sim::Sim::new(Scenario::from_value(cluster()).unwrap()).unwrap();
    assert_eq!(sim.world().memory_warnings(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_local_storage_keeps_each_nodes_own_size() {
    let s = cluster_with(|doc| {
        let r = resource_entry(doc, "storage/pve2/local-lvm");
        r["maxdisk"] = json!(110u64 << 30);
        r["disk"] = json!(10u64 << 30);
    });
    let total = |e: Value| e["total"].as_u64().unwrap();
    assert_eq!(total(s.storage("pve2", "local-lvm").await), 110 << 30);
    assert_eq!(total(s.storage("pve1", "local-lvm").await), 4 << 40);
    let r = s.resource("storage/pve2/local-lvm").await;
    assert_eq!(r["maxdisk"], 110u64 << 30);
    assert!(r["disk"].as_u64().unwrap() >= 10 << 30);
}
