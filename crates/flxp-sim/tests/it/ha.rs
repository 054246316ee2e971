//! HA: rules with feasibility errors, resources, status views, maintenance evacuation and return,
//! fencing and recovery of a dead node.

use serde_json::{Value, json};

use crate::support::{TestSim, cluster_with, resource_entry, sleep};

/// The standard cluster with 110, 100 (its HA entry `vm100`) and 120 HA-managed, and `rules`.
fn with_ha(vm100: Value, rules: Value) -> TestSim {
    cluster_with(|doc| {
        doc["ha"]["resources"] = json!([
            {"sid": "vm:110", "state": "started"}, vm100, {"sid": "vm:120", "state": "started"}]);
        doc["ha"]["rules"] = rules;
    })
}

fn with_rules(rules: Value) -> TestSim {
    with_ha(json!({"sid": "vm:100", "state": "started"}), rules)
}

/// The `/cluster/ha/rules` entry with id `rule`.
async fn rule(s: &TestSim, rule: &str) -> Value {
    let rules = s.list("/cluster/ha/rules").await;
    rules.into_iter().find(|r| r["rule"] == rule).unwrap()
}

#[tokio::test(start_paused = true)]
async fn infeasible_rules_carry_errors() {
    let s = with_rules(json!([
        {"rule": "one", "type": "node-affinity", "resources": "vm:110", "nodes": "pve1:2,pve2"},
        {"rule": "two", "type": "node-affinity", "resources": "vm:110,vm:100", "nodes": "pve3", "strict": 1},
        {"rule": "lonely", "type": "resource-affinity", "resources": "vm:120", "affinity": "negative"},
    ]));
    let used = "resource 'vm:110' is already used in another node affinity rule";
    for (id, error) in [
        ("one", used),
        ("two", used),
        (
            "lonely",
            "rule is ineffective as there are less than two resources",
        ),
    ] {
        assert_eq!(rule(&s, id).await["errors"]["resources"], json!([error]));
    }
    let one = rule(&s, "one").await;
    assert_eq!(one["strict"], 0);
    assert_eq!(one["order"], 1);
    assert_eq!(one["digest"].as_str().unwrap().len(), 40);
    for filter in ["type=resource-affinity", "resource=vm:100"] {
        let filtered = s.list(&format!("/cluster/ha/rules?{filter}")).await;
        assert_eq!(filtered.len(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn creating_rules_checks_references_and_feasibility() {
    let s = with_rules(json!([]));
    let node_rule = |resources, nodes| {
        [
            ("rule", "xx"),
            ("type", "node-affinity"),
            ("resources", resources),
            ("nodes", nodes),
        ]
    };
    for (params, reason) in [
        (
            node_rule("vm:102", "pve1"),
            "cannot use unmanaged resource(s) vm:102.",
        ),
        (
            node_rule("vm:110", "pve7"),
            "cannot use non-existant node(s) pve7.",
        ),
    ] {
        s.post("/cluster/ha/rules", &params)
            .await
            .assert_reason(reason);
    }
    let apart = |resources| {
        [
            ("rule", "keep-apart"),
            ("type", "resource-affinity"),
            ("resources", resources),
            ("affinity", "negative"),
        ]
    };
    let r = s.post("/cluster/ha/rules", &apart("vm:110")).await;
    r.assert_refused(400, "Rule 'keep-apart' is invalid.");
    assert_eq!(
        r.json["errors"]["resources"],
        "rule is ineffective as there are less than two resources"
    );
    let ok = s.post("/cluster/ha/rules", &apart("vm:110,vm:100")).await;
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(
        s.get("/cluster/ha/rules/keep-apart").await.data()["resources"],
        "vm:110,vm:100"
    );
    assert_eq!(s.delete("/cluster/ha/rules/keep-apart").await.status, 200);
    let gone = s.get("/cluster/ha/rules/keep-apart").await;
    gone.assert_reason("no such ha rule 'keep-apart'");
}

#[tokio::test(start_paused = true)]
async fn strict_node_affinity_blocks_nodes_in_the_precondition_and_in_ha() {
    let s = with_rules(json!([
        {"rule": "pin", "type": "node-affinity", "resources": "vm:110", "nodes": "pve1,pve3", "strict": 1}]));
    let p = s.get_data("/nodes/pve1/qemu/110/migrate").await;
    assert_eq!(p["allowed_nodes"], json!(["pve3"]));
    assert_eq!(
        p["not_allowed_nodes"]["pve2"]["blocking-ha-resources"],
        json!([{"sid": "vm:110", "cause": "node-affinity"}])
    );
    let r = s
        .post("/cluster/ha/resources/vm:110/migrate", &[("node", "pve2")])
        .await;
    assert_eq!(
        r.data()["blocking-resources"],
        json!([{"sid": "vm:110", "cause": "node-affinity"}])
    );
    // The CRM ignores a command its rules forbid: the VM stays.
    let upid = s.live_migrate("pve1", "qemu/110", "pve2").await;
    s.wait(&upid).await;
    s.assert_node_after(10.0, "qemu/110", "pve1").await;
}

#[tokio::test(start_paused = true)]
async fn maintenance_moves_ha_guests_away_and_back() {
    let s = TestSim::cluster();
    assert_eq!(s.set_maintenance("pve1", true).await.status, 200);
    let node = s.resource("node/pve1").await;
    assert_eq!(node["hastate"], "maintenance");
    let lrm = s.ha_entry("lrm:pve1").await;
    assert!(
        lrm["status"]
            .as_str()
            .unwrap()
            .starts_with("pve1 (maintenance mode, "),
        "{lrm}"
    );
    let ms = s.get_data("/cluster/ha/status/manager_status").await;
    assert_eq!(ms["manager_status"]["node_status"]["pve1"], "maintenance");
    assert_eq!(ms["lrm_status"]["pve1"]["mode"], "maintenance");
    assert_eq!(
        ms["manager_status"]["node_request"]["pve1"]["maintenance"],
        1
    );
    // HA delay 2 s + 4 s migration; the VM goes to the node with most free memory (pve2).
    sleep(7.0).await;
    assert_eq!(s.node_of("qemu/110").await, "pve2");
    let ms = s.get_data("/cluster/ha/status/manager_status").await;
    assert_eq!(
        ms["manager_status"]["service_status"]["vm:110"]["maintenance_node"],
        "pve1"
    );
    // Non-HA guests stay put: evacuating them is the scheduler's job.
    assert_eq!(s.node_of("qemu/100").await, "pve1");
    assert_eq!(s.set_maintenance("pve1", false).await.status, 200);
    s.assert_node_after(7.0, "qemu/110", "pve1").await;
    assert_eq!(s.resource("node/pve1").await["hastate"], "online");
}

#[tokio::test(start_paused = true)]
async fn a_dead_node_is_fenced_and_its_ha_guests_recovered() {
    let s = cluster_with(|doc| doc["sim"]["ha_fence_delay_secs"] = json!(60));
    s.set_node_status("pve1", "offline").await;
    let node = s.resource("node/pve1").await;
    assert_eq!(node["status"], "offline");
    assert!(node.get("mem").is_none(), "an offline node has no stats");
    assert_eq!(s.resource("qemu/100").await["status"], "unknown");
    let r = s.get("/nodes/pve1/qemu").await;
    assert_eq!(r.status, 595);
    s.assert_node_after(30.0, "qemu/110", "pve1").await;
    sleep(31.0).await;
    // Recovered to the node with most free memory.
    s.assert_resource("qemu/110", &[("node", "pve2"), ("status", "running")])
        .await;
    assert_eq!(
        s.node_of("qemu/100").await,
        "pve1",
        "non-HA guests stay with their node"
    );
    s.set_node_status("pve1", "online").await;
    assert_eq!(s.resource("qemu/100").await["status"], "running");
}

#[tokio::test(start_paused = true)]
async fn ha_resources_can_be_added_changed_and_removed() {
    let s = TestSim::cluster();
    let list = s.list("/cluster/ha/resources").await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["sid"], "vm:110");
    assert_eq!(list[0]["type"], "vm");
    let stopped = [("sid", "102"), ("state", "stopped")];
    s.post("/cluster/ha/resources", &stopped).await.assert_ok();
    let r = s.post("/cluster/ha/resources", &[("sid", "vm:102")]).await;
    r.assert_reason("resource ID 'vm:102' already defined");
    let vm102 = "/cluster/ha/resources/vm:102";
    assert_eq!(s.get_data(vm102).await["state"], "stopped");
    let started = [("state", "started"), ("comment", "go")];
    s.put(vm102, &started).await.assert_ok();
    sleep(5.0).await;
    assert_eq!(
        s.resource("qemu/102").await["status"],
        "running",
        "HA starts a resource set to started"
    );
    assert_eq!(s.resource("qemu/102").await["hastate"], "started");
    let cur = s.get_data("/nodes/pve2/qemu/102/status/current").await;
    assert_eq!(cur["ha"]["managed"], 1);
    assert_eq!(s.delete("/cluster/ha/resources/vm:102").await.status, 200);
    assert!(s.resource("qemu/102").await.get("hastate").is_none());
    assert_eq!(
        s.get("/nodes/pve2/qemu/102/status/current").await.data()["ha"]["managed"],
        0
    );
}

#[tokio::test(start_paused = true)]
async fn relocation_stops_moves_and_starts_the_vm() {
    let s = TestSim::cluster();
    let r = s
        .post("/cluster/ha/resources/vm:110/relocate", &[("node", "pve2")])
        .await;
    assert_eq!(r.data()["requested-node"], "pve2");
    sleep(3.0).await; // HA delay 2 s, then the guest is shut down for the move
    let relocating = [("status", "stopped"), ("hastate", "relocate")];
    s.assert_resource("qemu/110", &relocating).await;
    sleep(10.0).await;
    let moved = [
        ("node", "pve2"),
        ("status", "running"),
        ("hastate", "started"),
    ];
    s.assert_resource("qemu/110", &moved).await;
}

fn with_failback(nodes: &str, failback: u8) -> TestSim {
    with_ha(
        json!({"sid": "vm:100", "state": "started", "failback": failback}),
        json!([{"rule": "prefer", "type": "node-affinity", "resources": "vm:100", "nodes": nodes}]),
    )
}

/// Migrates HA guest 100 from pve1 to pve3 through the API and waits until it landed.
async fn move_100_to_pve3(s: &TestSim) {
    let upid = s.live_migrate("pve1", "qemu/100", "pve3").await;
    assert!(upid.contains(":hamigrate:100:"), "{upid}");
    // HA delay 2 s, then 4 GiB at 1 GiB/s.
    s.assert_node_after(6.5, "qemu/100", "pve3").await;
}

#[tokio::test(start_paused = true)]
async fn failback_undoes_a_move_against_node_affinity() {
    let s = with_failback("pve1:2,pve2", 1);
    move_100_to_pve3(&s).await;
    // The next CRM round (HA delay 2 s) migrates it back to its highest-priority node.
    sleep(2.5).await;
    s.assert_resource("qemu/100", &[("lock", "migrate"), ("hastate", "migrate")])
        .await;
    sleep(4.0).await;
    s.assert_resource("qemu/100", &[("node", "pve1"), ("hastate", "started")])
        .await;
    let back = s.migrate_tasks("100").await;
    assert_eq!(back.len(), 2, "there and back: {back:?}");
    // Settled: no further moves.
    s.assert_node_after(60.0, "qemu/100", "pve1").await;
}

#[tokio::test(start_paused = true)]
async fn without_failback_a_moved_guest_stays() {
    let s = with_failback("pve1:2,pve2", 0);
    move_100_to_pve3(&s).await;
    s.assert_node_after(60.0, "qemu/100", "pve3").await;
}

#[tokio::test(start_paused = true)]
async fn failback_picks_the_top_node_with_fewest_ha_services() {
    // pve1 and pve2 share the top priority; pve1 holds 110 and 120, pve2 none.
    let s = with_failback("pve1:2,pve2:2,pve3:1", 1);
    move_100_to_pve3(&s).await;
    s.assert_node_after(7.0, "qemu/100", "pve2").await;
    // pve2 is in the top class: moving there is not undone.
    s.assert_node_after(60.0, "qemu/100", "pve2").await;
}

#[tokio::test(start_paused = true)]
async fn a_recovered_guest_fails_back_when_its_node_returns() {
    let s = with_failback("pve1:2,pve2", 1);
    s.set_node_status("pve1", "offline").await;
    s.assert_node_after(61.0, "qemu/100", "pve2").await;
    s.set_node_status("pve1", "online").await;
    s.assert_node_after(7.0, "qemu/100", "pve1").await;
}

#[tokio::test(start_paused = true)]
async fn a_scenario_with_a_guest_off_its_preferred_node_fails_back_after_load() {
    let s = with_failback("pve2:2,pve1", 1);
    assert_eq!(s.node_of("qemu/100").await, "pve1");
    s.assert_node_after(7.0, "qemu/100", "pve2").await;
}

#[tokio::test(start_paused = true)]
async fn scenario_rules_naming_unknown_resources_or_nodes_carry_errors_and_are_ignored() {
    let s = with_rules(json!([
        {"rule": "ghost", "type": "node-affinity", "resources": "vm:999,vm:102", "nodes": "pve1"},
        {"rule": "far", "type": "node-affinity", "resources": "vm:100", "nodes": "pve1,zulu", "strict": 1},
    ]));
    let rules = s.list("/cluster/ha/rules").await;
    assert_eq!(
        rules[0]["errors"],
        json!({"resources": ["cannot use unmanaged resource(s) vm:102, vm:999."]})
    );
    assert_eq!(
        rules[1]["errors"],
        json!({"nodes": ["cannot use non-existant node(s) zulu."]})
    );
    // HA ignores an infeasible rule: the strict pin does not block pve2.
    let p = s.get_data("/nodes/pve1/qemu/100/migrate").await;
    assert_eq!(p["allowed_nodes"], json!(["pve2", "pve3"]));
}

#[tokio::test(start_paused = true)]
async fn an_ha_start_of_a_locked_guest_fails_and_the_service_enters_error() {
    // Proxmox's LRM starts an HA guest through qemu-server's vm_start, which refuses a locked
    // guest ("VM is locked (backup)"); the restart and relocation attempts (pve-ha-manager
    // `LRM::handle_service_exitcode`, `Manager::next_state_started`) fail on the same lock and the
    // CRM puts the service in the `error` state. The guest stays stopped.
    let s = cluster_with(|doc| resource_entry(doc, "qemu/102")["lock"] = json!("backup"));
    let r = s
        .post(
            "/cluster/ha/resources",
            &[("sid", "vm:102"), ("state", "started")],
        )
        .await;
    assert_eq!(r.status, 200);
    sleep(10.0).await;
    s.assert_resource("qemu/102", &[("status", "stopped"), ("hastate", "error")])
        .await;
    assert_eq!(s.ha_entry("service:vm:102").await["state"], "error");
    // The failed start is a task with Proxmox's message.
    let tasks = s.tasks().await;
    let failed = tasks
        .iter()
        .find(|t| t["type"] == "qmstart" && t["id"] == "102")
        .unwrap();
    assert_eq!(failed["status"], "VM is locked (backup)");
}
