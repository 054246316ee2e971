//! Two `flxp daemon` replicas on one zone with `[lease] enabled`: exactly one acts; killed, the
//! other takes over within TTL + margin + one renewal.

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cli_balance::{DEMO, SimZone, UNBALANCED, fast_zone, sim_zone};
use super::cli_consolidate::kept;
use super::cli_daemon::daemon_command;

/// Freed nodes are switched off, and the zone's lease is on.
const SHUTDOWN_LEASED: &str = "\n[consolidate]\nshutdown = true\n\n[lease]\nenabled = true\n";

const TTL: u64 = 6;
const MARGIN: u64 = 2;

/// A `flxp daemon` whose stderr is collected by a thread.
struct Replica {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Replica {
    fn spawn(z: &SimZone) -> Self {
        let mut child = daemon_command(z).env("NO_COLOR", "1").spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Self { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    fn has(&self, needle: &str) -> bool {
        self.log().contains(needle)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Migration tasks in the simulator's task log: (vmid, start, end).
fn migrations(z: &SimZone) -> Vec<(String, i64, Option<f64>)> {
    z.sim
        .world()
        .tasks
        .all()
        .iter()
        .filter(|t| t.kind.ends_with("migrate"))
        .map(|t| (t.id.clone(), t.starttime, t.ended))
        .collect()
}

#[test]
fn of_two_replicas_one_acts_and_the_other_takes_over_when_it_dies() {
    // Real-time simulated clock: the lease's expiry is read from the simulator's `Date` header.
    // Held all the time (what this test is about): while acting only, the replicas would take
    // turns between rounds.
    let z = sim_zone(
        UNBALANCED,
        1.0,
        &format!(
            "\n[daemon]\ninterval-secs = 1\n\n[balance.trigger]\nhold = 1\n\n[lease]\nenabled = true\nhold = \"always\"\nttl-secs = {TTL}\nmargin-secs = {MARGIN}\n"
        ),
        |_| {},
    );
    let mut replicas = vec![Replica::spawn(&z), Replica::spawn(&z)];
    wait_for(
        "a replica to take the lease",
        Duration::from_secs(60),
        || replicas.iter().any(|r| r.has("lease taken")),
    );
    let first = usize::from(!replicas[0].has("lease taken"));
    let mut holder = replicas.remove(first);
    let standby = replicas.remove(0);
    z.wait_until_migrating();
    wait_for("the standby's log line", Duration::from_secs(30), || {
        standby.has("standby: zone lab is held by")
    });
    // Exactly one acts: the standby never took the lease, never planned, and said so once.
    let s = standby.log();
    assert!(!s.contains("lease taken"), "both took the lease:\n{s}");
    assert!(!s.contains("plan made"), "the standby planned:\n{s}");
    assert_eq!(s.matches("standby: zone lab is held by").count(), 1, "{s}");
    assert!(holder.has("plan made"), "{}", holder.log());
    // Its start and its renewals never collide with each other (they wrote with one digest).
    let h = holder.log();
    assert!(!h.contains("cannot renew or take the lease"), "{h}");
    assert_eq!(h.matches("lease taken").count(), 1, "{h}");

    // The holder dies without releasing its lease.
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let killed = Instant::now();
    let killed_sim = z.sim.now();
    let before = migrations(&z).len();
    wait_for("the takeover", Duration::from_secs(60), || {
        standby.has("lease taken")
    });
    let takeover = killed.elapsed();
    eprintln!("takeover after {takeover:?} (TTL {TTL} s, margin {MARGIN} s)");
    // Renewals every TTL/3; plus generous slack for a loaded machine.
    assert!(
        takeover < Duration::from_secs(TTL + MARGIN + TTL / 3 + 20),
        "takeover took {takeover:?}"
    );
    // The survivor acts: it plans and starts migrations of its own.
    wait_for("the survivor's migrations", Duration::from_secs(90), || {
        standby.has("plan made") && migrations(&z).len() > before
    });
    // The task log: no guest ever had two migrations at once (two replicas moving it).
    let tasks = migrations(&z);
    for (i, (vmid, _, end)) in tasks.iter().enumerate() {
        for (other, s2, _) in &tasks[i + 1..] {
            if other == vmid {
                let ended = end.unwrap_or(f64::MAX);
                assert!(
                    *s2 as f64 >= ended.floor(),
                    "vmid {vmid} migrated twice at once: {tasks:?}"
                );
            }
        }
    }
    assert!(
        tasks
            .iter()
            .any(|(_, start, _)| *start as f64 >= killed_sim.floor()),
        "no migration started after the kill: {tasks:?}"
    );
}

#[test]
fn a_balance_run_refuses_while_another_flxp_holds_the_lease() {
    let z = sim_zone(UNBALANCED, 1.0, "\n[lease]\nenabled = true\n", |_| {});
    let expires = z.sim.now() as i64 + 3600;
    z.sim.world().nodes.get_mut("pve1").unwrap().notes =
        format!("<!-- flxp-lease zone=lab holder=other-host:7:ab expires={expires} -->");
    let before = z.guests_on("pve1");
    let (code, _, err) = z.run(&["balance"]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("zone lab is held by another flxp (other-host:7:ab)"),
        "{err}"
    );
    assert_eq!(z.guests_on("pve1"), before, "nothing moved");
    // A dry run needs no lease.
    let (code, _, err) = z.run(&["balance", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
}

/// Another flxp's lease of zone lab on pve1, valid for a billion simulated seconds (hours of
/// real time at the fastest time scale here).
fn held_by_another(z: &SimZone) {
    let expires = z.sim.now() as i64 + 1_000_000_000;
    let mut w = z.sim.world();
    let n = w.nodes.get_mut("pve1").unwrap();
    n.notes = format!(
        "{}\n<!-- flxp-lease zone=lab holder=other-host:7:ab expires={expires} -->",
        n.notes
    );
}

fn all_notes(z: &SimZone) -> Vec<(String, String)> {
    let w = z.sim.world();
    w.nodes
        .values()
        .map(|n| (n.name.clone(), n.notes.clone()))
        .collect()
}

#[test]
fn a_refused_evacuation_or_consolidation_writes_no_mark() {
    let z = fast_zone(DEMO, SHUTDOWN_LEASED);
    held_by_another(&z);
    let before = all_notes(&z);
    let guests = z.guests_on("pve2");
    for args in [&["evacuate", "pve2"][..], &["consolidate"][..]] {
        let (code, _, err) = z.run(args);
        assert_ne!(code, 0, "{args:?}: {err}");
        assert!(
            err.contains("zone lab is held by another flxp (other-host:7:ab)"),
            "{args:?}: {err}"
        );
        assert_eq!(all_notes(&z), before, "{args:?} wrote a mark");
        assert_eq!(z.guests_on("pve2"), guests, "{args:?} moved a guest");
    }
}

#[test]
fn a_one_off_consolidation_keeps_the_lease_node() {
    let z = fast_zone(DEMO, SHUTDOWN_LEASED);
    // pve2 is the node a consolidation of the demo frees first: let it hold the lease.
    let text = std::fs::read_to_string(z.config()).unwrap();
    let text = text.replacen("[zones.lab]\n", "[zones.lab]\nlease-node = \"pve2\"\n", 1);
    std::fs::write(z.config(), text).unwrap();
    let guests = z.guests_on("pve2");
    let (v, out) = z.run_json(&["consolidate", "--json"]);
    let freed = v["consolidation"]["freed"].as_array().unwrap();
    assert!(freed.iter().all(|f| f["node"] != "pve2"), "{out}");
    let pve2 = kept(&v, "pve2");
    assert_eq!(pve2["because"], "required", "{out}");
    assert!(
        pve2["reason"]
            .as_str()
            .unwrap()
            .contains("holds flxp's lease of zone lab"),
        "{out}"
    );
    assert!(z.guests_on("pve2").len() >= guests.len());
    z.assert_in_service("pve2");
    // The run gave the lease up at its end.
    assert!(z.lease_free("pve2"), "{}", z.notes("pve2"));
}
