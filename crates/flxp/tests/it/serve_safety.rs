//! Actions that are safe to repeat: `createVM` with an idempotency key creates one VM however
//! often (and however concurrently) it is sent; a plan carries the fingerprint of the cluster it
//! was made on, and carrying it out once more, or on a changed cluster, is refused.

use flxp_sim::Scenario;
use serde_json::{Value, json};

use crate::serve::{CREATE, code, create_vars, demo, start};

const CREATE_ONCE: &str = r#"
mutation Create($zone: String!, $name: String!, $options: CreateVMOptions!, $key: String) {
  createVM(zone: $zone, name: $name, options: $options, idempotencyKey: $key) { id name host { name } }
}"#;

/// Where every guest is.
const GUESTS: &str = r#"{ guests(zone: "lab") { vmid node } }"#;

/// A valid `createVM` of `name` without the anti-affinity tag (so that several fit), with `key`.
fn keyed(name: &str, key: &str) -> Value {
    let mut v = create_vars(name);
    v["options"]["tags"] = json!([]);
    v["key"] = json!(key);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_creates_one_vm_under_concurrent_requests() {
    let s = demo().await;
    let before = s.guest_count();
    let answers = futures_util::future::join_all(
        (0..6).map(|_| s.gql(CREATE_ONCE, keyed("same-web", "submit-1"))),
    )
    .await;
    let ids: Vec<&Value> = answers
        .iter()
        .map(|v| &v["data"]["createVM"]["id"])
        .collect();
    assert!(ids[0].is_string(), "{}", answers[0]);
    for (v, id) in answers.iter().zip(&ids) {
        assert_eq!(*id, ids[0], "{v}");
    }
    s.wait_guests(before + 1).await;
    // A retry later answers the same VM and creates nothing.
    let again = s.gql(CREATE_ONCE, keyed("same-web", "submit-1")).await;
    assert_eq!(&again["data"]["createVM"]["id"], ids[0], "{again}");
    assert_eq!(s.guest_count(), before + 1);
    // The key belongs to that VM: another name with it is refused.
    let other = s.gql(CREATE_ONCE, keyed("other-web", "submit-1")).await;
    assert_eq!(code(&other), "BAD_INPUT", "{other}");
    assert_eq!(
        other["errors"][0]["message"],
        "idempotencyKey: \"submit-1\" was used for another VM (zone lab, name same-web); use a new key for each VM"
    );
    // A new key, and no key at all, create.
    let fresh = s.gql(CREATE_ONCE, keyed("same-web", "submit-2")).await;
    assert!(fresh["data"]["createVM"]["id"].is_string(), "{fresh}");
    assert_ne!(&fresh["data"]["createVM"]["id"], ids[0]);
    let mut vars = create_vars("bare-web");
    vars["options"]["tags"] = json!([]);
    let bare = s.gql(CREATE, vars).await;
    assert!(bare["data"]["createVM"]["id"].is_string(), "{bare}");
    assert_eq!(s.guest_count(), before + 3);
    let (_, metrics) = s.get("/metrics").await;
    assert!(
        metrics.contains("flxp_create_vm_total{zone=\"lab\",outcome=\"success\"} 3"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_carried_out_once_or_made_on_another_cluster_is_refused_as_stale() {
    let s = start(Scenario::demo(), "", &[]).await;
    let plan = s
        .query(r#"{ rebalancePlan(zone: "lab") { fingerprint migrations { vmid bytes } } }"#)
        .await;
    let fp = plan["data"]["rebalancePlan"]["fingerprint"].clone();
    assert_eq!(fp.as_str().map(str::len), Some(16), "{plan}");
    let migrations = plan["data"]["rebalancePlan"]["migrations"]
        .as_array()
        .unwrap();
    assert!(!migrations.is_empty(), "{plan}");
    assert!(
        migrations.iter().all(|m| m["bytes"].as_u64() > Some(0)),
        "{plan}"
    );
    // Asking again on the same cluster gives the same fingerprint.
    let again = s
        .query(r#"{ rebalancePlan(zone: "lab") { fingerprint } }"#)
        .await;
    assert_eq!(again["data"]["rebalancePlan"]["fingerprint"], fp);

    const RUN: &str =
        r#"mutation($f: String) { rebalance(zone: "lab", fingerprint: $f) { executed done } }"#;
    // Two clicks on one plan: the first carries it out, the second finds the cluster changed.
    let (first, second) = tokio::join!(
        s.gql(RUN, json!({ "f": fp })),
        s.gql(RUN, json!({ "f": fp }))
    );
    let (ran, refused) = if first["errors"].is_null() {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(ran["data"]["rebalance"]["executed"], true, "{ran}");
    assert!(
        ran["data"]["rebalance"]["done"].as_u64() >= Some(1),
        "{ran}"
    );
    assert_eq!(code(&refused), "STALE_PLAN", "{refused}");
    let placed = s.query(GUESTS).await;
    let third = s.gql(RUN, json!({ "f": fp })).await;
    assert_eq!(code(&third), "STALE_PLAN", "{third}");
    assert_eq!(s.query(GUESTS).await, placed, "a stale plan moved guests");

    // An evacuation plan of one node is not a plan of another.
    let ev = s
        .query(r#"{ evacuationPlan(zone: "lab", node: "pve2") { fingerprint } }"#)
        .await;
    let efp = ev["data"]["evacuationPlan"]["fingerprint"].clone();
    let other = s
        .gql(
            r#"mutation($f: String) { evacuate(zone: "lab", node: "pve3", fingerprint: $f) { executed } }"#,
            json!({ "f": efp }),
        )
        .await;
    assert_eq!(code(&other), "STALE_PLAN", "{other}");
    let own = s
        .gql(
            r#"mutation($f: String) { evacuate(zone: "lab", node: "pve2", fingerprint: $f) { executed } }"#,
            json!({ "f": efp }),
        )
        .await;
    assert_eq!(own["data"]["evacuate"]["executed"], true, "{own}");
}

const POWER: &str =
    r#"mutation($n: String!, $a: PowerAction!) { power(zone: "lab", node: $n, action: $a) }"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_switches_an_emptied_node_off_and_wakes_it_only_where_configured() {
    let off = demo().await;
    let v = off.query("{ zones { name power } }").await;
    assert_eq!(
        v["data"]["zones"],
        json!([{ "name": "lab", "power": false }])
    );
    let v = off
        .gql(POWER, json!({ "n": "pve2", "a": "SHUTDOWN" }))
        .await;
    assert_eq!(code(&v), "BAD_INPUT", "{v}");

    let s = start(Scenario::demo(), "[consolidate]\nshutdown = true\n", &[]).await;
    let v = s.query("{ zones { power } }").await;
    assert_eq!(v["data"]["zones"][0]["power"], true, "{v}");
    let v = s.gql(POWER, json!({ "n": "pve2", "a": "SHUTDOWN" })).await;
    assert_eq!(code(&v), "BAD_INPUT", "{v}");
    assert_eq!(
        v["errors"][0]["message"],
        "node pve2 is not switched off: it is not in maintenance"
    );
    let v = s.gql(POWER, json!({ "n": "nope", "a": "WAKE" })).await;
    assert_eq!(code(&v), "UNKNOWN_NODE", "{v}");
    let ev = s
        .query(
            r#"mutation { evacuate(zone: "lab", node: "pve2") { executed leftRunning { vmid } } }"#,
        )
        .await;
    assert_eq!(ev["data"]["evacuate"]["executed"], true, "{ev}");
    let v = s.gql(POWER, json!({ "n": "PVE2", "a": "SHUTDOWN" })).await;
    assert_eq!(v["data"]["power"], "pve2 is shutting down", "{v}");
    crate::serve::until(&s, "pve2 off", 30, || {
        !s.sim.sim().world().nodes["pve2"].online
    })
    .await;
    let v = s.gql(POWER, json!({ "n": "pve2", "a": "WAKE" })).await;
    let text = v["data"]["power"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(text.starts_with("Wake-on-LAN sent to pve2 ("), "{text}");
}
