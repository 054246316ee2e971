//! `flxp balance`: planning from a file (Contract 3 JSON, exit codes) and carrying out a plan in a
//! live zone (the simulator in-process).

use std::path::PathBuf;

use flxp_sim::{Scenario, Sim, SimHandle};
use serde_json::Value;

use super::{example, json, lab_config, on_example, on_file, run, temp_file};

pub const TOKEN: &str = "root@pam!flxp=0d9b2f4a-6c1e-4b7d-8e3f-5a2c1b0d9e8f";
pub const UNBALANCED: &str = include_str!("../../../flxp-sim/scenarios/unbalanced.json");
pub const DEMO: &str = include_str!("../../../flxp-sim/scenarios/demo.json");

/// A simulated zone on a free loopback port (plain HTTP) and a config file pointing at it.
pub struct SimZone {
    _runtime: tokio::runtime::Runtime,
    _handle: SimHandle,
    pub sim: Sim,
    _dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl SimZone {
    pub fn config(&self) -> &str {
        self.config.to_str().unwrap()
    }

    /// The simulator's base URL (plain HTTP on loopback).
    pub fn url(&self) -> String {
        format!("http://{}", self._handle.addr())
    }

    /// Runs `flxp` with `args` against this zone (`--zone lab --config …` appended).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = args.to_vec();
        all.extend(["--zone", "lab", "--config", self.config()]);
        run(&all)
    }

    /// Runs `flxp` with `args` against this zone, checks that it exits 0 and parses what it
    /// prints as JSON: the document and the text.
    pub fn run_json(&self, args: &[&str]) -> (Value, String) {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "{err}\n{out}");
        (json(&out), out)
    }

    /// The notes of every node, one after the other.
    pub fn all_notes(&self) -> String {
        self.sim
            .world()
            .nodes
            .values()
            .map(|n| n.notes.clone())
            .collect()
    }

    /// The node a guest is on now.
    pub fn node_of(&self, vmid: u32) -> String {
        self.sim.world().guests[&vmid].node.clone()
    }

    /// Whether a migration runs now (a guest holds the `migrate` lock).
    pub fn migrating(&self) -> bool {
        self.sim
            .world()
            .guests
            .values()
            .any(|g| g.lock() == Some("migrate"))
    }

    /// Waits (up to a minute) until a migration runs.
    pub fn wait_until_migrating(&self) {
        let start = std::time::Instant::now();
        while !self.migrating() && start.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(self.migrating(), "no migration started");
    }

    /// Checks that `node` is online and not marked for maintenance.
    pub fn assert_in_service(&self, node: &str) {
        let w = self.sim.world();
        assert!(w.nodes[node].online);
        assert!(!w.nodes[node].notes.contains("flxp.maintenance"));
    }

    /// A node's notes now.
    pub fn notes(&self, node: &str) -> String {
        self.sim.world().nodes[node].notes.clone()
    }

    /// Whether `node`'s notes hold no lease: no line, or one given back (`expires=0`).
    pub fn lease_free(&self, node: &str) -> bool {
        let notes = self.notes(node);
        flxp_engine::lease::find(&notes, "").is_none_or(|r| r.expires == flxp_engine::lease::FREE)
    }

    /// Guests on a node now.
    pub fn guests_on(&self, node: &str) -> Vec<u32> {
        let w = self.sim.world();
        w.guests
            .values()
            .filter(|g| g.node == node)
            .map(|g| g.vmid)
            .collect()
    }
}

/// Starts a scenario at a time scale, with `extra` appended to the config file.
pub fn sim_zone(
    doc: &str,
    time_scale: f64,
    extra: &str,
    tweak: impl FnOnce(&mut Value),
) -> SimZone {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sim = Sim::new(Scenario::variant(doc, time_scale, TOKEN, tweak).unwrap()).unwrap();
    let handle = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        SimHandle::spawn(listener, sim.clone(), None).unwrap()
    });
    let text = lab_config(
        &format!("http://{}", handle.addr()),
        TOKEN,
        &format!("\n[migration]\npoll-secs = 1\n{extra}"),
    );
    let (dir, config) = temp_file("flxp.toml", &text);
    SimZone {
        _runtime: runtime,
        _handle: handle,
        sim,
        _dir: dir,
        config,
    }
}

/// [`sim_zone`] at the fast time scale most tests use, the scenario as it is.
pub fn fast_zone(doc: &str, extra: &str) -> SimZone {
    sim_zone(doc, 100_000.0, extra, |_| {})
}

#[test]
fn a_plan_from_a_file_is_contract_3_json_and_only_a_plan() {
    let (code, out, err) = on_example("balance", "pvesh-4node.json", &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    for key in [
        "imbalance_before",
        "imbalance_after",
        "metric",
        "migrations",
        "nodes_before",
        "nodes_after",
        "violations_before",
        "violations_after",
        "warnings",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {out}");
    }
    let migrations = v["migrations"].as_array().unwrap();
    assert!(!migrations.is_empty());
    for m in migrations {
        for key in ["vmid", "type", "name", "from", "to", "reason"] {
            assert!(m.get(key).is_some(), "{key} missing in {m}");
        }
    }
    assert_eq!(v["metric"], "memory");
    assert_eq!(v["dry_run"], true);
    assert!(v.get("execution").is_none());
    assert!(v["imbalance_after"].as_f64().unwrap() < v["imbalance_before"].as_f64().unwrap());
}

#[test]
fn a_rule_no_node_can_satisfy_exits_3() {
    let (code, out, _) = on_example("balance", "rules-hetero.json", &["--json"]);
    assert_eq!(code, 3);
    let v = json(&out);
    let unplaced = v["unplaced"].as_array().unwrap();
    assert_eq!(unplaced.len(), 1, "{out}");
    assert_eq!(unplaced[0]["vmid"], 171);
    // The fixes still come first in the plan.
    assert_eq!(v["migrations"][0]["purpose"], "fix");
}

#[test]
fn no_allowed_move_above_the_threshold_exits_3() {
    let (code, out, err) = on_example(
        "balance",
        "pvesh-4node.json",
        &["--max-migrations", "0", "--json"],
    );
    assert_eq!(code, 3, "{err}");
    assert_eq!(json(&out)["migrations"], Value::Array(Vec::new()));
}

#[test]
fn the_method_is_chosen_on_the_command_line_and_checked() {
    let f = example("pvesh-4node.json");
    let f = f.to_str().unwrap();
    let (code, out, err) = on_file("balance", f, &["--method", "pve-topsis", "--json"]);
    assert!(code == 0 || code == 3, "{err}");
    assert_eq!(json(&out)["method"], "pve-topsis");
    let (code, _, err) = on_file("balance", f, &["--method", "fastest"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("possible values: flxp, pve-bruteforce, pve-topsis"),
        "{err}"
    );
    let (code, _, err) = run(&["balance"]);
    assert_eq!(code, 2);
    assert!(err.contains("--from-file"), "{err}");
}

#[test]
fn the_plan_for_people_is_a_table_with_reasons() {
    let (code, out, _) = on_example("balance", "pvesh-4node.json", &[]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("spread 41.6 pp → "), "{out}");
    assert!(out.contains(" #  VMID  NAME"), "{out}");
    assert!(out.contains("\nwhy:\n  1. balance memory: "), "{out}");
    assert!(out.contains(" NODE  STATUS  BEFORE  AFTER"), "{out}");
    assert!(
        out.contains("\nlower bound: any plan reaching spread "),
        "the plan says how far it is from the fewest migrations: {out}"
    );
}

#[test]
fn thorough_mode_reports_its_searches_and_the_plan_its_bounds() {
    let f = example("pvesh-4node.json");
    let (code, out, err) = on_file("balance", &f, &["--effort", "0.5", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let summary = v["summary"].as_str().unwrap();
    assert!(summary.contains("thorough mode: best of "), "{summary}");
    let bounds = &v["bounds"];
    let k = v["migrations"].as_array().unwrap().len() as u64;
    assert!(bounds["migrations"].as_u64().unwrap() <= k, "{bounds}");
    assert!(
        bounds["migrations_gap"].as_f64().unwrap() >= 1.0,
        "{bounds}"
    );
    let (code, _, err) = on_file("balance", &f, &["--effort", "-1"]);
    assert_ne!(code, 0);
    assert!(err.contains("effort-secs"), "{err}");
}

#[test]
fn a_soft_weight_is_read_and_a_negative_one_is_refused_naming_the_option() {
    let f = example("pvesh-4node.json");
    let (code, _, err) = on_file("balance", &f, &["--soft-weight", "5"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = on_file("balance", &f, &["--soft-weight=-1"]);
    assert_ne!(code, 0);
    assert!(err.contains("soft-weight"), "{err}");
}

#[test]
fn a_zone_is_balanced_for_real_and_a_second_run_finds_nothing_to_do() {
    let z = fast_zone(UNBALANCED, "");
    let (v, out) = z.run_json(&["balance", "--json"]);
    assert_eq!(v["dry_run"], false);
    let done = v["execution"]["done"].as_array().unwrap();
    let planned = v["migrations"].as_array().unwrap();
    assert_eq!(done.len(), planned.len(), "{out}");
    for m in planned {
        let vmid = u32::try_from(m["vmid"].as_u64().unwrap()).unwrap();
        assert_eq!(z.node_of(vmid), m["to"].as_str().unwrap());
    }
    assert!(v["execution"]["failed"].as_array().unwrap().is_empty());

    let (code, out, err) = z.run(&["balance", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert!(v["imbalance_before"].as_f64().unwrap() <= v["threshold"].as_f64().unwrap());
    assert_eq!(v["migrations"], Value::Array(Vec::new()));
    assert_eq!(v["dry_run"], true);
}

#[test]
fn a_failed_migration_in_a_zone_exits_1_and_is_reported() {
    // Plan first to learn which guest moves first, then make its migration fail.
    let z = fast_zone(UNBALANCED, "");
    let (_, out, _) = z.run(&["balance", "--dry-run", "--json"]);
    let first = json(&out)["migrations"][0]["vmid"].as_u64().unwrap();
    let z = sim_zone(UNBALANCED, 100_000.0, "", |v| {
        v["sim"]["faults"] = serde_json::json!({
            "fail_migrations": [{"vmid": first, "message": "migration aborted: no route to host"}]
        });
    });
    let (code, out, err) = z.run(&["balance", "--json"]);
    assert_eq!(code, 1, "{err}");
    let v = json(&out);
    let failed = v["execution"]["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{out}");
    assert_eq!(failed[0]["vmid"], first);
    assert_eq!(failed[0]["error"], "migration aborted: no route to host");
    assert!(
        !v["execution"]["done"].as_array().unwrap().is_empty(),
        "the rest goes on"
    );
    assert_eq!(z.node_of(u32::try_from(first).unwrap()), "pve1");
}

#[test]
fn human_output_of_a_run_ends_with_the_report() {
    let z = fast_zone(UNBALANCED, "");
    let (code, out, err) = z.run(&["balance"]);
    assert_eq!(code, 0, "{err}");
    let last = out.lines().last().unwrap();
    assert!(last.contains("migration(s) done in "), "{out}");
}

#[test]
fn a_reader_that_stops_reading_is_not_an_error() {
    // `flxp balance --json | head -1` used to exit 1 with "Broken pipe".
    use std::process::{Command, Stdio};
    let f = super::example("pvesh-4node.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flxp"))
        .args(["balance", "--from-file", f.to_str().unwrap(), "--json"])
        .env_remove("FLXP_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
}

#[test]
fn sigterm_mid_round_starts_nothing_new_and_waits_for_running_migrations() {
    use std::process::{Command, Stdio};
    // Slow enough that a migration is still running when the signal arrives.
    let z = sim_zone(UNBALANCED, 5.0, "", |_| {});
    let child = Command::new(env!("CARGO_BIN_EXE_flxp"))
        .args(["balance", "--zone", "lab", "--config", z.config(), "--json"])
        .env_remove("FLXP_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    z.wait_until_migrating();
    super::sigterm(&child);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "killed by the signal: {err}");
    assert!(err.contains("stopping: no new migrations"), "{err}");
    let v = json(&String::from_utf8_lossy(&out.stdout));
    let done = v["execution"]["done"].as_array().unwrap();
    let planned = v["migrations"].as_array().unwrap();
    assert!(
        !done.is_empty(),
        "the running migration was followed to its end"
    );
    assert!(
        done.len() < planned.len(),
        "nothing new started after SIGTERM"
    );
    for d in done {
        let vmid = u32::try_from(d["vmid"].as_u64().unwrap()).unwrap();
        assert_eq!(z.node_of(vmid), d["to"].as_str().unwrap());
    }
    assert!(!z.migrating(), "no migration left running after exit");
}

/// A cluster whose only problem is a rule no node satisfies exits 3, and the
/// first line says why instead of only "no balancing needed"; `--json` names it in `unmet`.
#[test]
fn an_unsatisfiable_rule_exits_3_and_the_headline_says_why() {
    let snapshot = r#"[
      {"type":"node","node":"a","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1},
      {"type":"node","node":"b","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1},
      {"type":"qemu","vmid":100,"name":"x","node":"a","status":"running","maxmem":4294967296,
       "mem":4294967296,"maxcpu":2,"cpu":0.1,"tags":"flxp.node.gone"}
    ]"#;
    let (_dir, path) = temp_file("unsat.json", snapshot);
    let (code, out, _) = on_file("balance", &path, &[]);
    assert_eq!(code, 3, "{out}");
    let first = out.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "not met (exit code 3): 1 guest(s) that must move fit on no node; 1 broken rule(s) cannot be fixed"
    );
    let (code, out, _) = on_file("balance", &path, &["--json"]);
    assert_eq!(code, 3);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["unmet"],
        serde_json::json!([
            "1 guest(s) that must move fit on no node",
            "1 broken rule(s) cannot be fixed"
        ])
    );
}

/// A negative number is a bad value of its option, not an unknown argument.
#[test]
fn a_negative_number_names_its_option() {
    let file = example("pvesh-4node.json");
    let (code, _, err) = on_file("place", &file, &["--memory", "-1", "--cores", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("invalid value '-1' for '--memory <SIZE>'"),
        "{err}"
    );
    let (code, _, err) = on_file("balance", &file, &["--max-migrations", "-3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'--max-migrations <N>'"), "{err}");
}

/// Proxmox's `test-crs-static-auto-rebalance2` as a snapshot: three equal nodes, four guests of
/// 2 CPUs and 8 GiB on node1, nothing measured yet, `crs: ha=static` (plus `extra` options).
fn four_on_node1(crs: &str) -> String {
    let b = four_on_node1_cluster();
    serde_json::to_string(&b.option("crs", crs.into()).snapshot()).unwrap()
}

/// The cluster of [`four_on_node1`] without its options.
fn four_on_node1_cluster() -> flxp_core::builder::ClusterBuilder {
    use flxp_core::builder::{ClusterBuilder, GIB, node, vm};
    let mut b = ClusterBuilder::new();
    for n in ["node1", "node2", "node3"] {
        b = b.node(node(n).cpus(24.0).memory(32 * GIB).load(0.0));
    }
    for vmid in 101..=104 {
        b = b.guest(
            vm(vmid, "node1")
                .hastate("started")
                .cores(2.0, 0.0)
                .mem(0, 8 * GIB),
        );
    }
    b
}

#[test]
fn static_mode_moves_one_guest_as_proxmox_does_and_says_so() {
    // Proxmox balances `ha=static` on configured sizes: it moves vm:101 to node2 (1.41 → 0.94).
    let (_dir, f) = temp_file("static.json", &four_on_node1("ha=static"));
    let f = f.to_str().unwrap();
    let args = ["balance", "--from-file", f, "--method", "pve-bruteforce"];
    let (code, out, err) = run(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["usage"]["mode"], "static", "{out}");
    assert_eq!(v["usage"]["from"], "crs ha=static");
    let moved: Vec<(u64, &str)> = v["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["vmid"].as_u64().unwrap(), m["to"].as_str().unwrap()))
        .collect();
    assert_eq!(moved, vec![(101, "node2")]);
    let (_, out, _) = run(&args);
    assert!(
        out.contains("\nusage: static (from crs ha=static)\n"),
        "{out}"
    );
    // `--usage dynamic` balances on measurements, and there are none: nothing moves.
    let (code, out, err) = run(&[&args[..], &["--usage", "dynamic", "--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["usage"]["mode"], "dynamic");
    assert_eq!(v["usage"]["from"], "the usage option");
    assert_eq!(v["migrations"], Value::Array(Vec::new()));
    let (code, _, err) = run(&[&args[..], &["--usage", "measured"]].concat());
    assert_eq!(code, 2);
    assert!(
        err.contains("possible values: auto, static, dynamic"),
        "{err}"
    );
}

#[test]
fn a_plan_that_moves_nothing_counts_why_in_json_and_for_people() {
    // Proxmox's auto-rebalance is on: HA guests are its to move, so flxp leaves them and says so.
    use flxp_core::builder::{ClusterBuilder, vm};
    let mut b = ClusterBuilder::new().nodes(&["a", "b", "c"]);
    for vmid in 101..=104 {
        b = b.guest(vm(vmid, "a").hastate("started"));
    }
    let snap = b
        .guest(vm(105, "a").locked("backup"))
        .guest(vm(106, "a").locked("backup"))
        .option("crs", "ha=dynamic,ha-auto-rebalance=1".into())
        .snapshot();
    let (_dir, f) = temp_file("ha.json", &serde_json::to_string(&snap).unwrap());
    let f = f.to_str().unwrap();
    // The pve-* methods replay Proxmox's auto-rebalance itself, so they may move the HA guests;
    // they leave the locked ones and never name Proxmox as the reason.
    let args = [
        "balance",
        "--from-file",
        f,
        "--method",
        "pve-bruteforce",
        "--json",
    ];
    let (_, out, err) = run(&args);
    let v = json(&out);
    assert_eq!(v["left_in_place"][0]["kind"], "locked", "{out}{err}");
    assert!(!out.contains("ha-auto-rebalance"), "{out}");
    let args = ["balance", "--from-file", f, "--method", "flxp"];
    let (code, out, err) = run(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 3, "{err}");
    let v = json(&out);
    assert_eq!(v["migrations"], Value::Array(Vec::new()));
    assert_eq!(v["left_in_place"][0]["kind"], "ha-auto-rebalance", "{out}");
    assert_eq!(v["left_in_place"][0]["count"], 4);
    assert_eq!(
        v["left_in_place"][1]["reason"],
        "2 guests are locked (backup)"
    );
    let (_, out, _) = run(&args);
    assert!(
        out.contains(
            "\nleft in place:\n  4 guests are HA-managed while Proxmox's auto-rebalance is on: left to Proxmox\n  2 guests are locked (backup)\n"
        ),
        "{out}"
    );
    assert!(!out.contains("no bundle can move"), "{out}");
}

#[test]
fn usage_with_a_method_that_ignores_it_is_a_warning_naming_the_flag() {
    let f = example("pvesh-4node.json");
    let f = f.to_str().unwrap();
    let args = |method| {
        [
            "balance",
            "--from-file",
            f,
            "--usage",
            "static",
            "--method",
            method,
        ]
    };
    let (code, _, err) = run(&args("flxp"));
    assert_ne!(code, 2, "{err}");
    assert!(
        err.contains("warning: --usage is ignored by method flxp"),
        "{err}"
    );
    let (_, _, err) = run(&args("pve-topsis"));
    assert!(!err.contains("--usage"), "{err}");
}

/// The demo's plan lowers the spread, so its lower bound names at
/// least one migration and the bytes of one.
#[test]
fn a_plan_that_lowers_the_spread_has_a_bound_of_at_least_one_migration() {
    let (_dir, f) = temp_file("demo.json", DEMO);
    let (code, out, err) = on_file("balance", &f, &["--json"]);
    assert!(code == 0 || code == 3, "{err}");
    let v = json(&out);
    let (before, after) = (
        v["imbalance_before"].as_f64().unwrap(),
        v["imbalance_after"].as_f64().unwrap(),
    );
    assert!(after < before, "{out}");
    assert!(
        v["bounds"]["migrations"].as_u64().unwrap() >= 1,
        "{}",
        v["bounds"]
    );
    assert!(
        v["bounds"]["bytes"].as_u64().unwrap() > 0,
        "{}",
        v["bounds"]
    );
}

/// a holds eight guests of 10 GiB memory and 50 GiB local disks; b and c have room on their
/// local storage for one guest's disks each, so the spread stays far above the threshold.
fn local_disks_snapshot() -> String {
    use flxp_core::builder::{ClusterBuilder, GIB, node, vm};
    let mut b = ClusterBuilder::new();
    for n in ["a", "b", "c"] {
        b = b.node(node(n).memory(100 * GIB));
    }
    b = b
        .storage("a", "local-lvm", false, 1000 * GIB, 400 * GIB)
        .storage("b", "local-lvm", false, 100 * GIB, 40 * GIB)
        .storage("c", "local-lvm", false, 100 * GIB, 40 * GIB);
    for vmid in 101..=108 {
        b = b.guest(
            vm(vmid, "a")
                .mem(10 * GIB, 10 * GIB)
                .local_disk("local-lvm", 50 * GIB),
        );
    }
    serde_json::to_string(&b.snapshot()).unwrap()
}

/// With local disks the bytes bound counts them, and a plan
/// that stops above the threshold exits 3 and says why.
#[test]
fn local_disks_count_in_the_bound_and_a_spread_left_above_the_threshold_exits_3() {
    let (_dir, f) = temp_file("disks.json", &local_disks_snapshot());
    let f = f.to_str().unwrap();
    let (code, out, _) = on_file("balance", f, &["--json"]);
    let v = json(&out);
    assert!(!v["migrations"].as_array().unwrap().is_empty(), "{out}");
    assert!(v["imbalance_after"].as_f64().unwrap() > v["threshold"].as_f64().unwrap());
    assert_eq!(code, 3, "{out}");
    assert!(!v["unmet"].as_array().unwrap().is_empty(), "{out}");
    // Storage room is what stops it, and the stop reason says where (b and c have 10 GiB left).
    let stop = v["stop"].as_str().unwrap_or_default();
    assert!(
        stop.contains("storage room refuses the best moves (storage local-lvm on "),
        "{out}"
    );
    assert!(stop.contains("has 10.0 GiB free"), "{out}");
    // Every move copies 60 GiB: memory and local disks.
    let gib = 1u64 << 30;
    assert!(
        v["bounds"]["bytes"].as_u64().unwrap() >= 60 * gib,
        "{}",
        v["bounds"]
    );
    let (code, out, _) = on_file("balance", f, &[]);
    assert_eq!(code, 3);
    assert!(
        out.lines()
            .next()
            .unwrap()
            .starts_with("not met (exit code 3): the imbalance stays above the threshold 10.0 pp"),
        "{out}"
    );
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("storage local-lvm on "),
        "{out}"
    );
    // A move copies memory and local disks: the column says bytes copied, not memory.
    let header = out
        .lines()
        .find(|l| l.contains("VMID") && l.contains("AFTER"))
        .unwrap();
    assert!(header.contains(" COPY "), "{header}");
    assert!(!header.contains("MEMORY"), "{header}");
    assert!(
        out.contains("60.0 GiB  "),
        "memory and disks of one move: {out}"
    );
}

/// An affinity group split while a member migrates elsewhere waits for that migration: the
/// plan names the rule as waiting, and exits 0 (the next run, once it landed, fixes the group).
#[test]
fn a_split_group_with_a_member_in_flight_waits_and_exits_0() {
    let snapshot = r#"{"resources":[
      {"type":"node","node":"a","status":"online","maxmem":68719476736,"mem":17179869184,"maxcpu":8,"cpu":0.1},
      {"type":"node","node":"b","status":"online","maxmem":68719476736,"mem":17179869184,"maxcpu":8,"cpu":0.1},
      {"type":"node","node":"c","status":"online","maxmem":68719476736,"mem":17179869184,"maxcpu":8,"cpu":0.1},
      {"type":"qemu","vmid":101,"node":"a","status":"running","maxmem":4294967296,"mem":2147483648,
       "maxcpu":2,"cpu":0.1,"lock":"migrate","tags":"flxp.affinity.web"},
      {"type":"qemu","vmid":102,"node":"b","status":"running","maxmem":4294967296,"mem":2147483648,
       "maxcpu":2,"cpu":0.1,"tags":"flxp.affinity.web"}],
      "tasks":[{"upid":"UPID:a:00001234:00005678:00002700:qmigrate:101:root@pam:","node":"a",
        "type":"qmigrate","id":"101","starttime":9900,"target":"c"}],
      "time":10000}"#;
    let (_dir, path) = temp_file("inflight.json", snapshot);
    let (code, out, _) = on_file("balance", &path, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "\nwaiting for migrations in flight (1; the next run fixes them once they land):\n  \
             flxp.affinity.web waits for the migration in flight of 101\n"
        ),
        "{out}"
    );
    let (code, out, _) = on_file("balance", &path, &["--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["unmet"].is_null(), "met: no `unmet` list");
    assert_eq!(v["violations_after"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["waiting"][0]["violation"]["rule"], "flxp.affinity.web");
    assert_eq!(v["waiting"][0]["in_flight"], serde_json::json!([101]));
}

/// The headline names the actual stop reason: the migration budget,
/// or HA guests in motion for the pve-* methods.
#[test]
fn the_not_met_headline_names_the_budget_or_ha_guests_in_motion() {
    let (_dir, f) = temp_file("unbalanced.json", UNBALANCED);
    let f = f.to_str().unwrap();
    not_met_because(f, &["--max-migrations", "0"], "migration budget of 0");

    use flxp_core::builder::{GIB, vm};
    let b = four_on_node1_cluster().guest(
        vm(105, "node2")
            .hastate("migrate")
            .mem(0, GIB)
            .cores(1.0, 0.0),
    );
    let snap = serde_json::to_string(&b.option("crs", "ha=static".into()).snapshot()).unwrap();
    let (_dir2, f) = temp_file("ha.json", &snap);
    let f = f.to_str().unwrap();
    not_met_because(
        f,
        &["--method", "pve-topsis"],
        "1 HA guest(s) in motion (vm:105)",
    );
}

/// Runs `flxp balance` on `file`: it exits 3 and its headline names `cause`, not "no safe move".
fn not_met_because(file: &str, args: &[&str], cause: &str) {
    let (code, out, _) = on_file("balance", file, args);
    assert_eq!(code, 3, "{out}");
    let first = out.lines().next().unwrap();
    assert!(first.contains(cause), "{out}");
    assert!(!first.contains("no safe move"), "{out}");
}

/// A snapshot from nodes and guests, written to a temp file.
fn snapshot_file(b: &flxp_core::builder::ClusterBuilder) -> (tempfile::TempDir, PathBuf) {
    temp_file("snap.json", &serde_json::to_string(&b.snapshot()).unwrap())
}

/// A broken rule the budget leaves unfixed names the budget in the
/// headline and in `unmet`, not "cannot be fixed" (with one more migration it is fixed).
#[test]
fn a_rule_left_broken_by_the_budget_names_the_budget() {
    use flxp_core::builder::{ClusterBuilder, GIB, node, vm};
    let nodes = |b: ClusterBuilder, names: &[&str]| {
        names.iter().fold(b, |b, n| {
            b.node(node(n).cpus(16.0).memory(100 * GIB).load(0.1))
        })
    };
    // A guest on the wrong node for its pin, and three anti-affine guests on one node.
    let pin = nodes(ClusterBuilder::new(), &["a", "b"])
        .guest(vm(100, "a").tagged("flxp.node.b").mem(10 * GIB, 10 * GIB))
        .guest(vm(101, "a").mem(10 * GIB, 10 * GIB))
        .guest(vm(200, "b").mem(10 * GIB, 10 * GIB));
    let aa = nodes(ClusterBuilder::new(), &["a", "b", "c"])
        .guest(
            vm(100, "a")
                .tagged("flxp.anti-affinity.x")
                .mem(10 * GIB, 10 * GIB),
        )
        .guest(
            vm(101, "a")
                .tagged("flxp.anti-affinity.x")
                .mem(10 * GIB, 10 * GIB),
        )
        .guest(
            vm(102, "a")
                .tagged("flxp.anti-affinity.x")
                .mem(10 * GIB, 10 * GIB),
        )
        .guest(vm(200, "b").mem(10 * GIB, 10 * GIB));
    for (b, budget) in [(pin, "0"), (aa, "1")] {
        let (_dir, f) = snapshot_file(&b);
        let f = f.to_str().unwrap();
        let (code, out, err) = on_file("balance", f, &["--max-migrations", budget]);
        assert_eq!(code, 3, "{out}{err}");
        let first = out.lines().next().unwrap();
        assert!(first.contains("migration budget of"), "{out}");
        assert!(!first.contains("cannot be fixed"), "{out}");
        let (code, out, _) = on_file("balance", f, &["--max-migrations", budget, "--json"]);
        assert_eq!(code, 3, "{out}");
        let v = json(&out);
        let unmet = v["unmet"].to_string();
        assert!(unmet.contains("migration budget of"), "{out}");
        assert!(!unmet.contains("cannot be fixed"), "{out}");
    }
}

/// For the pve-* methods `unmet` names what the summary names (the
/// budget, the margin), not "no safe move lowers it".
#[test]
fn pve_methods_name_the_budget_or_margin_in_unmet() {
    let (_dir, f) = temp_file("static.json", &four_on_node1("ha=static"));
    let f = f.to_str().unwrap();
    let (_mdir, margin) = temp_file("margin.toml", "[balance.trigger]\nmargin = 0.9\n");
    let margin = margin.to_str().unwrap();
    for method in ["pve-bruteforce", "pve-topsis"] {
        for (extra, cause) in [
            (["--max-migrations", "0"], "budget"),
            (["--config", margin], "margin"),
        ] {
            let mut args = vec!["balance", "--from-file", f, "--method", method, "--json"];
            args.extend(extra);
            let (code, out, err) = run(&args);
            assert_eq!(code, 3, "{out}{err}");
            let v = json(&out);
            let unmet = v["unmet"].to_string();
            assert!(unmet.contains(cause), "{method} {cause}: {out}");
            assert!(!unmet.contains("no safe move"), "{method} {cause}: {out}");
        }
    }
}

/// A bad `--effort` or `--soft-weight` is bad usage (exit 2) with a short
/// message, not a 300-digit number.
#[test]
fn bad_effort_or_soft_weight_is_bad_usage_with_a_short_message() {
    let f = example("pvesh-4node.json");
    let f = f.to_str().unwrap();
    for (flag, value) in [
        ("--effort", "1e300"),
        ("--effort", "-1"),
        ("--effort", "soon"),
        ("--soft-weight", "-1"),
        ("--soft-weight", "NaN"),
    ] {
        let arg = format!("{flag}={value}");
        let (code, _, err) = on_file("balance", f, &[&arg]);
        assert_eq!(code, 2, "{arg}: {err}");
        assert!(err.contains(flag), "{arg}: {err}");
        assert!(err.len() < 400, "{arg}: {err}");
    }
}

/// A snapshot read from `-` is "stdin" in every error, also in those the
/// model raises after the snapshot parsed.
#[test]
fn errors_name_a_snapshot_on_stdin_stdin() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    // Parses, but its memory figures add up to more than any cluster has.
    let big = 1u64 << 61;
    let nodes: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            format!(
                r#"{{"id":"node/{n}","type":"node","node":"{n}","status":"online","maxcpu":4,"maxmem":{big},"mem":0,"cpu":0.1}}"#
            )
        })
        .collect();
    let snap = format!(r#"{{"resources":[{}]}}"#, nodes.join(","));
    for cmd in ["balance", "consolidate", "status"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flxp"))
            .args([cmd, "--from-file", "-"])
            .env_remove("FLXP_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(snap.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(err.contains("in stdin:"), "{cmd}: {err}");
        assert!(!err.contains("in -"), "{cmd}: {err}");
    }
}

/// A node reporting more memory used than it has (320 GiB of 64) is counted as full, and what
/// leaves it comes off what it reports: the plan names it as left over its memory, the headline
/// and `unmet` say so, and the exit code is 3.
#[test]
fn a_node_left_over_its_memory_is_named_and_exits_3() {
    use flxp_core::builder::{ClusterBuilder, GIB, node, vm};
    let mut b = ClusterBuilder::new()
        .node(node("a").memory(64 * GIB).used(320 * GIB))
        .node(node("b").memory(64 * GIB).used(16 * GIB))
        .node(node("c").memory(64 * GIB).used(8 * GIB))
        .guest(vm(105, "b").mem(8 * GIB, 8 * GIB));
    for vmid in 101..=104 {
        b = b.guest(vm(vmid, "a").mem(8 * GIB, 8 * GIB));
    }
    let (_dir, path) = snapshot_file(&b);
    let (code, out, _) = on_file("balance", &path, &["--json"]);
    assert_eq!(code, 3, "{out}");
    let v = json(&out);
    let moved_off_a = v["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "a")
        .count() as u64;
    assert!(moved_off_a > 0, "{out}");
    assert_eq!(v["overfull"][0]["node"], "a");
    assert_eq!(v["overfull"][0]["mem"], (320 - 8 * moved_off_a) * GIB);
    let a_after = v["nodes_after"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "a")
        .unwrap();
    assert_eq!(a_after["mem_percent"], 100.0);
    let phrase = "1 node(s) stay over their memory, counted as full: a (";
    assert!(
        v["unmet"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u.as_str().unwrap().starts_with(phrase)),
        "{out}"
    );
    let (code, out, _) = on_file("balance", &path, &[]);
    assert_eq!(code, 3, "{out}");
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("not met (exit code 3): "), "{out}");
    assert!(first.contains(phrase), "{out}");
}
