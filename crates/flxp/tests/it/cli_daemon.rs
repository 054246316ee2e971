//! `flxp daemon`: balances a live zone at its interval and exits 0 on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::cli_balance::{DEMO, SimZone, UNBALANCED, fast_zone, sim_zone};
use super::{run, sigterm, temp_file};

/// The daemon's config of the balancing tests: a round a second, acting at once.
const BALANCING: &str = "\n[daemon]\ninterval-secs = 1\n\n[balance.trigger]\nhold = 1\n";

/// `flxp daemon` on the zone, logging at info on a piped stderr (not yet started).
pub fn daemon_command(z: &SimZone) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flxp"));
    cmd.args(["daemon", "--config", z.config()])
        .env_remove("FLXP_CONFIG")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Starts `flxp daemon` on the zone (see [`daemon_command`]).
fn spawn_daemon(z: &SimZone) -> Child {
    daemon_command(z).spawn().unwrap()
}

/// The child's stderr up to and including the first line holding `needle` (or all of it). The
/// pipe goes back to the child afterwards, so it stays open while the child runs on.
pub fn stderr_until(child: &mut Child, needle: &str) -> String {
    let mut seen = String::new();
    let Some(pipe) = child.stderr.take() else {
        return seen;
    };
    let mut reader = BufReader::new(pipe);
    let mut line = String::new();
    while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
        seen.push_str(&line);
        let found = line.contains(needle);
        line.clear();
        if found {
            break;
        }
    }
    child.stderr = Some(reader.into_inner());
    seen
}

#[test]
fn the_daemon_balances_a_zone_and_stops_on_sigterm() {
    let z = fast_zone(UNBALANCED, BALANCING);
    let child = spawn_daemon(&z);
    let start = Instant::now();
    // pve1 starts with 12 busy guests; the daemon moves some away.
    while z.guests_on("pve1").len() >= 12 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let moved = 14 - z.guests_on("pve1").len();
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(moved >= 3, "{moved} guests moved: {err}");
    assert!(err.contains("daemon started"), "{err}");
    assert!(err.contains("daemon stopped"), "{err}");
    let locked = z.sim.world().guests.values().any(|g| g.lock().is_some());
    assert!(!locked, "no migration left running after exit");
}

#[test]
fn a_config_without_zones_is_refused() {
    let (_d, f) = temp_file("flxp.toml", "[daemon]\ninterval-secs = 60\n");
    let (code, _, err) = run(&["daemon", "--config", f.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("no zone to manage"), "{err}");
}

#[test]
fn a_node_reserve_for_a_node_of_no_zone_is_logged_once_at_start() {
    let z = fast_zone(
        UNBALANCED,
        "\n[daemon]\ninterval-secs = 60\n\n[placement]\nnode-reserve = { pve9 = \"1G\" }\n",
    );
    let mut child = spawn_daemon(&z);
    let seen = stderr_until(&mut child, "daemon started");
    let _ = child.kill();
    let _ = child.wait();
    let want = "placement.node-reserve names node \"pve9\", which is not in zone lab (nodes: ";
    assert_eq!(seen.matches(want).count(), 1, "{seen}");
}

#[test]
fn a_second_stop_signal_quits_without_waiting() {
    // Slow migrations (tens of seconds): the first one is still running when both signals arrive,
    // even on a loaded machine.
    let z = sim_zone(UNBALANCED, 0.2, BALANCING, |_| {});
    let mut child = spawn_daemon(&z);
    z.wait_until_migrating();
    sigterm(&child);
    let seen = stderr_until(&mut child, "stop requested");
    assert!(seen.contains("stop requested"), "{seen}");
    sigterm(&child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{seen}");
    assert!(z.migrating(), "it quit while the migration still ran");
}

#[test]
fn a_guest_that_cannot_leave_a_node_in_maintenance_is_named_with_its_reason() {
    let mut pinned = 0u64;
    let z = sim_zone(
        UNBALANCED,
        100_000.0,
        "\n[daemon]\ninterval-secs = 1\n\n[overrides.lab.pve1]\nmaintenance = true\n",
        |v| {
            let guest = v["resources"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|r| r["type"] == "qemu" && r["node"] == "pve1")
                .unwrap();
            guest["tags"] = "flxp.node.pve1".into();
            pinned = guest["vmid"].as_u64().unwrap();
        },
    );
    let mut child = spawn_daemon(&z);
    let seen = stderr_until(&mut child, "guest stays");
    let _ = child.kill();
    let _ = child.wait();
    let line = seen
        .lines()
        .find(|l| l.contains("guest stays"))
        .unwrap_or_else(|| panic!("no guest named:\n{seen}"));
    assert!(line.contains(&format!("vmid={pinned}")), "{line}");
    assert!(line.contains("flxp.node"), "{line}");
}

#[test]
fn the_daemon_goes_on_when_its_log_reader_goes_away() {
    let z = fast_zone(UNBALANCED, BALANCING);
    let mut child = spawn_daemon(&z);
    let seen = stderr_until(&mut child, "daemon started");
    assert!(seen.contains("daemon started"), "{seen}");
    drop(child.stderr.take());
    // It goes on balancing with nobody reading its log (it used to panic on the first line).
    let start = Instant::now();
    while z.guests_on("pve1").len() >= 12 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(z.guests_on("pve1").len() < 12, "nothing moved");
    assert!(child.try_wait().unwrap().is_none(), "the daemon died");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_daemon_switches_a_node_off_at_low_load() {
    let z = fast_zone(
        DEMO,
        "\n[daemon]\ninterval-secs = 1\n\n[consolidate]\nenabled = true\nshutdown = true\nmin-interval-secs = 0\n",
    );
    let mut child = spawn_daemon(&z);
    // Read the log as it comes: the round explains itself only after the switch-off.
    let pipe = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut err = String::new();
    while (z.sim.world().nodes["pve2"].online || !err.contains("below consolidate-below"))
        && Instant::now() < deadline
    {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            err.push_str(&line);
            err.push('\n');
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(!z.sim.world().nodes["pve2"].online, "{err}");
    assert!(z.guests_on("pve2").is_empty());
    assert!(err.contains("power_saving=true"), "{err}");
    assert!(err.contains("below consolidate-below"), "{err}");
}
