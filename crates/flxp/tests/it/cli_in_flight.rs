//! Runs and migrations in flight that they did not start: a run started again at once after
//! `kill -9` finds the killed run's migration still running, and an admin migrates a guest onto a
//! node while `flxp evacuate` empties it. An independent poller reads the simulator all along.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::cli_balance::{SimZone, sim_zone};
use super::cli_consolidate::migrate_by_hand;
use super::cli_lease::{Poller, breaches};

const GIB: u64 = 1 << 30;

/// Four nodes of 64 GiB; guests as `(vmid, node, GiB, tags)`, each using all its memory.
fn cluster(guests: &[(u32, &str, u64, &str)]) -> String {
    let mut resources = Vec::new();
    for n in 1..=4 {
        resources.push(json!({
            "id": format!("node/pve{n}"), "type": "node", "node": format!("pve{n}"),
            "status": "online", "maxcpu": 16, "cpu": 0.05, "maxmem": 64 * GIB, "mem": 2 * GIB,
            "maxdisk": 100 * GIB, "disk": 10 * GIB, "uptime": 864_000
        }));
    }
    for &(vmid, node, gib, tags) in guests {
        resources.push(json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid,
            "name": format!("vm-{vmid}"), "node": node, "status": "running",
            "maxmem": gib * GIB, "mem": gib * GIB, "maxcpu": 2, "cpu": 0.1, "maxdisk": 32 * GIB,
            "disk": 0, "uptime": 3600, "template": 0, "tags": tags
        }));
    }
    json!({ "resources": resources, "time": 1_764_400_000 }).to_string()
}

/// Runs `flxp ARGS` on the zone with info logs, as an admin sees them: exit code, stdout, stderr.
fn run_logged(z: &SimZone, args: &[&str]) -> (i32, String, String) {
    finished(spawn_logged(z, args))
}

/// Starts `flxp ARGS` on the zone with info logs, its output piped.
fn spawn_logged(z: &SimZone, args: &[&str]) -> Child {
    command(z, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Exit code, stdout and stderr of a run, once it ended.
fn finished(child: Child) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

fn command(z: &SimZone, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flxp"));
    c.args(args)
        .args(["--zone", "lab", "--config", z.config()])
        .env_remove("FLXP_CONFIG")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

/// The `migrate` lock of a guest, if it has one.
fn migrating(z: &SimZone, vmid: u32) -> bool {
    z.sim.world().guests[&vmid].lock() == Some("migrate")
}

/// Waits (up to a minute) until `ready` holds.
fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_rerun_after_kill_9_waits_for_the_killed_runs_migration_and_brings_the_group_together() {
    // pve2 holds an affinity pair of 8 GiB guests (8 simulated seconds each, 2 real ones here)
    // and a member of an anti-affinity group; one migration leaves a node at a time, so the
    // pair leaves one after the other.
    let doc = cluster(&[
        (101, "pve1", 2, "flxp.anti-affinity.web"),
        (102, "pve2", 2, "flxp.anti-affinity.web"),
        (103, "pve3", 2, "flxp.anti-affinity.web"),
        (108, "pve2", 8, "flxp.affinity.cache"),
        (109, "pve2", 8, "flxp.affinity.cache"),
        (111, "pve1", 4, ""),
        (121, "pve3", 4, ""),
        (131, "pve4", 4, ""),
    ]);
    let z = sim_zone(&doc, 4.0, "", |_| {});
    let poller = Poller::start_with(&z, Box::new(breaches));
    let mut first = command(&z, &["evacuate", "pve2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until("a member of the pair migrates", || {
        migrating(&z, 108) || migrating(&z, 109)
    });
    first.kill().unwrap();
    first.wait().unwrap();
    // Killed with one member in flight and its partner still on pve2.
    let (gone, partner) = if migrating(&z, 108) {
        (108, 109)
    } else {
        (109, 108)
    };
    assert!(migrating(&z, gone));
    assert_eq!(z.node_of(partner), "pve2");
    assert!(!migrating(&z, partner));

    let (code, out, err) = run_logged(&z, &["evacuate", "pve2"]);
    let (_, found) = poller.finish();
    assert!(found.is_empty(), "{found:#?}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("waiting for migrations in flight that this run did not start")
            && err.contains(&format!("migrations={gone} (pve2 → ")),
        "{err}"
    );
    assert!(
        out.contains(&format!(
            "replanned (the migration of {gone} (pve2 → {}), in flight and not started by this \
             run, ended)",
            z.node_of(gone)
        )),
        "{out}"
    );
    assert_eq!(z.node_of(108), z.node_of(109), "{out}");
    assert!(z.guests_on("pve2").is_empty(), "{out}");
    assert!(!out.contains("still running on the emptied node"), "{out}");
}

#[test]
fn guests_migrated_onto_a_node_being_emptied_are_moved_off_it_too() {
    // An admin's migration onto pve3 is in flight when the evacuation plans (2 GiB at 512 MiB/s:
    // 4 simulated seconds, 1 real one here), and another starts once the run's first migration
    // is done (2 GiB at full speed). pve3's own guests leave one at a time.
    let doc = cluster(&[
        (101, "pve1", 2, "flxp.anti-affinity.web"),
        (103, "pve3", 2, "flxp.anti-affinity.web"),
        (116, "pve1", 2, ""),
        (117, "pve4", 2, ""),
        (121, "pve3", 4, ""),
        (122, "pve3", 4, ""),
        (123, "pve3", 4, ""),
    ]);
    let z = sim_zone(&doc, 4.0, "", |_| {});
    let poller = Poller::start_with(&z, Box::new(breaches));
    migrate_by_hand(&z, 116, "pve1", "pve3", 512.0 * 1024.0);
    let run = spawn_logged(&z, &["evacuate", "pve3"]);
    until("the run's first migration is done", || {
        let on = z.guests_on("pve3");
        [103, 121, 122, 123]
            .iter()
            .filter(|v| on.contains(v))
            .count()
            < 4
    });
    migrate_by_hand(&z, 117, "pve4", "pve3", 1024.0 * 1024.0);
    let (code, out, err) = finished(run);
    let (_, found) = poller.finish();
    assert!(found.is_empty(), "{found:#?}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("116 (pve1 → pve3), in flight and not started by this run, ended)"),
        "{out}"
    );
    assert!(z.guests_on("pve3").is_empty(), "{out}\n{err}");
    assert!(!migrating(&z, 116) && !migrating(&z, 117));
    assert!(!out.contains("still running on the emptied node"), "{out}");
}

#[test]
fn a_run_that_gives_up_waiting_says_the_migration_is_still_in_flight() {
    // Someone moves 108 off pve2 at 1 KiB/s: it outlasts the run's wait (timeout-secs = 1).
    let doc = cluster(&[
        (108, "pve2", 8, "flxp.affinity.cache"),
        (109, "pve2", 8, "flxp.affinity.cache"),
        (111, "pve1", 4, ""),
    ]);
    let z = sim_zone(&doc, 100_000.0, "timeout-secs = 1\n", |_| {});
    migrate_by_hand(&z, 108, "pve2", "pve1", 1.0);
    let (code, out, err) = run_logged(&z, &["evacuate", "pve2"]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains("migrations=108 (pve2 → pve1)"),
        "it says what it waits for: {err}"
    );
    assert!(
        out.contains(
            "still running on the emptied node(s) (2):\n  108 vm-108 on pve2: its migration to \
             pve1, not started by this run, was still in flight when the run gave up waiting for \
             it after 1 s (timeout-secs)\n  109 vm-109 on pve2: moves only with \
             flxp.affinity.cache, and 108 stays (locked (migrate))"
        ),
        "{out}"
    );
    assert!(migrating(&z, 108));
}
