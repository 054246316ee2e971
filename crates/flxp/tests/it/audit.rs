//! The audit log through the API: actions through GraphQL are recorded with the token's name and
//! role, read back with `auditLog`, kept across a restart, rotated, and free of secrets; and a
//! webhook receives the events of `flxp serve`.

use std::sync::{Arc, Mutex};

use flxp_sim::Scenario;
use serde_json::{Value, json};

use super::serve::{API_TOKEN, PASSWORD, Service, start};

const CI: &str = "ci-pipeline-secret-0b7d2e";
const VIEWER: &str = "grafana-viewer-secret-4c1a";
/// The secret half of the Proxmox token the test config holds.
const PVE_SECRET: &str = "5f0c3a8e-1d2b-4c6f-9a7e-3b2d1c0f9e8d";

fn tokens() -> String {
    format!(
        "[api]\ntokens = [{{ value = \"{CI}\", name = \"ci\" }}, {{ value = \"{VIEWER}\", role = \"viewer\", name = \"grafana\" }}]\n"
    )
}

const LOG: &str = "query($since: Int) { auditLog(zone: \"lab\", since: $since) { time token role action zone args outcome error plan result } }";

async fn audit_log(s: &Service) -> Vec<Value> {
    let (status, v) = s.gql_as(Some(VIEWER), LOG, json!({})).await;
    assert_eq!(status, 200, "{v}");
    v["data"]["auditLog"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .clone()
}

/// A mutation without variables, sent with `token`; the answer, whatever its status.
async fn mutate(s: &Service, token: &str, mutation: &str) -> Value {
    s.gql_as(Some(token), mutation, json!({})).await.1
}

/// The viewer's attempt to mark pve1 for maintenance, checked to be refused.
async fn viewer_refused(s: &Service) {
    let v = mutate(
        s,
        VIEWER,
        "mutation { maintenance(zone: \"lab\", node: \"pve1\", on: true) }",
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "FORBIDDEN", "{v}");
}

/// (action, token, role, outcome) of each entry, newest first.
fn rows(log: &[Value]) -> Vec<(String, String, String, String)> {
    log.iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_owned();
            (s("action"), s("token"), s("role"), s("outcome"))
        })
        .collect()
}

fn row(a: &str, t: &str, r: &str, o: &str) -> (String, String, String, String) {
    (a.into(), t.into(), r.into(), o.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_through_graphql_are_audited_by_token_name_kept_across_restarts_and_hold_no_secret()
{
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap().to_owned();
    let env = [("STATE_DIRECTORY", dir.as_str())];
    let s = start(Scenario::demo(), &tokens(), &env).await;

    let v = mutate(&s, CI, "mutation { rebalance(zone: \"lab\") { executed } }").await;
    assert_eq!(v["data"]["rebalance"]["executed"], true, "{v}");
    // A dry run plans only: not recorded.
    let v = mutate(
        &s,
        CI,
        "mutation { rebalance(zone: \"lab\", dryRun: true) { executed } }",
    )
    .await;
    assert_eq!(v["data"]["rebalance"]["executed"], false, "{v}");
    // A viewer's attempt to act is refused, and recorded as such.
    viewer_refused(&s).await;
    // `FLXP_API_TOKEN` is named after the variable; the password is never written.
    let v = s.create("audited-vm").await;
    let node = v["data"]["createVM"]["host"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned();
    let vmid = v["data"]["createVM"]["id"].as_str().unwrap().to_owned();

    let log = audit_log(&s).await;
    assert_eq!(
        rows(&log),
        [
            row("createVM", "FLXP_API_TOKEN", "operator", "ok"),
            row("maintenance", "grafana", "viewer", "refused"),
            row("rebalance", "ci", "operator", "ok"),
        ]
    );
    let create = &log[0];
    assert_eq!(create["zone"], "lab");
    assert_eq!(create["args"]["options"]["password"], "[redacted]");
    assert_eq!(create["args"]["name"], "audited-vm");
    assert_eq!(
        create["result"],
        json!({ "vmid": vmid, "name": "audited-vm", "node": node })
    );
    assert_eq!(
        log[1]["error"],
        "maintenance needs a token with role operator; this token's role is viewer (read and plan only)"
    );
    assert_eq!(
        log[1]["args"],
        json!({ "zone": "lab", "node": "pve1", "on": true })
    );
    assert_eq!(log[2]["result"]["executed"], true);
    assert!(log[2]["plan"]["migrations"].is_array(), "{}", log[2]);
    let since = log[1]["time"].as_i64().unwrap();
    let (_, v) = s
        .gql_as(Some(VIEWER), LOG, json!({ "since": since + 1_000_000 }))
        .await;
    assert_eq!(v["data"]["auditLog"], json!([]), "{v}");

    let file = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    assert_eq!(file.lines().count(), 3);
    for secret in [CI, VIEWER, API_TOKEN, PVE_SECRET, PASSWORD] {
        assert!(!file.contains(secret), "{secret} in the audit log:\n{file}");
    }
    drop(s);

    // A restarted service reads what the last one wrote.
    let again = start(Scenario::demo(), &tokens(), &env).await;
    assert_eq!(rows(&audit_log(&again).await), rows(&log));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_is_rotated_by_size_keeping_the_configured_files() {
    let extra = format!("{}[audit]\nmax-size = \"4KiB\"\nkeep = 1\n", tokens());
    let s = start(Scenario::demo(), &extra, &[]).await;
    let path = s.config.parent().unwrap().join("audit.jsonl");
    // Each refused attempt is a line of about 250 bytes: 60 fill more than two files of 4 KiB.
    for _ in 0..60 {
        viewer_refused(&s).await;
    }
    let current = std::fs::metadata(&path).unwrap().len();
    let rotated = std::fs::metadata(path.with_extension("jsonl.1"))
        .unwrap()
        .len();
    assert!(current <= 4096 && rotated <= 4096, "{current} {rotated}");
    assert!(!path.with_extension("jsonl.2").exists());
    let kept = audit_log(&s).await.len();
    let lines = std::fs::read_to_string(&path).unwrap().lines().count()
        + std::fs::read_to_string(path.with_extension("jsonl.1"))
            .unwrap()
            .lines()
            .count();
    assert_eq!(kept, lines);
    assert!(kept < 60, "older lines rotated away: {kept}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_with_a_megabyte_name_leaves_a_short_record() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap().to_owned();
    let s = start(
        Scenario::demo(),
        &tokens(),
        &[("STATE_DIRECTORY", dir.as_str())],
    )
    .await;
    // Half a megabyte: the request body limit is 1 MiB.
    let node = "n".repeat(512 << 10);
    let (_, v) = s
        .gql_as(
            Some(VIEWER),
            "mutation($node: String!) { maintenance(zone: \"lab\", node: $node, on: true) }",
            json!({ "node": node }),
        )
        .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "FORBIDDEN", "{v}");
    let file = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    assert_eq!(file.lines().count(), 1, "one record");
    assert!(file.len() < 4096, "a record of {} bytes", file.len());
    let log = audit_log(&s).await;
    let kept = log[0]["args"]["node"].as_str().unwrap();
    assert!(
        kept.starts_with("nnnn") && kept.ends_with("… (524288 bytes in all)"),
        "{}",
        &kept[kept.len().saturating_sub(60)..]
    );
}

/// A receiver on 127.0.0.1 that keeps every body.
async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::Json<Value>| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(body.0);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), got)
}

/// Waits until the receiver holds an event named `kind`, at most a minute.
async fn wait_for(got: &Arc<Mutex<Vec<Value>>>, kind: &str) -> Value {
    for _ in 0..600 {
        if let Some(e) = got.lock().unwrap().iter().find(|e| e["event"] == kind) {
            return e.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no {kind} event: {:?}", got.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sends_its_lease_and_maintenance_events_to_a_webhook() {
    let (url, got) = receiver().await;
    let extra =
        format!("[[webhook]]\nurl = \"{url}\"\nevents = [\"lease.taken\", \"maintenance.step\"]\n");
    let s = start(Scenario::demo(), &extra, &[]).await;
    let taken = wait_for(&got, "lease.taken").await;
    assert_eq!(taken["zone"], "lab");
    assert_eq!(taken["source"], "serve");
    assert_eq!(
        taken["text"],
        "flxp: took the lease of zone lab: this flxp acts there now"
    );
    let v = s
        .query("mutation { maintenance(zone: \"lab\", node: \"pve2\", on: true) }")
        .await;
    assert_eq!(v["data"]["maintenance"], true, "{v}");
    let step = wait_for(&got, "maintenance.step").await;
    assert_eq!(
        step["details"],
        json!({ "node": "pve2", "step": "entered" })
    );
    assert_eq!(
        step["text"],
        "flxp: node pve2 in zone lab: maintenance entered"
    );
    // The filter keeps everything else away.
    let kinds: Vec<Value> = got
        .lock()
        .unwrap()
        .iter()
        .map(|e| e["event"].clone())
        .collect();
    assert!(
        kinds
            .iter()
            .all(|k| k == "lease.taken" || k == "maintenance.step"),
        "{kinds:?}"
    );
}

/// A one-off command sends its events before it exits: `flxp maintenance` marks a node, and the
/// webhook has the step when the command has returned.
#[test]
fn a_one_off_command_sends_its_events_before_it_exits() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (url, got) = runtime.block_on(receiver());
    let doc = json!({ "resources": [
        { "id": "node/pve1", "type": "node", "node": "pve1", "status": "online", "maxmem": 68719476736u64, "mem": 8589934592u64, "maxcpu": 16, "cpu": 0.1 },
        { "id": "node/pve2", "type": "node", "node": "pve2", "status": "online", "maxmem": 68719476736u64, "mem": 8589934592u64, "maxcpu": 16, "cpu": 0.1 }
    ], "time": 1_764_400_000 })
    .to_string();
    let z = super::cli_balance::sim_zone(
        &doc,
        100.0,
        &format!("[[webhook]]\nurl = \"{url}\"\n"),
        |_| {},
    );
    let (code, _, err) = z.run(&["maintenance", "pve2"]);
    assert_eq!(code, 0, "{err}");
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["event"], "maintenance.step");
    assert_eq!(got[0]["source"], "maintenance");
    assert_eq!(
        got[0]["details"],
        json!({ "node": "pve2", "step": "entered" })
    );
}
