//! One actor per zone by default: two one-off runs started at the same moment on a zone with no
//! `[lease]` table never act at once. An independent poller reads the simulator's `/_sim/state`
//! all along and checks that no two members of an anti-affinity group ever share a node.

use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::cli_balance::{SimZone, TOKEN, sim_zone};

const GIB: u64 = 1 << 30;
const GROUPS: usize = 6;
/// Simulated seconds per real second: a 1 GiB migration takes 1 simulated second, 400 ms here.
/// Below 3, so that the lease (renewed every 10 real seconds) outlives a renewal period in the
/// simulated clock that judges its expiry.
const TIME_SCALE: f64 = 2.5;

/// Six anti-affinity groups of four, one member of each on pve1 to pve4; pve5 and pve6 empty.
/// Emptying pve1 and pve2 at once fits only if each group's two movers take different nodes.
fn six_groups_of_four() -> String {
    let mut resources = Vec::new();
    for n in 1..=6 {
        resources.push(json!({
            "id": format!("node/pve{n}"), "type": "node", "node": format!("pve{n}"),
            "status": "online", "maxcpu": 32, "cpu": 0.05, "maxmem": 64 * GIB, "mem": 4 * GIB,
            "maxdisk": 100 * GIB, "disk": 10 * GIB, "uptime": 864_000
        }));
        resources.push(json!({
            "id": format!("storage/pve{n}/ceph"), "type": "storage", "node": format!("pve{n}"),
            "storage": "ceph", "plugintype": "rbd", "shared": 1, "content": "images,rootdir",
            "status": "available", "maxdisk": 10_000 * GIB, "disk": 1_000 * GIB
        }));
    }
    for g in 0..GROUPS {
        for k in 0..4 {
            let vmid = 100 + g * 10 + k;
            resources.push(json!({
                "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid,
                "name": format!("g{g}-{k}"), "node": format!("pve{}", k + 1), "status": "running",
                "maxmem": GIB, "mem": GIB / 2, "maxcpu": 2, "cpu": 0.1, "maxdisk": 32 * GIB,
                "disk": 0, "uptime": 3600, "template": 0,
                "tags": format!("flxp.anti-affinity.g{g}")
            }));
        }
    }
    json!({ "resources": resources, "time": 1_764_400_000 }).to_string()
}

/// The zone above, with the default config: no `[lease]` table.
fn zone() -> SimZone {
    sim_zone(&six_groups_of_four(), TIME_SCALE, "", |_| {})
}

/// Breaches of anti-affinity in one `/_sim/state`: a migrating guest counts on its source and
/// on its target.
pub(crate) fn breaches(state: &Value) -> Vec<String> {
    let targets: Vec<(u64, &str)> = state["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["vmid"].as_u64().unwrap(), m["target"].as_str().unwrap()))
        .collect();
    let mut seen: std::collections::BTreeMap<(String, String), Vec<u64>> = Default::default();
    for g in state["guests"].as_array().unwrap() {
        let tags = g["tags"].as_str().unwrap_or_default();
        let Some(group) = tags
            .split([';', ','])
            .find_map(|t| t.strip_prefix("flxp.anti-affinity."))
        else {
            continue;
        };
        let vmid = g["vmid"].as_u64().unwrap();
        let mut nodes = vec![g["node"].as_str().unwrap()];
        nodes.extend(targets.iter().filter(|(v, _)| *v == vmid).map(|(_, t)| *t));
        for node in nodes {
            seen.entry((group.to_owned(), node.to_owned()))
                .or_default()
                .push(vmid);
        }
    }
    seen.into_iter()
        .filter(|(_, vmids)| vmids.len() > 1)
        .map(|((group, node), vmids)| format!("group {group} on {node}: {vmids:?}"))
        .collect()
}

/// What a poller checks in each `/_sim/state`: the breaches it finds (it may keep state between
/// reads).
pub(crate) type Check = Box<dyn FnMut(&Value) -> Vec<String> + Send>;

/// Reads `/_sim/state` over HTTP every 50 ms, from before `start` returns until stopped;
/// collects every breach seen.
pub(crate) struct Poller {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(usize, Vec<String>)>,
}

impl Poller {
    fn start(z: &SimZone) -> Self {
        Self::start_with(z, Box::new(breaches))
    }

    /// Polls with `check` instead of the anti-affinity check.
    pub(crate) fn start_with(z: &SimZone, mut check: Check) -> Self {
        let url = format!("{}/_sim/state", z.url());
        let (id, secret) = TOKEN.rsplit_once('=').unwrap();
        let auth = format!("PVEAPIToken={id}={secret}");
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&stop);
        // `start` returns once the first read is in: the poller watches before any run begins.
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let client = reqwest::Client::new();
                let (mut reads, mut found) = (0, Vec::new());
                // One last read after the stop: what the runs left behind counts too.
                loop {
                    let last = done.load(Ordering::SeqCst);
                    let v: Value = client
                        .get(&url)
                        .header("Authorization", &auth)
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    reads += 1;
                    if reads == 1 {
                        first_tx.send(()).unwrap();
                    }
                    for b in check(&v["data"]) {
                        // A breach that lasts shows once, at the first read that saw it.
                        if !found.iter().any(|f: &String| f.ends_with(&b)) {
                            found.push(format!("t={} {b}", v["data"]["time"]));
                        }
                    }
                    if last {
                        return (reads, found);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        });
        first_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the poller's first read of /_sim/state");
        Self { stop, thread }
    }

    /// Stops polling: how many reads, and every breach seen.
    pub(crate) fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// Starts `flxp ARGS --zone lab --config CFG` without waiting for it.
fn spawn(z: &SimZone, args: &[&str]) -> Child {
    spawn_as(args, "lab", z.config())
}

/// Starts `flxp ARGS --zone ZONE --config CONFIG` without waiting for it.
fn spawn_as(args: &[&str], zone: &str, config: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_flxp"))
        .args(args)
        .args(["--zone", zone, "--config", config])
        .env_remove("FLXP_CONFIG")
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Exit code, stderr and pid of a finished run.
struct Ran {
    code: i32,
    err: String,
    pid: u32,
}

fn finish(child: Child) -> Ran {
    let pid = child.id();
    let Output { status, stderr, .. } = child.wait_with_output().unwrap();
    Ran {
        code: status.code().unwrap_or(-1),
        err: String::from_utf8(stderr).unwrap(),
        pid,
    }
}

/// Runs two commands started together while the poller watches; both results and the breaches.
fn race(z: &SimZone, a: &[&str], b: &[&str]) -> (Ran, Ran, Vec<String>) {
    let poller = Poller::start(z);
    let (x, y) = (spawn(z, a), spawn(z, b));
    let (x, y) = (finish(x), finish(y));
    // The poller read once before the runs began and once after both ended; how often in
    // between depends on how long the winner ran, so it is not asserted.
    let (_, found) = poller.finish();
    (x, y, found)
}

/// Checks that `loser` was refused, naming `winner` as the holder running `command`, with
/// nothing written.
fn assert_refused_by(loser: &Ran, winner: &Ran, command: &str) {
    assert_eq!(loser.code, 1, "{}", loser.err);
    let holder = format!(":{}:", winner.pid);
    assert!(
        loser.err.contains("zone lab is held by another flxp (")
            && loser.err.contains(&holder)
            && loser
                .err
                .contains(&format!("running `flxp {command}`) until ")),
        "the refusal names the holder {holder}: {}",
        loser.err
    );
    assert!(
        loser.err.contains("nothing was changed")
            && loser.err.contains("--wait SECS")
            && loser
                .err
                .contains("A lease left by a flxp that was killed ends by itself"),
        "{}",
        loser.err
    );
}

#[test]
fn two_evacuations_started_together_never_act_at_once() {
    for attempt in 0..3 {
        let z = zone();
        let (one, two, found) = race(&z, &["evacuate", "pve1"], &["evacuate", "pve2"]);
        assert!(found.is_empty(), "attempt {attempt}: {found:#?}");
        let (winner, loser, emptied, kept) = if one.code == 0 {
            (&one, &two, "pve1", "pve2")
        } else {
            (&two, &one, "pve2", "pve1")
        };
        assert_eq!(winner.code, 0, "attempt {attempt}: {}", winner.err);
        assert_refused_by(loser, winner, "evacuate");
        assert!(z.guests_on(emptied).is_empty(), "attempt {attempt}");
        assert_eq!(
            z.guests_on(kept).len(),
            GROUPS,
            "the refused run moved a guest"
        );
        assert!(
            !z.notes(kept).contains("flxp.maintenance"),
            "the refused run wrote its mark"
        );
        // The winner gave the lease up at its end.
        assert!(z.lease_free("pve1"), "{}", z.notes("pve1"));
    }
}

#[test]
fn two_configs_naming_the_cluster_differently_share_its_one_lease() {
    // The lease belongs to the cluster, not to a config's zone name: with one config calling it
    // `lab` and another `lab2`, each took a lease of its own and both evacuated at once.
    let z = zone();
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("lab2.toml");
    let text = std::fs::read_to_string(z.config()).unwrap();
    assert!(text.contains("[zones.lab]"), "{text}");
    std::fs::write(&other, text.replace("[zones.lab]", "[zones.lab2]")).unwrap();
    let poller = Poller::start(&z);
    let (x, y) = (
        spawn(&z, &["evacuate", "pve1"]),
        spawn_as(&["evacuate", "pve2"], "lab2", other.to_str().unwrap()),
    );
    let (one, two) = (finish(x), finish(y));
    let (_, found) = poller.finish();
    assert!(found.is_empty(), "{found:#?}");
    assert_eq!(
        [one.code, two.code].iter().filter(|&&c| c == 0).count(),
        1,
        "exactly one acted:\n{}\n{}",
        one.err,
        two.err
    );
    let loser = if one.code == 0 { &two } else { &one };
    assert_eq!(loser.code, 1, "{}", loser.err);
    assert!(
        loser.err.contains("is held by another flxp ("),
        "{}",
        loser.err
    );
}

#[test]
fn with_wait_the_second_evacuation_runs_after_the_first() {
    let z = zone();
    let (one, two, found) = race(
        &z,
        &["evacuate", "pve1", "--wait", "120"],
        &["evacuate", "pve2", "--wait", "120"],
    );
    assert!(found.is_empty(), "{found:#?}");
    assert_eq!((one.code, two.code), (0, 0), "{}\n{}", one.err, two.err);
    assert!(
        one.err.contains("waiting up to") != two.err.contains("waiting up to"),
        "exactly one waited:\n{}\n{}",
        one.err,
        two.err
    );
    // The whole wait given, not a second less.
    assert!(
        one.err.contains("waiting up to 120 s") || two.err.contains("waiting up to 120 s"),
        "{}\n{}",
        one.err,
        two.err
    );
    assert!(z.guests_on("pve1").is_empty() && z.guests_on("pve2").is_empty());
    // Each group now has one member on each of pve3 to pve6.
    assert_eq!(z.guests_on("pve5").len(), GROUPS);
    assert_eq!(z.guests_on("pve6").len(), GROUPS);
}

#[test]
fn a_balance_and_an_evacuation_started_together_never_act_at_once() {
    let z = zone();
    let (balance, evacuate, found) = race(&z, &["balance"], &["evacuate", "pve1"]);
    assert!(found.is_empty(), "{found:#?}");
    if balance.code == 0 {
        assert_refused_by(&evacuate, &balance, "balance");
        assert!(!z.notes("pve1").contains("flxp.maintenance"));
    } else {
        assert_eq!(evacuate.code, 0, "{}", evacuate.err);
        assert_refused_by(&balance, &evacuate, "evacuate");
        assert!(z.guests_on("pve1").is_empty());
    }
}

/// Starts `flxp daemon` or `flxp serve` as `cmd` says, with few log lines: the pipe is read only
/// if it fails to start.
fn quiet(cmd: &mut std::process::Command) -> Child {
    cmd.env("RUST_LOG", "warn")
        .env("FLXP_API_TOKEN", "lease-test-operator-token")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts `flxp daemon` or `flxp serve` on the zone and waits until it holds the lease.
fn holding(z: &SimZone, command: &str) -> Child {
    let mut cmd = match command {
        "daemon" => super::cli_daemon::daemon_command(z),
        _ => super::serve_command::serve_command(&z.config),
    };
    let mut child = quiet(&mut cmd);
    let start = std::time::Instant::now();
    while !z.notes("pve1").contains(&format!("command={command} ")) {
        if start.elapsed() > Duration::from_secs(60) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            panic!("`flxp {command}` took no lease: {}\n{err}", z.notes("pve1"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[test]
fn a_run_beside_a_daemon_or_serve_is_refused_naming_it() {
    // An hour between rounds: the holder acts at its start, then only keeps the lease (held all
    // the time, what this test is about).
    for command in ["daemon", "serve"] {
        let z = sim_zone(
            &six_groups_of_four(),
            TIME_SCALE,
            "\n[daemon]\ninterval-secs = 3600\n\n[lease]\nhold = \"always\"\n",
            |_| {},
        );
        let mut holder = holding(&z, command);
        let before = z.guests_on("pve3");
        let (code, _, err) = z.run(&["evacuate", "pve3"]);
        let (dry, _, dry_err) = z.run(&["evacuate", "pve3", "--dry-run"]);
        let (mark, _, mark_err) = z.run(&["maintenance", "pve3"]);
        let _ = holder.kill();
        let _ = holder.wait();
        assert_eq!(code, 1, "{command}: {err}");
        assert!(
            err.contains(&format!(":{}:", holder.id()))
                && err.contains(&format!("running `flxp {command}`) until "))
                && err.contains(&format!("That `flxp {command}` holds it while a round")),
            "{command}: {err}"
        );
        assert_eq!(z.guests_on("pve3"), before, "{command}");
        // Marking a node makes the holder empty it: refused too.
        assert_eq!(mark, 1, "{command}: {mark_err}");
        assert!(
            mark_err.contains(&format!("running `flxp {command}`) until ")),
            "{command}: {mark_err}"
        );
        assert!(!z.notes("pve3").contains("flxp.maintenance"), "{command}");
        // Planning needs no lease.
        assert_eq!(dry, 0, "{command}: {dry_err}");
    }
}

#[test]
fn a_run_beside_a_daemon_holding_only_while_acting_runs_between_its_rounds() {
    // The default `[lease] hold = "acting"`: the daemon holds the lease for its first round only;
    // a one-off run after that round acts (held all the time, it would wait 20 s and give up).
    let z = sim_zone(
        &six_groups_of_four(),
        TIME_SCALE,
        "\n[daemon]\ninterval-secs = 3600\n",
        |_| {},
    );
    let mut daemon = super::cli_daemon::daemon_command(&z).spawn().unwrap();
    let log = super::cli_daemon::stderr_until(&mut daemon, "next_in_secs=");
    assert!(
        log.contains("next_in_secs=3600"),
        "the first round ended: {log}"
    );
    // The round's release follows its end at once: the wait covers only that.
    let (code, _, err) = z.run(&["evacuate", "pve3", "--wait", "20"]);
    let alive = daemon.try_wait().unwrap().is_none();
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(alive, "the daemon ran beside the evacuation");
    assert_eq!(code, 0, "{err}");
    assert!(z.guests_on("pve3").is_empty());
    assert!(z.lease_free("pve1"), "{}", z.notes("pve1"));
}

#[test]
fn a_lease_left_by_a_daemon_killed_on_this_host_is_taken_at_once() {
    // `kill -9` leaves the daemon's lease valid for up to ttl + margin (35 simulated seconds,
    // 14 real ones here); the next flxp on the host sees the holder is gone and takes it. Held
    // all the time, so that the daemon holds it when killed.
    let z = sim_zone(
        &six_groups_of_four(),
        TIME_SCALE,
        "\n[daemon]\ninterval-secs = 3600\n\n[lease]\nhold = \"always\"\n",
        |_| {},
    );
    let mut daemon = holding(&z, "daemon");
    let pid = daemon.id();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let notes = z.notes("pve1");
    assert!(notes.contains(&format!(":{pid}:")), "{notes}");
    let (code, _, err) = z.run(&["evacuate", "pve3"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "the lease's holder, process {pid} on this host, is gone: taking the lease over"
        )),
        "{err}"
    );
    assert!(z.guests_on("pve3").is_empty());
}

#[test]
fn a_node_name_the_cluster_lacks_is_refused_before_the_lease_is_taken() {
    let z = zone();
    for args in [
        &["evacuate", "zulu"][..],
        &["maintenance", "zulu"],
        &["rolling", "pve3", "zulu"],
    ] {
        let (code, _, err) = z.run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(
                r#"node "zulu" is not in the cluster; nodes: pve1, pve2, pve3, pve4, pve5, pve6"#
            ),
            "{args:?}: {err}"
        );
    }
    // Not one write: the lease was neither taken nor given back.
    let writes: Vec<_> = z
        .sim
        .world()
        .records
        .requests
        .keys()
        .filter(|k| k.method != "GET")
        .cloned()
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}

#[test]
fn a_run_whose_lease_lapses_says_so_and_that_the_rest_was_not_started() {
    // pve2's six guests are slow (8 GiB, 8 s each at this time scale) and leave one at a time;
    // pve1 is full, so none goes there. The lease node pve1 goes offline soon after the run took
    // the lease: it cannot be renewed, and lapses ttl - margin (2 s) after its last renewal.
    let z = sim_zone(
        &six_groups_of_four(),
        1.0,
        "\n[lease]\nttl-secs = 3\nmargin-secs = 1\n",
        |v| {
            for r in v["resources"].as_array_mut().unwrap() {
                match (r["type"].as_str(), r["node"].as_str()) {
                    (Some("node"), Some("pve1")) => r["maxmem"] = (8 * GIB).into(),
                    (Some("qemu"), Some("pve2")) => {
                        r["maxmem"] = (8 * GIB).into();
                        r["mem"] = (8 * GIB).into();
                    }
                    _ => {}
                }
            }
        },
    );
    let run = spawn(&z, &["evacuate", "pve2", "--json"]);
    let start = std::time::Instant::now();
    while !z.notes("pve1").contains("command=evacuate ") {
        assert!(start.elapsed() < Duration::from_secs(30), "no lease taken");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    {
        let mut w = z.sim.world();
        w.set_online("pve1", false);
        w.record();
    }
    let out = run.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{stdout}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let lapsed = "the zone's lease lapsed (it could not be renewed in time): another flxp may act \
                  on the zone now";
    assert_eq!(v["execution"]["stopped"], lapsed, "{stdout}");
    let planned: std::collections::BTreeMap<u64, &str> = v["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["vmid"].as_u64().unwrap(), m["to"].as_str().unwrap()))
        .collect();
    let left = v["left_running"].as_array().unwrap();
    assert!(!left.is_empty(), "{stdout}");
    for l in left {
        let to = planned[&l["vmid"].as_u64().unwrap()];
        assert_eq!(
            l["reason"],
            format!("its migration to {to} was not started: the run stopped early: {lapsed}"),
            "{stdout}"
        );
    }
}
