//! `flxp rolling` on 5- and 8-node simulated clusters with hard rules (anti-affinity and
//! affinity tags), HA-managed guests, an ignored guest, stopped guests and guests on local
//! disks, several nodes out at a time (`--parallel`). A poller reading the simulator all along
//! (see `cli_lease.rs`) checks that no anti-affinity group ever shares a node, that never more
//! nodes are out (offline or marked in maintenance) than allowed, and that no node goes down
//! twice; at the end every node has rebooted (its boot time changed), every guest is home and
//! the notes are clean, also when the run is killed halfway (`kill -9`) and run again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cli_balance::{SimZone, sim_zone};
use super::cli_lease::{Poller, breaches};
use super::cli_rolling::{boots, placement, spawn};

const GIB: u64 = 1 << 30;

/// `nodes` nodes of 64 GiB: anti-affinity `web` on pve1–pve3 and `dns` on pve2 and pve4, the
/// affinity pair `cache` on pve3, HA-managed 111 and 112 on pve1 and pve2, the ignored 151 on
/// the last node, stopped 161 and 162, 131 and 132 on local disks, and two 2 GiB guests more on
/// every node.
fn cluster(nodes: usize) -> String {
    let mut r = Vec::new();
    for n in 1..=nodes {
        r.push(json!({
            "id": format!("node/pve{n}"), "type": "node", "node": format!("pve{n}"),
            "status": "online", "maxcpu": 32, "cpu": 0.05, "maxmem": 64 * GIB, "mem": 4 * GIB,
            "maxdisk": 100 * GIB, "disk": 10 * GIB, "uptime": 864_000
        }));
        for (storage, shared, plugin) in [("ceph", 1, "rbd"), ("local-lvm", 0, "lvmthin")] {
            r.push(json!({
                "id": format!("storage/pve{n}/{storage}"), "type": "storage",
                "node": format!("pve{n}"), "storage": storage, "plugintype": plugin,
                "shared": shared, "content": "images,rootdir", "status": "available",
                "maxdisk": 2_000 * GIB, "disk": 100 * GIB
            }));
        }
    }
    let mut guest = |vmid: u32, node: usize, tags: &str, running: bool| {
        r.push(json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "name": format!("g{vmid}"),
            "node": format!("pve{node}"), "status": if running { "running" } else { "stopped" },
            "maxmem": 2 * GIB, "mem": if running { GIB } else { 0 }, "maxcpu": 2,
            "cpu": if running { 0.1 } else { 0.0 }, "maxdisk": 32 * GIB, "disk": 0,
            "uptime": if running { 3600 } else { 0 }, "template": 0, "tags": tags
        }));
    };
    for (vmid, node) in [(101, 1), (102, 2), (103, 3)] {
        guest(vmid, node, "flxp.anti-affinity.web", true);
    }
    guest(201, 2, "flxp.anti-affinity.dns", true);
    guest(202, 4, "flxp.anti-affinity.dns", true);
    guest(121, 3, "flxp.affinity.cache", true);
    guest(122, 3, "flxp.affinity.cache", true);
    guest(111, 1, "db", true);
    guest(112, 2, "db", true);
    guest(151, nodes, "flxp.ignore", true);
    guest(161, 1, "", false);
    guest(162, 4, "", false);
    guest(131, 2, "local", true);
    guest(132, 5, "local", true);
    for n in 1..=nodes {
        for k in 0..2 {
            guest(300 + 10 * n as u32 + k, n, "", true);
        }
    }
    let local = |vmid: u32| json!({ "config": { "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=32G") } });
    json!({
        "resources": r,
        "ha": { "resources": [
            { "sid": "vm:111", "state": "started", "max_restart": 1, "max_relocate": 1 },
            { "sid": "vm:112", "state": "started", "max_restart": 1, "max_relocate": 1 }
        ] },
        "time": 1_764_400_000,
        "sim": { "migration_bandwidth": GIB, "guests": { "131": local(131), "132": local(132) } }
    })
    .to_string()
}

/// The poller's check: anti-affinity kept, at most `allowed` nodes out, no node down twice;
/// the most nodes seen out at once goes to `most`.
fn invariants(allowed: usize, most: Arc<AtomicUsize>) -> super::cli_lease::Check {
    let mut was_online: BTreeMap<String, bool> = BTreeMap::new();
    let mut downs: BTreeMap<String, usize> = BTreeMap::new();
    Box::new(move |state: &Value| {
        let mut found = breaches(state);
        let mut out = Vec::new();
        for n in state["nodes"].as_array().unwrap() {
            let name = n["node"].as_str().unwrap().to_owned();
            let online = n["online"].as_bool().unwrap();
            let marked = n["notes"]
                .as_str()
                .unwrap_or_default()
                .contains("flxp.maintenance");
            if !online || marked {
                out.push(name.clone());
            }
            if was_online.insert(name.clone(), online) == Some(true) && !online {
                let d = downs.entry(name.clone()).or_default();
                *d += 1;
                if *d > 1 {
                    found.push(format!("{name} went down {d} times"));
                }
            }
        }
        most.fetch_max(out.len(), Ordering::SeqCst);
        if out.len() > allowed {
            found.push(format!("{} nodes out: {out:?}", out.len()));
        }
        found
    })
}

/// The migrations of a `--dry-run` schedule whose target goes out in the same wave as its
/// source.
fn moves_within_a_wave(schedule: &str) -> Vec<String> {
    let mut wave_of = BTreeMap::new();
    let mut moves = Vec::new();
    let mut at = (String::new(), String::new());
    for line in schedule.lines() {
        if let Some(rest) = line.strip_prefix("wave ") {
            let (wave, rest) = rest.split_once(": ").unwrap();
            let node = rest.split_once(':').unwrap().0;
            wave_of.insert(node.to_owned(), wave.to_owned());
            at = (wave.to_owned(), node.to_owned());
        } else if let Some((_, to)) = line.split_once(" → ") {
            if line.starts_with("    ") {
                let to = to.split_once(' ').unwrap().0.to_owned();
                moves.push((at.clone(), to, line.trim().to_owned()));
            }
        }
    }
    moves
        .into_iter()
        .filter(|((wave, _), to, _)| wave_of.get(to) == Some(wave))
        .map(|((_, from), _, line)| format!("{from}: {line}"))
        .collect()
}

/// The zone at a time scale where a reboot (120 simulated seconds) takes 2.4 s.
fn zone(nodes: usize) -> SimZone {
    sim_zone(&cluster(nodes), 50.0, "", |_| {})
}

/// What must hold after a finished run: every node rebooted, every guest home, no flxp line
/// left in any node's notes, the affinity pair together.
fn assert_finished(z: &SimZone, before: &BTreeMap<u32, String>, booted: &BTreeMap<String, f64>) {
    let after = boots(z);
    for (node, t) in booted {
        assert!(after[node] > *t, "{node} was not rebooted");
    }
    assert_eq!(&placement(z), before, "not every guest is home");
    for (node, n) in &z.sim.world().nodes {
        assert!(
            !n.notes.contains("flxp-rolling")
                && !n.notes.contains("flxp-home")
                && !n.notes.contains("flxp.maintenance"),
            "{node}: {}",
            n.notes
        );
    }
    assert_eq!(z.node_of(121), z.node_of(122));
}

#[test]
fn five_nodes_two_at_a_time_keep_every_rule_and_come_home() {
    let z = zone(5);
    let (before, booted) = (placement(&z), boots(&z));
    let (code, out, _) = z.run(&["rolling", "--parallel", "2", "--dry-run"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("wave 1: pve1: evacuate "), "{out}");
    assert!(out.contains("\nwave 3: pve5: evacuate "), "{out}");
    assert_eq!(moves_within_a_wave(&out), Vec::<String>::new(), "{out}");
    // Three out of five would leave two online: not a majority, so the third waits.
    let (code, out3, _) = z.run(&["rolling", "--parallel", "3", "--dry-run"]);
    assert_eq!(code, 0, "{out3}");
    assert!(
        out3.contains(
            "\nwave 2: pve3: evacuate 5 migration(s), 5.0 GiB to copy, about 5 s → reboot, wait \
             up to 15 min for it → clear maintenance → 5 guest(s) back home\n    \
             not out with the wave before: 2 of 5 node(s) would stay online: quorum needs more \
             than half\n"
        ),
        "{out3}"
    );
    let most = Arc::new(AtomicUsize::new(0));
    let poller = Poller::start_with(&z, invariants(2, Arc::clone(&most)));
    let (code, out, err) = z.run(&["rolling", "--parallel", "2", "--stop-left"]);
    let (reads, found) = poller.finish();
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(reads > 10, "{reads} reads");
    assert_eq!(found, Vec::<String>::new());
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "never two nodes out at once"
    );
    // Each guest out once and home once: none was moved onto a node of its own wave.
    assert!(
        out.contains("rolling maintenance done: 5 node(s) done by this run, 46 migration(s)"),
        "{out}"
    );
    assert_finished(&z, &before, &booted);
}

#[test]
fn eight_nodes_three_at_a_time_killed_halfway_are_finished_by_a_rerun() {
    let z = zone(8);
    let (before, booted) = (placement(&z), boots(&z));
    let most = Arc::new(AtomicUsize::new(0));
    let poller = Poller::start_with(&z, invariants(3, Arc::clone(&most)));
    let mut child = spawn(&z, &["rolling", "--parallel", "3", "--stop-left"]);
    // Killed in its second wave: some node done, some waiting for its reboot.
    let start = Instant::now();
    loop {
        let notes = z.all_notes();
        if notes.contains("step=done") && notes.contains("step=waiting") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(180), "{notes}");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, out, err) = z.run(&["rolling", "--parallel", "3", "--stop-left", "--wait", "120"]);
    let (_, found) = poller.finish();
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(err.contains(": continuing at step "), "{err}");
    assert_eq!(found, Vec::<String>::new());
    assert!(
        most.load(Ordering::SeqCst) >= 2,
        "never more than one node out"
    );
    assert_finished(&z, &before, &booted);
}
