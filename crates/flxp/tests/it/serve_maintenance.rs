//! A node in maintenance through the GraphQL API: whether it is safe to reboot, and which
//! guests an evacuation left running there, with why.

use flxp_sim::Scenario;
use serde_json::{Value, json};

use super::serve::{PARALLEL_MIGRATIONS, executed_cleanly, start};

const LEFT: &str = "leftRunning { vmid name node reason }";
const STATE: &str = "{ state safeToReboot summary stopped running { vmid reason } }";

/// The demo's 151 (monitoring) on pve4 is tagged `flxp.ignore`.
const IGNORED: &str = "tagged flxp.ignore / plb_ignore: never moved";
/// What an evacuation plan says of it: why it stays, and the rule it breaks so.
const IGNORED_IN_PLAN: &str =
    "tagged flxp.ignore / plb_ignore: never moved; pve4 is in maintenance (maintenance requested)";
/// The same after the run, which marked the node in its notes first.
const IGNORED_AFTER_RUN: &str = "tagged flxp.ignore / plb_ignore: never moved; pve4 is in \
     maintenance (flxp.maintenance in node notes)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evacuate_returns_the_ignored_guest_still_running_and_the_node_says_so() {
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    // Before: the plan says what it would leave.
    let v = s
        .query(&format!(
            "query {{ evacuationPlan(zone: \"lab\", node: \"pve4\") {{ {LEFT} }} }}"
        ))
        .await;
    assert_eq!(
        v["data"]["evacuationPlan"]["leftRunning"],
        json!([{"vmid": 151, "name": "monitoring", "node": "pve4", "reason": IGNORED_IN_PLAN}]),
        "{v}"
    );

    let v = s
        .query(&format!(
            "mutation {{ evacuate(zone: \"lab\", node: \"pve4\") {{ executed done failed {LEFT} nodeState {STATE} }} }}"
        ))
        .await;
    let r = executed_cleanly(&v, "evacuate");
    assert_eq!(
        r["leftRunning"],
        json!([{"vmid": 151, "name": "monitoring", "node": "pve4", "reason": IGNORED_AFTER_RUN}]),
        "{v}"
    );
    assert_eq!(
        r["nodeState"],
        json!({"state": "running", "safeToReboot": false,
               "summary": "1 running guest still here, not safe to reboot", "stopped": 0,
               "running": [{"vmid": 151, "reason": IGNORED_AFTER_RUN}]}),
        "{v}"
    );

    // The node, now marked in maintenance, says the same; the others say nothing.
    let v = s
        .query(&format!(
            "query {{ nodes(zone: \"lab\") {{ name maintenanceState {STATE} }} }}"
        ))
        .await;
    let states: Vec<(&str, &Value)> = v["data"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap(), &n["maintenanceState"]))
        .collect();
    let pve4 = json!({"state": "running", "safeToReboot": false,
        "summary": "1 running guest still here, not safe to reboot", "stopped": 0,
        "running": [{"vmid": 151, "reason": IGNORED}]});
    assert_eq!(
        states,
        [
            ("pve1", &Value::Null),
            ("pve2", &Value::Null),
            ("pve3", &Value::Null),
            ("pve4", &pve4)
        ],
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_round_warns_of_and_counts_the_guest_still_running_on_a_node_in_maintenance() {
    let extra = format!(
        "{PARALLEL_MIGRATIONS}[daemon]\ninterval-secs = 3600\n\n[overrides.lab.pve4]\nmaintenance = true\n"
    );
    let s = start(Scenario::demo(), &extra, &[]).await;
    // The first round runs at start; one an hour after: this is the only one.
    let log = s
        .log_with("node in maintenance still runs guests: not safe to reboot")
        .await;
    let line = log
        .lines()
        .find(|l| l.contains("node in maintenance still runs guests"))
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("node=pve4"), "{line}");
    assert!(line.contains("running=1"), "{line}");
    assert!(line.contains("vmids=[151]"), "{line}");
    assert!(
        line.contains("151 monitoring (tagged flxp.ignore"),
        "{line}"
    );
    // The round evacuated the rest: 151 alone is counted (the gauge is set as the round ends).
    let log = s.log_with("round ended").await;
    assert!(log.contains("round ended"), "{log}");
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = s.get("/metrics").await.1;
        if metrics.contains("flxp_maintenance_guests_running{") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("flxp_maintenance_guests_running{"))
        .collect();
    assert_eq!(
        series,
        ["flxp_maintenance_guests_running{zone=\"lab\",node=\"pve4\"} 1"],
        "{metrics}"
    );
    // One warning per node per round, and one round ran.
    let warnings = s
        .log()
        .lines()
        .filter(|l| l.contains("node in maintenance still runs guests"))
        .count();
    assert_eq!(warnings, 1, "{}", s.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_maintenance_runs_in_the_background_and_its_progress_is_readable() {
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    let before = super::serve::guests(&s);
    let booted = s.sim.sim().world().nodes["pve2"].booted_at;
    let v = s
        .query(
            "mutation { rollingMaintenance(zone: \"lab\", nodes: [\"pve2\"]) { node step boot } }",
        )
        .await;
    assert!(v["errors"].is_null(), "{v}");
    // Followed through Proxmox: a line per node while it runs, none once it is done.
    let start = std::time::Instant::now();
    let mut seen = Vec::new();
    loop {
        let v = s
            .query("query { rollingProgress(zone: \"lab\") { node step } }")
            .await;
        let steps = v["data"]["rollingProgress"].as_array().unwrap().clone();
        if let Some(step) = steps.first() {
            let step = step["step"].as_str().unwrap().to_owned();
            if seen.last() != Some(&step) {
                seen.push(step);
            }
        } else if !seen.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(180),
            "{seen:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(seen.contains(&"waiting".to_owned()), "{seen:?}");
    assert!(s.sim.sim().world().nodes["pve2"].booted_at > booted);
    assert_eq!(super::serve::guests(&s), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_maintenance_answers_its_nodes_in_order_each_pending() {
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    let v = s
        .query(
            "mutation { rollingMaintenance(zone: \"lab\", nodes: [\"pve2\", \"PVE1\"], \
             reboot: false) { node step boot error } }",
        )
        .await;
    assert!(v["errors"].is_null(), "{v}");
    let pending =
        |node: &str| json!({ "node": node, "step": "pending", "boot": null, "error": null });
    assert_eq!(
        v["data"]["rollingMaintenance"],
        json!([pending("pve2"), pending("pve1")]),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_maintenance_that_would_stop_at_once_is_refused_with_the_reason() {
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    // 141 needs the gpu label only pve3 has.
    let v = s
        .query("mutation { rollingMaintenance(zone: \"lab\", nodes: [\"pve3\"]) { node } }")
        .await;
    assert_eq!(crate::serve::code(&v), "NO_CAPACITY", "{v}");
    assert_eq!(
        v["errors"][0]["message"],
        "node pve3 is not taken out: 1 guest(s) fit on no other node: 141 (pve1, pve2, pve4: \
         selector (e.g. pve1: node lacks label gpu))",
        "{v}"
    );
    let v = s
        .query("mutation { rollingMaintenance(zone: \"lab\", nodes: [\"pve9\"]) { node } }")
        .await;
    assert_eq!(crate::serve::code(&v), "UNKNOWN_NODE", "{v}");
    let notes = s.sim.sim().world().nodes["pve3"].notes.clone();
    assert!(!notes.contains("flxp.maintenance"), "{notes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_a_maintenance_takes_the_evacuated_guests_back_home() {
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    let before = super::serve::guests(&s);
    let v = s
        .query("mutation { evacuate(zone: \"lab\", node: \"pve4\") { executed done } }")
        .await;
    assert_eq!(v["data"]["evacuate"]["executed"], true, "{v}");
    assert_ne!(super::serve::guests(&s), before);
    let v = s
        .query("mutation { maintenance(zone: \"lab\", node: \"pve4\", on: false) }")
        .await;
    assert_eq!(v["data"]["maintenance"], true, "{v}");
    let start = std::time::Instant::now();
    while super::serve::guests(&s) != before
        || s.sim.sim().world().nodes["pve4"]
            .notes
            .contains("flxp-home")
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "{:?}",
            super::serve::guests(&s)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_mark_waits_for_the_evacuation_this_flxp_is_running() {
    // Marked while this flxp's own evacuation ran, a node went on receiving the guests that
    // evacuation had planned for it: the mark waits for the run to end, as a second run does.
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    let order = std::sync::Mutex::new(Vec::new());
    let evacuate = async {
        let v = s
            .query("mutation { evacuate(zone: \"lab\", node: \"pve4\") { executed done } }")
            .await;
        order.lock().unwrap().push("evacuate");
        v
    };
    let mark = async {
        // Once the evacuation's first migration runs.
        let start = std::time::Instant::now();
        while s.sim.sim().world().records.migrations.is_empty() {
            assert!(start.elapsed() < std::time::Duration::from_secs(60));
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let v = s
            .query("mutation { maintenance(zone: \"lab\", node: \"pve1\", on: true) }")
            .await;
        order.lock().unwrap().push("maintenance");
        v
    };
    let (e, m) = tokio::join!(evacuate, mark);
    assert_eq!(e["data"]["evacuate"]["executed"], true, "{e}");
    assert_eq!(m["data"]["maintenance"], true, "{m}");
    assert_eq!(*order.lock().unwrap(), ["evacuate", "maintenance"]);
}
