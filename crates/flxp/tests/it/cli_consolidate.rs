//! `flxp consolidate`: the plan from a file names what it frees and why the rest stays; against
//! a live simulated zone it empties the freed node, marks it, keeps rules and headroom, switches it
//! off through the API, and never goes below the quorum floor.

use flxp_sim::scenario::add_node_like;
use flxp_sim::world::{GuestKind, MigrateRequest};
use serde_json::Value;

use super::cli_balance::{DEMO, SimZone, sim_zone};
use super::{assert_contains_all, json, on_file, strs, temp_file};

/// The demo zone, fast, with freed nodes switched off and `extra` in `[consolidate]`; `tweak`
/// edits the scenario.
fn shutdown_zone(extra: &str, tweak: impl FnOnce(&mut Value)) -> SimZone {
    let config = format!("\n[consolidate]\nshutdown = true\n{extra}");
    sim_zone(DEMO, 100_000.0, &config, tweak)
}

/// The entry of `node` in the plan's `kept` list.
pub fn kept<'a>(v: &'a Value, node: &str) -> &'a Value {
    let kept = v["consolidation"]["kept"].as_array().unwrap();
    kept.iter().find(|k| k["node"] == node).unwrap()
}

/// The names of the nodes of a `freed` or `kept` list.
fn names(v: &Value) -> Vec<&str> {
    strs(v, "node")
}

#[test]
fn a_plan_frees_nodes_down_to_the_quorum_floor_and_says_why_others_stay() {
    // Five idle nodes with one small guest each: two can go, three must stay for quorum. The
    // first, a, would hold the zone's lease (on by default): it stays, as in a zone.
    let mut entries = Vec::new();
    for (i, n) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        entries.push(format!(
            r#"{{"id":"node/{n}","type":"node","node":"{n}","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.05}}"#
        ));
        entries.push(format!(
            r#"{{"id":"qemu/{id}","type":"qemu","vmid":{id},"node":"{n}","status":"running","maxmem":4294967296,"mem":4294967296,"maxcpu":2,"cpu":0.1}}"#,
            id = 101 + i
        ));
    }
    let (_d, f) = temp_file("snap.json", &format!("[{}]", entries.join(",")));
    let (code, out, err) = on_file("consolidate", &f, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let c = &v["consolidation"];
    assert_eq!(names(&c["freed"]), ["b", "c"], "{out}");
    assert_eq!(c["min_online"], 3);
    assert_eq!(v["dry_run"], true);
    // `back` is always there (as `shutdown` is), empty when no node went back.
    assert_eq!(v["back"], Value::Array(Vec::new()), "{out}");
    let kept = c["kept"].as_array().unwrap();
    assert_eq!(names(&c["kept"]), ["a", "d", "e"], "{out}");
    assert_eq!(kept[0]["because"], "required", "{out}");
    assert!(kept[1..].iter().all(|k| k["because"] == "floor"), "{out}");
    let migrations = c["plan"]["migrations"].as_array().unwrap();
    assert_eq!(migrations.len(), 2);
    assert!(migrations.iter().all(|m| m["to"] != "b" && m["to"] != "c"));

    let (code, out, _) = on_file("consolidate", &f, &[]);
    assert_eq!(code, 0);
    assert_contains_all(
        &out,
        &[
            "free b: 1 migration(s) off it",
            // Moving nothing reaches a spread too: the bound is on plans emptying b and c.
            "\nlower bound: any plan that empties b, c and reaches spread ",
            "keep a: a holds flxp's lease of zone (the file)",
            "keep d: 3 node(s) must stay online: quorum needs more than half",
        ],
    );

    // `--effort` raises the planner's work budget (the same plan here, far below it); a
    // negative one is bad usage, named by its range.
    let (code, out, err) = on_file("consolidate", &f, &["--json", "--effort", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        names(&json(&out)["consolidation"]["freed"]),
        ["b", "c"],
        "{out}"
    );
    let (code, _, err) = on_file("consolidate", &f, &["--effort=-1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("from 0 to 86400"), "{err}");

    // Waking needs a live zone: with a snapshot file it is refused, not ignored.
    let (code, _, err) = on_file("consolidate", &f, &["--wake", "a"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--wake powers a node of a live zone on"),
        "{err}"
    );
}

#[test]
fn a_live_zone_is_consolidated_and_the_freed_node_switched_off() {
    let z = shutdown_zone("", |_| {});
    let (dry, out) = z.run_json(&["consolidate", "--dry-run", "--json"]);
    assert_eq!(names(&dry["consolidation"]["freed"]), ["pve2"], "{out}");
    assert!(z.guests_on("pve2").len() > 1, "a dry run moves nothing");

    let (v, out) = z.run_json(&["consolidate", "--json"]);
    assert!(
        v["execution"]["failed"].as_array().unwrap().is_empty(),
        "{out}"
    );
    assert_eq!(v["shutdown"][0]["node"], "pve2", "{out}");
    assert_eq!(v["shutdown"][0]["ok"], true, "{out}");
    assert!(z.guests_on("pve2").is_empty());
    {
        let w = z.sim.world();
        assert!(w.nodes["pve2"].notes.contains("flxp.maintenance"));
        // Which node flxp switched off is kept where it can be read while pve2 is down.
        let marks: Vec<&str> = w
            .nodes
            .values()
            .filter(|n| n.name != "pve2" && n.notes.contains("flxp-power node=pve2 state=off"))
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(marks.len(), 1, "one node keeps the power mark");
    }
    // The shutdown takes 30 simulated seconds: well under a second at this time scale.
    until_online(&z, "pve2", false);
    assert!(!z.sim.world().nodes["pve2"].online, "pve2 switched off");

    // Three of four nodes are online: quorum allows no further node to go.
    let (v, out) = z.run_json(&["consolidate", "--json"]);
    assert!(
        v["consolidation"]["freed"].as_array().unwrap().is_empty(),
        "{out}"
    );
    assert_eq!(v["consolidation"]["nodes_online"], 3);

    // Waking it: online after the boot time, the mark cleared, guests balanced back onto it. On
    // the default `dominant` metric the demo's CPU spread stays above the threshold (its busiest
    // guests are containers, which move only by a restart): the rebalance does what it safely
    // can and says the rest, with exit 3.
    let (code, out, err) = z.run(&["consolidate", "--wake", "pve2", "--json"]);
    assert_eq!(code, 3, "{err}\n{out}");
    let v = json(&out);
    assert!(
        v["unmet"][0]
            .as_str()
            .unwrap()
            .starts_with("the imbalance stays above the threshold"),
        "{out}"
    );
    assert!(v["mac"].as_str().unwrap().starts_with("bc:24:11:"), "{out}");
    assert!(z.sim.world().nodes["pve2"].online);
    assert!(
        !z.sim.world().nodes["pve2"]
            .notes
            .contains("flxp.maintenance")
    );
    assert!(
        z.sim
            .world()
            .nodes
            .values()
            .all(|n| !n.notes.contains("flxp-power")),
        "the power mark is gone once the node is back"
    );
    assert!(
        !z.guests_on("pve2").is_empty(),
        "rebalanced onto the woken node: {out}"
    );
}

#[test]
fn waking_an_online_node_says_so_and_a_zero_timeout_is_refused() {
    let z = sim_zone(DEMO, 100_000.0, "", |_| {});
    let wake = |extra: &[&str]| z.run(&[&["consolidate", "--wake", "pve2"], extra].concat());
    let (code, _, err) = wake(&["--wake-timeout", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--wake-timeout must be at least 1"), "{err}");
    let (code, out, err) = wake(&[]);
    assert!(code == 0 || code == 3, "{err}\n{out}");
    assert!(
        err.contains("pve2 is online already: no Wake-on-LAN sent"),
        "{err}"
    );
    let (_, out, _) = wake(&["--json"]);
    assert_eq!(json(&out)["already_online"], true, "{out}");
}

#[test]
fn config_mistakes_name_their_key() {
    let (_d, snap) = temp_file(
        "snap.json",
        r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":68719476736,"mem":1,"maxcpu":16,"cpu":0.05}]"#,
    );
    for (text, key) in [
        (
            "[consolidate]\nheadroom = \"yes\"\n",
            "consolidate.headroom",
        ),
        ("[consolidate]\nmin-nodes = 0\n", "consolidate.min-nodes"),
        (
            "[consolidate]\nwake-above = 0.3\n",
            "consolidate.wake-above",
        ),
    ] {
        let (_c, config) = temp_file("flxp.toml", text);
        let (code, _, err) = on_file(
            "consolidate",
            &snap,
            &["--config", config.to_str().unwrap()],
        );
        assert_ne!(code, 0, "{text}");
        assert!(err.contains(key), "{text}: {err}");
    }
}

/// Leaves the zone as an interrupted consolidation does: pve2 marked off (the mark kept on pve1)
/// and in maintenance, not yet emptied.
fn interrupted_on_pve2(z: &SimZone) {
    let mut w = z.sim.world();
    w.nodes.get_mut("pve1").unwrap().notes =
        "<!-- flxp-power node=pve2 state=off since=1 -->".into();
    w.nodes.get_mut("pve2").unwrap().notes = "flxp.maintenance".into();
}

#[test]
fn a_rerun_finishes_an_interrupted_consolidation() {
    let z = shutdown_zone("", |_| {});
    interrupted_on_pve2(&z);
    assert!(z.guests_on("pve2").len() > 1);
    let (v, out) = z.run_json(&["consolidate", "--json"]);
    let freed = &v["consolidation"]["freed"];
    assert_eq!(names(freed), ["pve2"], "{out}");
    assert_eq!(freed[0]["resumed"], true, "{out}");
    assert_eq!(v["shutdown"][0]["ok"], true, "{out}");
    assert!(z.guests_on("pve2").is_empty());
}

#[test]
fn a_rerun_gives_back_a_node_whose_consolidation_cannot_be_finished() {
    // A memory ceiling no other node can take pve2's guests under.
    let z = shutdown_zone("max-memory = 0.05\n", |_| {});
    interrupted_on_pve2(&z);
    let (v, out) = z.run_json(&["consolidate", "--json"]);
    assert_eq!(kept(&v, "pve2")["resumed"], true, "{out}");
    assert_eq!(v["back"][0], "pve2", "{out}");
    z.assert_in_service("pve2");
    let notes = z.notes("pve1");
    assert!(!notes.contains("flxp-power"), "{notes}");
}

/// Waits (real time, bounded) until the simulated node is online or offline.
fn until_online(z: &super::cli_balance::SimZone, node: &str, online: bool) {
    let start = std::time::Instant::now();
    while z.sim.world().nodes[node].online != online && start.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(z.sim.world().nodes[node].online, online, "{node}");
}

#[test]
fn a_wake_that_times_out_leaves_the_node_marked_waking_not_for_another_shutdown() {
    // A boot that outlasts the wait by far.
    let z = shutdown_zone("", |v| v["sim"]["node_boot_secs"] = 1e9.into());
    let (code, out, err) = z.run(&["consolidate", "--json"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(json(&out)["shutdown"][0]["node"], "pve2", "{out}");
    until_online(&z, "pve2", false);
    let (code, _, err) = z.run(&["consolidate", "--wake", "pve2", "--wake-timeout", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("pve2 is not online 1 s after Wake-on-LAN; it is marked waking"),
        "{err}"
    );
    let notes: String = z
        .sim
        .world()
        .nodes
        .values()
        .map(|n| n.notes.clone())
        .collect();
    assert!(
        notes.contains("flxp-power node=pve2 state=waking"),
        "{notes}"
    );
    assert!(!notes.contains("node=pve2 state=off"), "{notes}");
    // It boots after the waiter gave up: no consolidation takes it for one left unfinished.
    z.sim.world().set_online("pve2", true);
    let (v, out) = z.run_json(&["consolidate", "--dry-run", "--json"]);
    assert!(
        !names(&v["consolidation"]["freed"]).contains(&"pve2"),
        "{out}"
    );
    assert_ne!(kept(&v, "pve2")["resumed"], true, "{out}");
}

#[test]
fn a_wake_right_after_a_shutdown_waits_until_the_node_is_off_then_wakes_it() {
    // A shutdown that never ends by itself: the test takes pve2 down while the wake waits. At
    // 10x, the wait for a node going down (600 simulated seconds) lasts a wall minute.
    let z = sim_zone(DEMO, 10.0, "\n[consolidate]\nshutdown = true\n", |v| {
        v["sim"]["node_shutdown_secs"] = 1e9.into();
        v["sim"]["node_boot_secs"] = 20.0.into();
    });
    let (code, out, err) = z.run(&["consolidate", "--json"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(json(&out)["shutdown"][0]["node"], "pve2", "{out}");
    assert!(z.sim.world().nodes["pve2"].online, "still going down");
    let (code, out, err) = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_secs(2));
            z.sim.world().set_online("pve2", false);
        });
        z.run(&["consolidate", "--wake", "pve2", "--wake-timeout", "600"])
    });
    // The balance after the wake cannot reach the demo's threshold (containers, an ignored
    // guest): exit 3, as any balance of it; the wake itself went through.
    assert_eq!(code, 3, "{err}\n{out}");
    assert!(
        err.contains("still shows online: waiting until it is off"),
        "{err}"
    );
    assert!(err.contains("pve2: Wake-on-LAN sent"), "{err}");
    assert!(!err.contains("pve2 is online already"), "{err}");
    // Woken, back in service, and the guests that came to it run.
    let w = z.sim.world();
    assert!(w.nodes["pve2"].online);
    let notes: String = w.nodes.values().map(|n| n.notes.clone()).collect();
    assert!(!notes.contains("flxp-power node=pve2"), "{notes}");
    assert!(
        w.guests
            .values()
            .filter(|g| g.node == "pve2")
            .all(|g| g.running),
        "a guest on pve2 was stopped by its shutdown"
    );
}

/// The `since=` of `node`'s power mark, wherever it is kept.
fn power_mark_since(z: &SimZone, node: &str) -> i64 {
    let w = z.sim.world();
    let prefix = format!("<!-- flxp-power node={node} ");
    let line = w
        .nodes
        .values()
        .flat_map(|n| n.notes.lines())
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no power mark of {node}"))
        .to_owned();
    let since = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("since="));
    since.unwrap().parse().unwrap()
}

#[test]
fn power_marks_are_dated_in_proxmoxs_clock_not_this_machines() {
    // Marks are aged against snapshot times, which are Proxmox's clock: dated by this machine's
    // clock instead, a skew between the two wakes a node too early or too late.
    // 200 times real time (not `shutdown_zone`'s 100,000): the simulator samples every
    // simulated minute, and catching up on days of them outlasts the lease under load.
    let z = sim_zone(DEMO, 200.0, "\n[consolidate]\nshutdown = true\n", |v| {
        v["sim"]["node_boot_secs"] = 1e9.into()
    });
    // The scenario's clock is a year or so behind this machine's already; an hour more.
    z.sim.clock().advance(3600.0);
    let before = z.sim.now().floor() as i64;
    let (code, out, err) = z.run(&["consolidate", "--json"]);
    assert_eq!(code, 0, "{err}\n{out}");
    until_online(&z, "pve2", false);
    let off = power_mark_since(&z, "pve2");
    let (code, _, err) = z.run(&["consolidate", "--wake", "pve2", "--wake-timeout", "1"]);
    assert_eq!(code, 1, "{err}");
    let waking = power_mark_since(&z, "pve2");
    let after = z.sim.now().ceil() as i64;
    assert!(
        before <= off && off <= waking && waking <= after,
        "off since {off}, waking since {waking}: not within Proxmox's clock {before}..={after}"
    );
}

#[test]
fn a_failed_migration_says_which_node_stays_on_and_why() {
    let z = shutdown_zone("", |_| {});
    let (_, out, _) = z.run(&["consolidate", "--dry-run", "--json"]);
    let v = json(&out);
    assert_eq!(names(&v["consolidation"]["freed"]), ["pve2"], "{out}");
    let first = v["consolidation"]["plan"]["migrations"][0]["vmid"]
        .as_u64()
        .unwrap();
    let z = shutdown_zone("", |v| {
        v["sim"]["faults"] = serde_json::json!({
            "fail_migrations": [{"vmid": first, "message": "simulated: connection reset"}]
        });
    });
    let (code, out, err) = z.run(&["consolidate", "--json"]);
    assert_eq!(code, 1, "{err}\n{out}");
    let v = json(&out);
    assert_eq!(v["shutdown"][0]["node"], "pve2", "{out}");
    assert_eq!(v["shutdown"][0]["ok"], false, "{out}");
    let why = v["shutdown"][0]["error"].as_str().unwrap();
    assert!(
        why.starts_with(&format!(
            "guest(s) {first} did not move off it; it stays in maintenance"
        )),
        "{why}"
    );
    assert!(z.sim.world().nodes["pve2"].online);
}

/// DEMO with pve5, an empty node like pve4: five nodes, so quorum lets two go.
fn with_empty_pve5(v: &mut serde_json::Value) {
    add_node_like(v, "pve4", "pve5");
}

/// A one-off run must not leave an empty freed node on because a guest of another
/// freed node failed to move; each freed node is judged on its own, as the daemon does.
#[test]
fn an_empty_freed_node_goes_off_though_another_nodes_migration_failed() {
    let z = shutdown_zone("", with_empty_pve5);
    let (_, out, _) = z.run(&["consolidate", "--dry-run", "--json"]);
    let v = json(&out);
    let mut freed = names(&v["consolidation"]["freed"]);
    freed.sort();
    assert_eq!(freed, ["pve2", "pve5"], "{out}");
    let first = v["consolidation"]["plan"]["migrations"][0].clone();
    assert_eq!(first["from"], "pve2", "{out}");
    let vmid = first["vmid"].as_u64().unwrap();
    let z = shutdown_zone("", |v| {
        with_empty_pve5(v);
        v["sim"]["faults"] = serde_json::json!({
            "fail_migrations": [{"vmid": vmid, "message": "simulated: connection reset"}]
        });
    });
    let (code, out, err) = z.run(&["consolidate", "--json"]);
    assert_eq!(code, 1, "{err}\n{out}");
    let v = json(&out);
    let outcome = |node: &str| {
        v["shutdown"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["node"] == node)
            .unwrap_or_else(|| panic!("no shutdown entry for {node}: {out}"))
            .clone()
    };
    assert_eq!(outcome("pve5")["ok"], true, "{out}");
    assert_eq!(outcome("pve2")["ok"], false, "{out}");
    let start = std::time::Instant::now();
    while z.sim.world().nodes["pve5"].online && start.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!z.sim.world().nodes["pve5"].online, "pve5 switched off");
    assert!(
        z.sim.world().nodes["pve2"].online,
        "pve2 keeps guest {vmid}"
    );
}

#[test]
fn a_dry_run_names_the_nodes_a_real_run_would_give_back() {
    let z = shutdown_zone("max-memory = 0.05\n", |_| {});
    interrupted_on_pve2(&z);
    let dry = |json_out: bool| {
        let mut a = vec!["consolidate", "--dry-run"];
        if json_out {
            a.push("--json");
        }
        z.run(&a)
    };
    let (code, out, err) = dry(true);
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(json(&out)["back"], serde_json::json!(["pve2"]), "{out}");
    let (code, out, err) = dry(false);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        format!("{out}{err}")
            .contains("pve2: would go back in service (its consolidation cannot be finished)"),
        "{out}{err}"
    );
    // Nothing was given back.
    assert!(
        z.sim.world().nodes["pve2"]
            .notes
            .contains("flxp.maintenance")
    );
}

/// Starts a live migration of qemu guest `vmid` from `from` to `to` by hand, as an admin would,
/// at 1 KiB/s: it stays in flight for the whole test.
pub fn migrate_slowly(z: &SimZone, vmid: u32, from: &str, to: &str) {
    migrate_by_hand(z, vmid, from, to, 1.0);
}

/// Starts a live migration of qemu guest `vmid` from `from` to `to` by hand, as an admin would,
/// at `kib_per_sec`.
pub fn migrate_by_hand(z: &SimZone, vmid: u32, from: &str, to: &str, kib_per_sec: f64) {
    z.sim
        .world()
        .migrate(MigrateRequest {
            kind: GuestKind::Qemu,
            node: from.into(),
            vmid,
            target: to.into(),
            online: true,
            with_local_disks: false,
            restart: false,
            bwlimit_kib: Some(kib_per_sec),
            user: "root@pam".into(),
        })
        .unwrap();
}

/// A guest is migrating onto pve5, an empty node the consolidation would free first: pve5 is
/// kept (the plan, the dry run and the text name the guest), never switched off, and the guest
/// keeps running on its way.
#[test]
fn a_node_a_guest_is_migrating_onto_stays_on_and_the_guest_keeps_running() {
    let six = |v: &mut Value| {
        add_node_like(v, "pve4", "pve5");
        add_node_like(v, "pve4", "pve6");
    };
    // 4 GiB at 1 KiB/s is over 400 s of real time at this scale; the plan's moves take ms.
    let z = sim_zone(DEMO, 10_000.0, "\n[consolidate]\nshutdown = true\n", six);
    let (dry, out) = z.run_json(&["consolidate", "--dry-run", "--json"]);
    assert!(
        names(&dry["consolidation"]["freed"]).contains(&"pve5"),
        "without the migration pve5 is freed: {out}"
    );
    migrate_slowly(&z, 101, "pve1", "pve5");
    assert!(z.migrating());

    let (dry, out) = z.run_json(&["consolidate", "--dry-run", "--json"]);
    assert!(
        !names(&dry["consolidation"]["freed"]).contains(&"pve5"),
        "{out}"
    );
    let k = kept(&dry, "pve5");
    assert_eq!(k["because"], "arriving", "{out}");
    assert!(
        k["reason"]
            .as_str()
            .unwrap()
            .starts_with("guest 101 (web-1) is migrating onto pve5 (from pve1)"),
        "{out}"
    );
    let (code, text, err) = z.run(&["consolidate", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("keep pve5: guest 101 (web-1) is migrating onto pve5 (from pve1)"),
        "{text}"
    );

    let (v, out) = z.run_json(&["consolidate", "--json"]);
    let freed = names(&v["consolidation"]["freed"]);
    assert!(!freed.is_empty() && !freed.contains(&"pve5"), "{out}");
    let shutdown = v["shutdown"].as_array().unwrap();
    assert!(shutdown.iter().all(|s| s["node"] != "pve5"), "{out}");
    for node in &freed {
        until_online(&z, node, false);
    }
    let w = z.sim.world();
    assert!(w.nodes["pve5"].online, "pve5 stays on");
    assert!(!w.nodes["pve5"].notes.contains("flxp.maintenance"));
    let g = &w.guests[&101];
    assert!(g.running, "101 keeps running");
    assert_eq!(g.lock(), Some("migrate"), "101 is still on its way");
}
