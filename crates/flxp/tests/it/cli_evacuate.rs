//! `flxp evacuate NODE`: plans from a file, exit 3 when a guest fits nowhere, unknown nodes, and
//! emptying a node of a live zone.

use std::path::Path;

use super::cli_balance::{DEMO, SimZone, fast_zone};
use super::{example, json, on_file, run, temp_file};

/// Runs `flxp evacuate NODE --from-file FILE EXTRA...`.
fn evacuate(node: &str, file: &Path, extra: &[&str]) -> (i32, String, String) {
    run(&[
        &["evacuate", node, "--from-file", file.to_str().unwrap()],
        extra,
    ]
    .concat())
}

#[test]
fn an_evacuation_plan_moves_every_guest_off_the_node() {
    let f = example("rules-hetero.json");
    let (code, out, err) = evacuate("alpha", &f, &["--json"]);
    assert_eq!(
        code, 0,
        "an unrelated broken rule elsewhere is no reason for 3: {err}"
    );
    let v = json(&out);
    assert_eq!(v["method"], "evacuate");
    let alpha = v["nodes_after"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "alpha")
        .unwrap();
    assert_eq!(alpha["guests"], 0, "{out}");
    assert!(
        v["migrations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["from"] == "alpha" && m["to"] != "alpha")
    );
}

#[test]
fn a_guest_that_fits_nowhere_exits_3_with_the_reason() {
    let snap = r#"[
        {"id":"node/a","type":"node","node":"a","status":"online","maxmem":68719476736,"mem":17179869184,"maxcpu":16,"cpu":0.1},
        {"id":"node/b","type":"node","node":"b","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1},
        {"id":"qemu/101","type":"qemu","vmid":101,"name":"pinned","node":"a","status":"running","maxmem":8589934592,"mem":4294967296,"maxcpu":2,"cpu":0.1,"tags":"flxp.node.a"},
        {"id":"qemu/102","type":"qemu","vmid":102,"name":"free","node":"a","status":"running","maxmem":8589934592,"mem":4294967296,"maxcpu":2,"cpu":0.1}
    ]"#;
    let (_d, f) = temp_file("snap.json", snap);
    let (code, out, _) = evacuate("a", &f, &["--json"]);
    assert_eq!(code, 3);
    let v = json(&out);
    assert_eq!(v["unplaced"][0]["vmid"], 101);
    assert!(
        v["unplaced"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("flxp.node"),
        "{out}"
    );
    assert_eq!(v["migrations"][0]["vmid"], 102, "the rest still moves");
    let (code, out, _) = evacuate("a", &f, &[]);
    assert_eq!(code, 3);
    assert!(out.contains("fit nowhere (1):\n  101 pinned on a"), "{out}");
}

#[test]
fn an_unknown_node_is_a_usage_error_naming_the_nodes() {
    let f = example("rules-hetero.json");
    let (code, out, err) = evacuate("zulu", &f, &[]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains(r#"node "zulu" is not in the cluster; nodes: alpha, bravo, charlie"#),
        "{err}"
    );
    let (code, _, err) = on_file("evacuate", &f, &[]);
    assert_eq!(code, 2, "NODE is required: {err}");
    // `--json` names the missing argument too, on one line, without the usage text.
    let (code, out, _) = on_file("evacuate", &f, &["--json"]);
    assert_eq!(code, 2, "{out}");
    let v = json(&out);
    assert_eq!(
        v["error"],
        "the following required arguments were not provided: <NODE>"
    );
    assert_eq!(v["exit_code"], 2);
}

#[test]
fn a_live_node_is_emptied() {
    let z = fast_zone(DEMO, "");
    // 151 is tagged flxp.ignore: it stays running, so the node is not safe to reboot and the
    // run exits 3 naming it (`evacuate pve4 && reboot` must not reboot).
    let (code, out, err) = z.run(&["evacuate", "pve4", "--json"]);
    assert_eq!(code, 3, "{err}\n{out}");
    let v = json(&out);
    assert!(
        v["execution"]["failed"].as_array().unwrap().is_empty(),
        "{out}"
    );
    assert_eq!(z.guests_on("pve4"), [151]);
    assert!(
        v["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["vmid"] == 151),
        "{out}"
    );
    let left = v["left_running"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{out}");
    assert_eq!(left[0]["vmid"], 151);
    assert_eq!(left[0]["node"], "pve4");
    assert!(
        left[0]["reason"].as_str().unwrap().contains("flxp.ignore"),
        "{out}"
    );
    assert!(
        v["unmet"][0]
            .as_str()
            .unwrap()
            .starts_with("1 running guest(s) still on pve4: not safe to reboot"),
        "{out}"
    );
    // The human run says it last, with the guest and why.
    let z = fast_zone(DEMO, "");
    let (code, out, _) = z.run(&["evacuate", "pve4"]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("still running on the emptied node(s) (1):\n  151 "),
        "{out}"
    );
    assert!(
        out.trim_end().ends_with(
            "not met (exit code 3): 1 running guest(s) still on pve4: not safe to reboot"
        ),
        "{out}"
    );
}

#[test]
fn guests_that_stay_on_the_node_are_listed_with_the_reason() {
    // The text output used to show only "rules still broken after", never why a guest stays.
    let f = example("pvesh-4node.json");
    let (code, out, _) = evacuate("pve1", &f, &[]);
    // 123 runs (locked for a backup): the node is not safe to reboot, said first, exit 3.
    assert_eq!(code, 3, "{out}");
    assert!(
        out.starts_with(
            "not met (exit code 3): 1 running guest(s) would stay on pve1: not safe to reboot\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("would stay running on the emptied node(s) (1):\n  123 backup-target on pve1: locked (backup)"),
        "{out}"
    );
    assert!(
        out.contains(
            "stay on a node in maintenance (2):\n  \
             123 backup-target on pve1: locked (backup); pve1 is in maintenance (maintenance requested)\n  \
             9000 ubuntu-2404-tpl on pve1: a template: never moved;"
        ),
        "{out}"
    );
}

/// Moving nothing reaches some spread too, so the evacuation's bound line
/// names the node emptied, not "any plan reaching spread X".
#[test]
fn the_bound_line_of_an_evacuation_names_the_node_emptied() {
    let f = example("rules-hetero.json");
    let (_, out, err) = evacuate("alpha", &f, &[]);
    let line = out
        .lines()
        .find(|l| l.starts_with("lower bound:"))
        .unwrap_or_else(|| panic!("{out}{err}"));
    assert!(
        line.starts_with("lower bound: any plan that empties alpha and reaches spread "),
        "{line}"
    );
}

#[test]
fn an_evacuation_with_a_failed_migration_says_the_exit_code_it_returns() {
    // pve4's first planned guest cannot leave: the run exits 1 (a migration failed), and the
    // line naming the guest left says 1, not the 3 of a plan that leaves it.
    let z = fast_zone(DEMO, "");
    let (_, out, _) = z.run(&["evacuate", "pve4", "--dry-run", "--json"]);
    let first = json(&out)["migrations"][0]["vmid"].as_u64().unwrap();
    let z = super::cli_balance::sim_zone(DEMO, 100_000.0, "", |v| {
        v["sim"]["faults"] = serde_json::json!({
            "fail_migrations": [{"vmid": first, "message": "migration aborted: no route to host"}]
        });
    });
    let (code, out, err) = z.run(&["evacuate", "pve4"]);
    assert_eq!(code, 1, "{err}\n{out}");
    let last = out.trim_end().lines().last().unwrap();
    assert!(last.starts_with("not met (exit code 1): "), "{out}");
}

/// The demo zone with 180 and 203 of pve4 in one hard affinity group, and the migration of the
/// first of them that the evacuation of pve4 plans failing: the vmids of the failing one and its
/// partner.
fn pair_failing() -> (SimZone, u32, u32) {
    let pair = |v: &mut serde_json::Value| {
        for r in v["resources"].as_array_mut().unwrap() {
            if r["vmid"] == 180 || r["vmid"] == 203 {
                r["tags"] = "flxp.affinity.pair".into();
            }
        }
    };
    let z = super::cli_balance::sim_zone(DEMO, 100_000.0, "", pair);
    let (_, out, _) = z.run(&["evacuate", "pve4", "--dry-run", "--json"]);
    let planned = json(&out)["migrations"].as_array().unwrap().clone();
    let first = planned
        .iter()
        .map(|m| m["vmid"].as_u64().unwrap() as u32)
        .find(|v| [180, 203].contains(v))
        .unwrap();
    let partner = if first == 180 { 203 } else { 180 };
    let z = super::cli_balance::sim_zone(DEMO, 100_000.0, "", |v| {
        pair(v);
        v["sim"]["faults"] = serde_json::json!({
            "fail_migrations": [{"vmid": first, "message": "migration aborted: no route to host"}]
        });
    });
    (z, first, partner)
}

#[test]
fn a_guest_left_running_says_where_its_failed_migration_went_and_why_its_partner_never_left() {
    let (z, first, partner) = pair_failing();
    let (code, out, err) = z.run(&["evacuate", "pve4", "--json"]);
    assert_eq!(code, 1, "{err}\n{out}");
    let v = json(&out);
    let failed = &v["execution"]["failed"];
    assert_eq!(failed.as_array().unwrap().len(), 1, "{out}");
    assert_eq!(failed[0]["vmid"], first);
    let to = failed[0]["to"].as_str().unwrap();
    let reasons: std::collections::BTreeMap<u64, String> = v["left_running"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["vmid"].as_u64().unwrap(),
                l["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // The target it was sent to, and why it failed.
    assert_eq!(
        reasons[&u64::from(first)],
        format!("its migration to {to} failed: migration aborted: no route to host"),
        "{out}"
    );
    // Its partner was never sent anywhere: not started, and why.
    assert_eq!(
        reasons[&u64::from(partner)],
        format!(
            "its migration to {to} was not started: the rest of the run was planned again \
             (migration of {first} to {to} failed) and the new plan does not move it"
        ),
        "{out}"
    );
}
