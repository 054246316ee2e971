//! `flxp rolling`: nodes taken through maintenance one at a time against the simulator — each
//! rebooted once, every guest home at the end, the progress kept in Proxmox so that a run killed
//! halfway (`kill -9`) is finished by the next one, and a failing hook stopping the run.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::cli_balance::{DEMO, SimZone, sim_zone};
use super::temp_file;

/// The demo zone at a time scale that keeps the simulator light (a reboot takes a few seconds).
fn zone() -> SimZone {
    sim_zone(DEMO, 50.0, "", |_| {})
}

/// Where every guest is.
pub(crate) fn placement(z: &SimZone) -> BTreeMap<u32, String> {
    z.sim
        .world()
        .guests
        .values()
        .map(|g| (g.vmid, g.node.clone()))
        .collect()
}

/// When each node booted (simulated time).
pub(crate) fn boots(z: &SimZone) -> BTreeMap<String, f64> {
    z.sim
        .world()
        .nodes
        .values()
        .map(|n| (n.name.clone(), n.booted_at))
        .collect()
}

/// No flxp line left in any node's notes.
fn assert_notes_clean(z: &SimZone) {
    for n in ["pve1", "pve2", "pve3", "pve4"] {
        let notes = z.notes(n);
        assert!(
            !notes.contains("flxp-rolling")
                && !notes.contains("flxp-home")
                && !notes.contains("flxp.maintenance"),
            "{n}: {notes}"
        );
    }
}

/// Waits until pve2's line says it waits for its reboot, while `child` (the run) goes on.
fn wait_until_pve2_waits_for_its_reboot(z: &SimZone, child: &mut Child) {
    let start = Instant::now();
    while !z.notes("pve1").contains("node=pve2 step=waiting") {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "never rebooting"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `flxp ARGS --zone lab --config CFG` without waiting for it.
pub(crate) fn spawn(z: &SimZone, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_flxp"))
        .args(args)
        .args(["--zone", "lab", "--config", z.config()])
        .env_remove("FLXP_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn each_node_is_rebooted_once_and_every_guest_comes_home() {
    let z = zone();
    let before = placement(&z);
    let booted = boots(&z);
    // pve1 holds the zone's lease in its notes: it is rebooted too.
    let (code, out, err) = z.run(&["rolling", "pve2", "pve1"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        out.contains("rolling maintenance done: 2 node(s) done by this run"),
        "{out}"
    );
    let after = boots(&z);
    assert!(after["pve1"] > booted["pve1"], "pve1 rebooted");
    assert!(after["pve2"] > booted["pve2"], "pve2 rebooted");
    assert_eq!(after["pve3"], booted["pve3"]);
    assert_eq!(after["pve4"], booted["pve4"]);
    assert_eq!(placement(&z), before);
    assert_notes_clean(&z);
}

#[test]
fn a_run_killed_halfway_is_finished_by_the_next_one() {
    let z = zone();
    let before = placement(&z);
    let booted = boots(&z);
    let mut child = spawn(&z, &["rolling", "pve2", "pve1"]);
    // Killed once pve2 is on its way down: its line says it waits for the reboot.
    wait_until_pve2_waits_for_its_reboot(&z, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    // The rerun waits out the lease the killed run left, then goes on where it stopped.
    let (code, out, err) = z.run(&["rolling", "pve2", "pve1", "--wait", "120"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(err.contains("pve2: continuing at step waiting"), "{err}");
    let after = boots(&z);
    assert!(after["pve1"] > booted["pve1"]);
    assert!(after["pve2"] > booted["pve2"]);
    assert!(
        after["pve2"] < after["pve1"],
        "pve2 was not rebooted again after pve1"
    );
    assert_eq!(placement(&z), before);
    assert_notes_clean(&z);
}

#[test]
fn sigterm_during_the_reboot_wait_stops_the_run_with_its_report_and_a_rerun_continues() {
    let z = zone();
    let before = placement(&z);
    let mut child = Command::new(env!("CARGO_BIN_EXE_flxp"))
        .args([
            "rolling",
            "pve2",
            "pve1",
            "--zone",
            "lab",
            "--config",
            z.config(),
        ])
        .env_remove("FLXP_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_pve2_waits_for_its_reboot(&z, &mut child);
    super::sigterm(&child);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // Not killed by the signal: it says why it stopped, gives the lease back and keeps the step.
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{stdout}");
    assert!(stderr.contains("stopping: no new migrations"), "{stderr}");
    assert!(
        stdout.contains(
            "stopped (exit code 1): node pve2 stopped at step waiting: the run was stopped"
        ),
        "{stdout}"
    );
    let notes = z.notes("pve1");
    assert!(z.lease_free("pve1"), "{notes}");
    assert!(notes.contains("node=pve2 step=waiting"), "{notes}");
    // The rerun needs no wait for a lease, and goes on where the first stopped.
    let (code, out, err) = z.run(&["rolling", "pve2", "pve1"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(err.contains("pve2: continuing at step waiting"), "{err}");
    assert_eq!(placement(&z), before);
    assert_notes_clean(&z);
}

#[test]
fn a_failing_hook_stops_the_run_and_a_rerun_continues() {
    let z = zone();
    let before = placement(&z);
    let booted = boots(&z);
    let (_d, failing) = temp_file("hook.sh", "echo 'apt: no space left' >&2\nexit 7\n");
    let hook = format!("sh {}", failing.display());
    let (code, out, err) = z.run(&["rolling", "pve2", "--hook", &hook]);
    assert_eq!(code, 1, "{err}\n{out}");
    assert!(
        out.contains(&format!(
            "stopped (exit code 1): node pve2 stopped at step hook: hook \"{hook}\" failed \
             (exit code 7): apt: no space left; fix the cause"
        )),
        "{out}"
    );
    // Left as it stopped: empty, in maintenance, not rebooted.
    assert!(z.notes("pve2").contains("flxp.maintenance"));
    assert!(
        z.notes("pve1")
            .contains("node=pve2 step=hook boot=0 error=hook%20\"sh%20")
    );
    assert_eq!(boots(&z)["pve2"], booted["pve2"]);
    // "Nothing to do" (exit 10): no reboot, the guests come home.
    let (_d2, nothing) = temp_file("hook.sh", "exit 10\n");
    let hook = format!("sh {}", nothing.display());
    let (code, out, err) = z.run(&["rolling", "pve2", "--hook", &hook]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        err.contains("pve2: hook says nothing to do: no reboot"),
        "{err}"
    );
    assert_eq!(boots(&z)["pve2"], booted["pve2"]);
    assert_eq!(placement(&z), before);
    assert_notes_clean(&z);
}

#[test]
fn a_node_whose_guests_fit_nowhere_else_is_not_taken_out() {
    let z = zone();
    // 141 needs the gpu label only pve3 has.
    let (code, out, err) = z.run(&["rolling", "pve3"]);
    assert_eq!(code, 3, "{err}\n{out}");
    assert!(
        out.contains("stopped (exit code 3): node pve3 is not taken out: 1 guest(s) fit on no other node: 141"),
        "{out}"
    );
    assert_notes_clean(&z);
    let (code, out, _) = z.run(&["rolling", "--dry-run"]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("141 gpu-worker fits on no other node"),
        "{out}"
    );
    assert!(out.starts_with("pve1: evacuate 7 migration(s), "), "{out}");
}

#[test]
fn a_dry_run_says_on_stderr_each_node_as_it_is_planned() {
    let z = zone();
    let (code, out, err) = z.run(&["rolling", "--dry-run", "pve4", "pve1", "pve2"]);
    assert_eq!(code, 0, "{err}\n{out}");
    let told: Vec<&str> = err.lines().filter(|l| l.starts_with("node ")).collect();
    assert_eq!(
        told,
        [
            "node 1/3 planned: pve4, 3 migration(s)",
            "node 2/3 planned: pve1, 7 migration(s)",
            "node 3/3 planned: pve2, 5 migration(s)"
        ],
        "{err}"
    );
    // The schedule itself stays on stdout, in the order given.
    assert!(out.starts_with("pve4: evacuate "), "{out}");
    assert!(!out.contains("planned:"), "{out}");
}

#[test]
fn a_node_named_twice_is_scheduled_once_as_the_run_does_it() {
    let z = zone();
    let (code, out, err) = z.run(&["rolling", "--dry-run", "pve4", "pve1", "pve4", "pve1"]);
    assert_eq!(code, 0, "{err}\n{out}");
    let told: Vec<&str> = err.lines().filter(|l| l.starts_with("node ")).collect();
    assert_eq!(
        told,
        [
            "node 1/2 planned: pve4, 3 migration(s)",
            "node 2/2 planned: pve1, 7 migration(s)"
        ],
        "{err}"
    );
    assert_eq!(out.matches("pve4: evacuate ").count(), 1, "{out}");
}

#[test]
fn a_running_guest_left_stops_the_run_before_the_reboot_unless_stop_left() {
    let z = zone();
    let before = placement(&z);
    let booted = boots(&z);
    // 151 is tagged flxp.ignore and runs on pve4.
    let (code, out, err) = z.run(&["rolling", "pve4"]);
    assert_eq!(code, 1, "{err}\n{out}");
    assert!(
        out.contains(
            "stopped (exit code 1): node pve4 stopped at step evacuating: 1 running guest(s) still \
             on it, a reboot would stop them: 151 (tagged flxp.ignore"
        ),
        "{out}"
    );
    assert_eq!(boots(&z)["pve4"], booted["pve4"]);
    let (code, out, err) = z.run(&["rolling", "pve4", "--stop-left"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(boots(&z)["pve4"] > booted["pve4"]);
    assert_eq!(placement(&z), before);
    assert!(!z.sim.world().guests[&151].running, "stopped by the reboot");
    assert_notes_clean(&z);
}
