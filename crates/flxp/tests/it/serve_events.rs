//! `GET /events` of `flxp serve` followed as a script follows it: a rolling maintenance started
//! through the API is a run on the stream (its start, each node's step, its end with the
//! outcome) and in `rollingRun` while it runs and after, the daemon's migrations are events like a run's, and SIGTERM during a rolling
//! maintenance stops it before its next step, says so on the stream, gives the lease back, ends
//! the stream and exits.

use std::collections::BTreeSet;
use std::time::Duration;

use flxp_sim::Scenario;
use serde_json::{Value, json};

use super::serve::{API_TOKEN, PARALLEL_MIGRATIONS, Service, guests, start};

/// The events of one `GET /events` stream, as JSON documents in the order sent.
struct Events {
    rx: tokio::sync::mpsc::UnboundedReceiver<Value>,
}

impl Events {
    /// Opens the stream: every event sent after this returns is received.
    async fn open(s: &Service) -> Self {
        let mut resp = s
            .http
            .get(format!("{}/events", s.url))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut buf: Vec<u8> = Vec::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                buf.extend_from_slice(&chunk);
                // One event per blank-line-terminated block; its `data:` lines are the JSON.
                while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let block: Vec<u8> = buf.drain(..end + 2).collect();
                    let text = String::from_utf8(block).unwrap();
                    let data: Vec<&str> = text
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    if !data.is_empty() {
                        let _ = tx.send(serde_json::from_str(&data.join("\n")).unwrap());
                    }
                }
            }
        });
        Self { rx }
    }

    /// The next event, or `None` once the stream ended; panics after `secs`.
    async fn next(&mut self, secs: u64) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(secs), self.rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no event within {secs} s"))
    }

    /// The events of the kinds in `kinds`, up to and including the first that `last` accepts.
    async fn until(&mut self, kinds: &[&str], last: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let e = self.next(120).await.expect("the stream ended early");
            if !kinds.contains(&e["event"].as_str().unwrap_or_default()) {
                continue;
            }
            let end = last(&e);
            out.push(e);
            if end {
                return out;
            }
        }
    }
}

/// What a run's events say, in order: `run-started`/`run-ended` with their goal, each
/// `rolling-step` as `node step`, each migration as `done vmid from → to`.
fn outline(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] != "started")
        .map(|e| match e["event"].as_str().unwrap() {
            "rolling-step" => format!("step {} {}", e["node"], e["step"]),
            "done" => format!("done {} {} → {}", e["vmid"], e["from"], e["to"]),
            other => format!("{other} {}", e["goal"]),
        })
        .collect()
}

/// The vmids of the migration events of kind `kind` among `events` that `which` accepts.
fn vmids(events: &[Value], kind: &str, which: impl Fn(&Value) -> bool) -> BTreeSet<u64> {
    events
        .iter()
        .filter(|e| e["event"] == kind && which(e))
        .map(|e| e["vmid"].as_u64().unwrap())
        .collect()
}

/// An event's field names, sorted.
fn keys(e: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

const RUN: &[&str] = &[
    "run-started",
    "run-ended",
    "rolling-step",
    "started",
    "done",
    "failed",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_maintenance_started_through_the_api_is_a_run_on_the_event_stream() {
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    let on_pve2: BTreeSet<u64> = guests(&s)
        .into_iter()
        .filter(|(_, n)| n == "pve2")
        .map(|(v, _)| u64::from(v))
        .collect();
    assert!(!on_pve2.is_empty());
    let mut events = Events::open(&s).await;
    assert_eq!(rolling_run(&s).await, Value::Null);
    let v = s
        .query("mutation { rollingMaintenance(zone: \"lab\", nodes: [\"pve2\"]) { node step } }")
        .await;
    assert_eq!(
        v["data"]["rollingMaintenance"],
        json!([{ "node": "pve2", "step": "pending" }]),
        "{v}"
    );
    // A poller sees it run (until its end is on the stream, at least)...
    let running = rolling_run(&s).await;
    assert_eq!(running["nodes"], json!(["pve2"]), "{running}");
    assert_eq!(running["outcome"], "running", "{running}");
    assert_eq!(running["exitCode"], Value::Null, "{running}");
    let run = events
        .until(RUN, |e| e["event"] == "run-ended" && e["goal"] == "rolling")
        .await;
    let n = on_pve2.len();
    let outline = outline(&run);
    let steps: Vec<&String> = outline.iter().filter(|l| !l.starts_with("done ")).collect();
    assert_eq!(
        steps,
        [
            "run-started \"rolling\"",
            "step \"pve2\" \"evacuating\"",
            "step \"pve2\" \"waiting\"",
            "step \"pve2\" \"returning\"",
            "step \"pve2\" \"done\"",
            "run-ended \"rolling\"",
        ],
        "{outline:#?}"
    );
    // The guests leave while pve2 is being emptied, and come home after the reboot.
    let at = |line: &str| outline.iter().position(|l| l == line).unwrap();
    let (out, back) = (
        at("step \"pve2\" \"evacuating\""),
        at("step \"pve2\" \"returning\""),
    );
    let leaving: Vec<&String> = outline[out..at("step \"pve2\" \"waiting\"")]
        .iter()
        .filter(|l| l.starts_with("done "))
        .collect();
    let coming: Vec<&String> = outline[back..at("step \"pve2\" \"done\"")]
        .iter()
        .filter(|l| l.starts_with("done "))
        .collect();
    assert_eq!(leaving.len(), n, "{outline:#?}");
    assert_eq!(coming.len(), n, "{outline:#?}");
    assert!(
        leaving.iter().all(|l| l.contains("\"pve2\" → ")),
        "{outline:#?}"
    );
    assert!(
        coming.iter().all(|l| l.ends_with("→ \"pve2\"")),
        "{outline:#?}"
    );
    assert_eq!(vmids(&run, "started", |_| true), on_pve2);
    assert_eq!(vmids(&run, "done", |e| e["from"] == "pve2"), on_pve2);
    assert_eq!(vmids(&run, "done", |e| e["to"] == "pve2"), on_pve2);
    assert_eq!(
        run[0],
        json!({ "event": "run-started", "zone": "lab", "goal": "rolling", "nodes": ["pve2"] })
    );
    assert_eq!(
        run[1],
        json!({ "event": "rolling-step", "zone": "lab", "node": "pve2", "step": "evacuating",
                "summary": "pve2: out of service, being emptied" })
    );
    assert_eq!(
        run.last().unwrap(),
        &json!({ "event": "run-ended", "zone": "lab", "goal": "rolling", "done": 2 * n,
                 "failed": 0, "outcome": "done", "exitCode": 0, "error": null })
    );
    // ...and how it ended, once its progress lines are gone.
    let v = s.query("{ rollingProgress(zone: \"lab\") { node } }").await;
    assert_eq!(v["data"]["rollingProgress"], json!([]), "{v}");
    assert_eq!(
        rolling_run(&s).await,
        json!({ "nodes": ["pve2"], "outcome": "done", "done": 2 * n, "failed": 0,
                "exitCode": 0, "error": null })
    );
}

/// The zone's `rollingRun`.
async fn rolling_run(s: &Service) -> Value {
    let v = s
        .query("{ rollingRun(zone: \"lab\") { nodes outcome done failed exitCode error } }")
        .await;
    assert!(v["errors"].is_null(), "{v}");
    v["data"]["rollingRun"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_taken_home_after_the_api_clears_maintenance_are_a_run_on_the_event_stream() {
    let s = start(Scenario::demo(), PARALLEL_MIGRATIONS, &[]).await;
    let v = s
        .query("mutation { evacuate(zone: \"lab\", node: \"pve4\") { done } }")
        .await;
    let away = v["data"]["evacuate"]["done"].as_u64().unwrap();
    assert!(away > 0, "{v}");
    let mut events = Events::open(&s).await;
    let v = s
        .query("mutation { maintenance(zone: \"lab\", node: \"pve4\", on: false) }")
        .await;
    assert_eq!(v["data"]["maintenance"], true, "{v}");
    let run = events.until(RUN, |e| e["event"] == "run-ended").await;
    let n = usize::try_from(away).unwrap();
    assert_eq!(
        run[0],
        json!({ "event": "run-started", "zone": "lab", "goal": "return-home", "migrations": n })
    );
    assert_eq!(
        run.last().unwrap(),
        &json!({ "event": "run-ended", "zone": "lab", "goal": "return-home", "done": n, "failed": 0 })
    );
    assert_eq!(
        vmids(&run, "done", |e| e["to"] == "pve4").len(),
        n,
        "{run:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_migrations_are_on_the_event_stream_like_a_runs() {
    // Rounds every second that only empty nodes in maintenance.
    let extra = format!("{PARALLEL_MIGRATIONS}[daemon]\ninterval-secs = 1\nrebalance = false\n");
    let s = start(Scenario::demo(), &extra, &[]).await;
    // 151 is ignored: it stays.
    let leaving: BTreeSet<u64> = guests(&s)
        .into_iter()
        .filter(|(v, n)| n == "pve4" && *v != 151)
        .map(|(v, _)| u64::from(v))
        .collect();
    assert!(!leaving.is_empty());
    let mut events = Events::open(&s).await;
    let v = s
        .query("mutation { maintenance(zone: \"lab\", node: \"pve4\", on: true) }")
        .await;
    assert_eq!(v["data"]["maintenance"], true, "{v}");
    let round = events
        .until(&["started", "done", "failed", "round"], |e| {
            e["event"] == "round" && e["done"] != 0
        })
        .await;
    let (last, moves) = round.split_last().unwrap();
    assert_eq!(last["done"], leaving.len(), "{last}");
    assert_eq!(last["failed"], 0, "{last}");
    assert_eq!(vmids(moves, "started", |e| e["from"] == "pve4"), leaving);
    assert_eq!(vmids(moves, "done", |e| e["from"] == "pve4"), leaving);
    assert_eq!(vmids(moves, "failed", |_| true), BTreeSet::new());
    // The fields of an API run's migration events.
    let started = moves.iter().find(|e| e["event"] == "started").unwrap();
    assert_eq!(
        keys(started),
        [
            "bytes", "event", "from", "name", "online", "step", "to", "vmid", "zone"
        ],
        "{started}"
    );
    assert_eq!(started["zone"], "lab");
    let done = moves.iter().find(|e| e["event"] == "done").unwrap();
    assert_eq!(
        keys(done),
        ["event", "from", "secs", "to", "vmid", "zone"],
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_an_api_rolling_maintenance_stops_it_says_so_and_gives_the_lease_back() {
    // Real time, one migration at a time: the signal comes while pve2 is being emptied.
    let mut scenario = Scenario::demo();
    scenario.sim.time_scale = Some(1.0);
    let mut s = start(scenario, "[migration]\npoll-secs = 1\nparallel = 1\n", &[]).await;
    let booted = s.sim.sim().world().nodes["pve2"].booted_at;
    let mut events = Events::open(&s).await;
    let v = s
        .query("mutation { rollingMaintenance(zone: \"lab\", nodes: [\"pve2\"]) { node step } }")
        .await;
    assert!(v["errors"].is_null(), "{v}");
    let first = events.until(RUN, |e| e["event"] == "started").await;
    let vmid = first.last().unwrap()["vmid"].clone();
    super::sigterm(&s.child);
    // The migration under way is followed to its end; nothing starts after it.
    let rest = events.until(RUN, |e| e["event"] == "run-ended").await;
    let kinds: Vec<&str> = rest.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["done", "run-ended"], "{rest:#?}");
    assert_eq!(rest[0]["vmid"], vmid);
    let end = &rest[1];
    assert_eq!(end["goal"], "rolling");
    assert_eq!(end["outcome"], "stopped", "{end}");
    assert_eq!(end["exitCode"], 1, "{end}");
    assert_eq!(
        (end["done"].clone(), end["failed"].clone()),
        (json!(1), json!(0))
    );
    let error = end["error"].as_str().unwrap();
    assert!(
        error.starts_with("node pve2 stopped at step evacuating: ")
            && error.ends_with("stopped early: a stop was requested"),
        "{error}"
    );
    // Then the stream ends and the process exits, on its own.
    while let Some(e) = events.next(60).await {
        assert!(
            !RUN.contains(&e["event"].as_str().unwrap_or_default()),
            "{e}"
        );
    }
    let status = s.exit_status(60).await;
    assert_eq!(status.code(), Some(0), "{}", s.log());
    // No reboot asked for; the step kept for a rerun; the lease line given back.
    let world = s.sim.sim().world();
    assert_eq!(world.nodes["pve2"].booted_at, booted);
    let notes: Vec<String> = world.nodes.values().map(|n| n.notes.clone()).collect();
    let notes = notes.join("\n");
    assert!(notes.contains("node=pve2 step=evacuating"), "{notes}");
    let lease = flxp_engine::lease::find(&notes, "").expect("a lease line");
    assert_eq!(lease.expires, flxp_engine::lease::FREE, "{notes}");
}
