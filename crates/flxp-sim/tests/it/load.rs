//! Load that moves over time: usage models played back minute by minute, RRD consolidation,
//! pressure from demand over capacity, load that travels with a migrating guest, the workload
//! driver, trace generators, records and trace errors.

use flxp_sim::Scenario;
use flxp_sim::load::model::{Resource, noise_draw};
use flxp_sim::load::{Family, Trace, generate};
use serde_json::{Value, json};

use crate::support::{GIB, TestSim, cluster, live_to};

/// The test cluster's start (`time` of its snapshot) and the minute it falls in.
const START: f64 = 1_764_400_000.0;
const START_MINUTE: f64 = 1_764_399_960.0;

/// The test cluster running `trace`.
fn with_trace(trace: Value) -> TestSim {
    let mut doc = cluster();
    doc["sim"]["trace"] = trace;
    TestSim::new(doc)
}

/// Moves simulated time to `at` (epoch seconds) through the control endpoint.
async fn advance_to(s: &TestSim, at: f64) {
    let secs = at - s.sim.now();
    assert!(secs >= 0.0, "time runs forward only ({secs})");
    s.control("POST", "/_sim/advance", json!({"seconds": secs}))
        .await
        .assert_ok();
}

async fn guest(s: &TestSim, vmid: u32) -> Value {
    s.list("/cluster/resources?type=vm")
        .await
        .into_iter()
        .find(|r| r["vmid"] == vmid)
        .unwrap_or(Value::Null)
}

async fn records(s: &TestSim, since: f64) -> Value {
    s.get(&format!("/_sim/records?since={since}"))
        .await
        .data()
        .clone()
}

#[tokio::test(start_paused = true)]
async fn a_guests_figures_follow_its_model_minute_by_minute() {
    let s = with_trace(json!({
        "seed": 7,
        "models": {"100": {
            "cpu": {"level": 0.1, "growth_per_day": 0.2,
                    "spikes": [{"at": 600, "minutes": 5, "height": 0.5}]},
            "mem": {"level": 0.5, "noise": 0.1}
        }}
    }));
    // Expected values, computed here from the model's definition: level, plus the spike in
    // minutes 10..15 after the start's minute, plus growth per day since then; memory is a
    // fraction of the guest's 4 GiB, with the seeded noise of its minute.
    let cpu_at = |t: f64| {
        let m = (t / 60.0).floor() * 60.0;
        let rel = m - START_MINUTE;
        let spike = if (600.0..900.0).contains(&rel) {
            0.5
        } else {
            0.0
        };
        0.1 + spike + 0.2 * rel.max(0.0) / 86_400.0
    };
    let mem_at = |t: f64| {
        let minute = (t / 60.0).floor() as i64;
        let frac = 0.5 + 0.1 * noise_draw(7, 100, Resource::Mem, minute);
        (frac * (4 * GIB) as f64) as u64
    };
    for rel in [0.0, 599.0, 600.0, 899.0, 900.0, 3600.0, 2.0 * 86_400.0] {
        let t = START_MINUTE + rel;
        let t = t.max(START);
        advance_to(&s, t).await;
        let g = guest(&s, 100).await;
        // serde_json reads floats to within one unit in the last place.
        let cpu = g["cpu"].as_f64().unwrap();
        assert!((cpu - cpu_at(t)).abs() < 1e-15, "cpu at +{rel}: {cpu}");
        assert_eq!(g["mem"].as_u64(), Some(mem_at(t)), "mem at +{rel}");
    }
    // Two days of growth add up to 0.4.
    assert!((cpu_at(START_MINUTE + 2.0 * 86_400.0) - 0.5).abs() < 1e-12);
}

#[tokio::test(start_paused = true)]
async fn rrd_rows_are_the_mean_of_their_minutes() {
    let s = with_trace(json!({
        "seed": 3,
        "models": {"100": {"cpu": {"level": 0.4, "noise": 0.3}}}
    }));
    let value = |minute_start: f64| {
        let minute = (minute_start / 60.0) as i64;
        (0.4 + 0.3 * noise_draw(3, 100, Resource::Cpu, minute)).clamp(0.0, 1.0)
    };
    // A single jump of three hours fills the archives as if the time had passed.
    advance_to(&s, START + 3.0 * 3600.0).await;
    let now = s.sim.now();
    let hour = s.list("/nodes/pve1/qemu/100/rrddata?timeframe=hour").await;
    assert_eq!(hour.len(), 60);
    for row in &hour {
        let end = row["time"].as_f64().unwrap();
        // The 60 s row ending at `end` holds the minute that started at `end - 60`.
        let want = value(end - 60.0);
        let got = row["cpu"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-6, "row {end}: {got} != {want}");
    }
    let week = s.list("/nodes/pve1/qemu/100/rrddata?timeframe=week").await;
    let week_max = s
        .list("/nodes/pve1/qemu/100/rrddata?timeframe=week&cf=MAX")
        .await;
    let last_full = (now / 1800.0).floor() * 1800.0;
    let mut checked = 0;
    for (row, max_row) in week.iter().zip(&week_max) {
        let end = row["time"].as_f64().unwrap();
        if end <= START_MINUTE + 1800.0 || end > last_full {
            continue;
        }
        let minutes: Vec<f64> = (1..=30).map(|k| value(end - 60.0 * f64::from(k))).collect();
        let mean = minutes.iter().sum::<f64>() / 30.0;
        let max = minutes.iter().copied().fold(f64::MIN, f64::max);
        let got = row["cpu"].as_f64().unwrap();
        assert!(
            (got - mean).abs() < 1e-6,
            "30 min row {end}: {got} != {mean}"
        );
        let got_max = max_row["cpu"].as_f64().unwrap();
        assert!(
            (got_max - max).abs() < 1e-6,
            "30 min max {end}: {got_max} != {max}"
        );
        checked += 1;
    }
    assert_eq!(checked, 5, "five whole half-hours after the start's");
}

#[tokio::test(start_paused = true)]
async fn pressure_rises_when_demand_passes_capacity() {
    let mut doc = cluster();
    doc["sim"]["guests"]["100"] = json!({"config": {"cores": 16}});
    doc["sim"]["trace"] = json!({"models": {"100": {"cpu": {"level": 0.2}}}});
    let s = TestSim::new(doc);
    advance_to(&s, START + 120.0).await;
    let r = records(&s, 0.0).await;
    let pve1 = |r: &Value| {
        r["node_samples"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|n| n["node"] == "pve1")
            .cloned()
            .unwrap()
    };
    let calm = pve1(&r);
    assert!(calm["cpu_demand"].as_f64().unwrap() < 16.0 * 0.8, "{calm}");
    assert_eq!(calm["psi_cpu_some"], 0.0, "base pressure below 80 % load");
    assert_eq!(guest(&s, 100).await["cpu"], 0.2);

    // The guest now asks for all its 16 vCPUs on a 16-CPU node that runs others too.
    s.control(
        "POST",
        "/_sim/guests/100/model",
        json!({"cpu": {"level": 1.0}}),
    )
    .await
    .assert_ok();
    advance_to(&s, START + 240.0).await;
    let busy = pve1(&records(&s, START + 180.0).await);
    let demand = busy["cpu_demand"].as_f64().unwrap();
    assert!(demand > 16.0, "{busy}");
    let unserved = (demand - 16.0) / demand;
    let psi = busy["psi_cpu_some"].as_f64().unwrap();
    assert!(
        (psi - (20.0 + 100.0 * unserved)).abs() < 1e-9,
        "saturation (20) plus the unserved share: {psi}"
    );
    // The guest gets its share of what the node can give.
    let cpu = guest(&s, 100).await["cpu"].as_f64().unwrap();
    assert!((cpu - 16.0 / demand).abs() < 1e-9, "{cpu}");
    let rows = s.list("/nodes/pve1/rrddata?timeframe=hour").await;
    let last = rows.last().unwrap();
    assert!((last["pressurecpusome"].as_f64().unwrap() - psi).abs() < 1e-4);
    assert_eq!(last["cpu"], 1.0);
    assert!(
        (last["loadavg"].as_f64().unwrap() - demand).abs() < 1e-4,
        "waiting tasks count"
    );
}

#[tokio::test(start_paused = true)]
async fn a_guests_load_moves_with_it_and_its_migration_is_recorded_once() {
    let s = with_trace(json!({"models": {"100": {"cpu": {"level": 0.5}}}}));
    advance_to(&s, START + 60.0).await;
    let demand = |r: &Value, node: &str| {
        r["node_samples"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|n| n["node"] == node)
            .map(|n| n["cpu_demand"].as_f64().unwrap())
            .unwrap()
    };
    let before = records(&s, 0.0).await;
    let upid = s.migrate("pve1", "qemu/100", &live_to("pve2")).await;
    s.wait_ok(&upid).await;
    advance_to(&s, s.sim.now() + 120.0).await;
    let after = records(&s, 0.0).await;
    // 0.5 of 2 vCPUs: one core leaves pve1 and arrives on pve2.
    assert!((demand(&before, "pve1") - demand(&after, "pve1") - 1.0).abs() < 1e-9);
    assert!((demand(&after, "pve2") - demand(&before, "pve2") - 1.0).abs() < 1e-9);
    let g = guest(&s, 100).await;
    assert_eq!(g["node"], "pve2");
    assert_eq!(g["cpu"], 0.5);

    let migrations = after["migrations"].as_array().unwrap();
    assert_eq!(migrations.len(), 1, "{migrations:?}");
    let m = &migrations[0];
    assert_eq!(m["vmid"], 100);
    assert_eq!(
        (m["from"].as_str(), m["to"].as_str()),
        (Some("pve1"), Some("pve2"))
    );
    assert_eq!(
        m["bytes"],
        4 * GIB,
        "its memory; the disk is on shared ceph"
    );
    assert_eq!(m["user"], "root@pam!test");
    assert_eq!(m["ok"], true);
    // 4 GiB at 1 GiB/s.
    assert_eq!(
        m["end"].as_f64().unwrap() - m["start"].as_f64().unwrap(),
        4.0
    );
    let later = records(&s, m["end"].as_f64().unwrap() + 1.0).await;
    assert!(later["migrations"].as_array().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_workload_driver_creates_and_deletes_guests_at_their_time() {
    let s = with_trace(json!({"events": [
        {"at": 300, "create": {"vmid": 700, "node": "pve2", "name": "batch-1", "cores": 2,
                               "memory": 2048, "tags": "churn",
                               "model": {"cpu": {"level": 0.3}}}},
        {"at": 900, "delete": {"vmid": 700}},
        {"at": 1200, "maintenance": {"node": "pve3", "enable": true, "via": "note"}}
    ]}));
    advance_to(&s, START + 299.0).await;
    assert_eq!(guest(&s, 700).await, Value::Null, "not before its time");
    advance_to(&s, START + 302.0).await;
    let g = guest(&s, 700).await;
    assert_eq!(g["node"], "pve2");
    assert_eq!(g["status"], "running");
    assert_eq!(g["tags"], "churn");
    assert_eq!(g["cpu"], 0.3);
    assert_eq!(g["maxmem"], 2 * GIB);
    let created = s
        .tasks()
        .await
        .into_iter()
        .find(|t| t["type"] == "qmcreate" && t["id"] == "700")
        .unwrap();
    assert_eq!(created["user"], "workload@pve");
    assert_eq!(created["starttime"], START as i64 + 300);

    advance_to(&s, START + 960.0).await;
    assert_eq!(guest(&s, 700).await, Value::Null, "deleted");
    let kinds: Vec<String> = s
        .tasks()
        .await
        .into_iter()
        .filter(|t| t["id"] == "700" && t["user"] == "workload@pve")
        .map(|t| t["type"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(kinds.contains(&"qmstop".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"qmdestroy".to_string()), "{kinds:?}");
    let r = records(&s, 0.0).await;
    let events: Vec<(&str, f64)> = r["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["time"].as_f64().unwrap() - START,
            )
        })
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], ("created", 301.0));
    assert_eq!(events[1].0, "deleted");
    assert!(events[1].1 > 900.0 && events[1].1 < 960.0, "{events:?}");

    advance_to(&s, START + 1201.0).await;
    // Events on minute boundaries (300, 900 and 1200 s after a start 40 s into its minute are
    // not) and between them leave no minute unsampled.
    let minutes = records(&s, 0.0).await["node_samples"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(minutes, 3 * 20, "{minutes}");
    let notes = s.get_data("/nodes/pve3/config").await;
    assert!(
        notes["description"]
            .as_str()
            .unwrap_or_default()
            .contains("flxp.maintenance"),
        "{notes}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_day_jump_samples_every_minute_and_requests_are_counted() {
    // A model change due exactly on a minute boundary must not take that minute's sample.
    let s = with_trace(json!({"events": [
        {"at": 20, "model": {"vmid": 100, "model": {"cpu": {"level": 0.5}}}},
        {"at": 80, "model": {"vmid": 100, "model": {"cpu": {"level": 0.6}}}}
    ]}));
    s.get("/cluster/resources").await.assert_ok();
    s.get("/cluster/resources").await.assert_ok();
    // Every routed call counts, whatever its handler reads (these two read no parameters).
    s.get("/cluster/tasks").await.assert_ok();
    s.get("/cluster/ha/status/current").await.assert_ok();
    advance_to(&s, START_MINUTE + 86_400.0).await;
    let r = records(&s, 0.0).await;
    let samples = r["node_samples"].as_array().unwrap();
    assert_eq!(samples.len(), 3 * 1440, "one per node per minute");
    assert_eq!(samples[0]["time"], START_MINUTE as i64 + 60);
    let count = r["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["path"] == "/cluster/resources" && q["method"] == "GET")
        .unwrap()
        .clone();
    assert_eq!(count["user"], "root@pam!test");
    assert_eq!(count["count"], 2);
    let counted = |path: &str| {
        r["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["path"] == path)
            .map(|q| q["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(counted("/cluster/tasks"), 1);
    assert_eq!(counted("/cluster/ha/status/current"), 1);
    let day = s.list("/nodes/pve1/rrddata?timeframe=day").await;
    assert_eq!(day.len(), 1440);
    assert!(
        day.iter().all(|r| r.get("cpu").is_some()),
        "a full day of rows"
    );
}

#[test]
fn generators_are_deterministic_sized_and_seeded() {
    let demo = Scenario::demo();
    let guests = demo
        .snapshot
        .resources
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .filter(|r| r.template != Some(true))
        .count();
    for family in Family::ALL {
        let a = generate(family, &demo, 7, 7);
        assert_eq!(a, generate(family, &demo, 7, 7), "{family:?}");
        assert_ne!(a, generate(family, &demo, 8, 7), "{family:?}");
        assert_eq!(a.models.len(), guests, "{family:?}");
        assert_eq!(
            Trace::from_json(&a.to_json()).unwrap(),
            a,
            "{family:?} round trip"
        );
        // Every generated trace runs.
        let mut scenario = demo.clone();
        scenario.set_trace(a).unwrap();
    }
    let churn = generate(Family::GrowthChurn, &demo, 7, 7);
    let creates = churn.events.iter().filter(|e| e.create.is_some()).count();
    let deletes = churn.events.iter().filter(|e| e.delete.is_some()).count();
    assert_eq!(
        (creates, deletes),
        (7, 7),
        "one guest a day for the demo's 19"
    );
}

#[test]
fn a_malformed_trace_is_refused_naming_the_json_path() {
    let err = |text: &str| Trace::from_json(text).unwrap_err().to_string();
    assert_eq!(
        err(
            r#"{"events": [{"at": 1, "delete": {"vmid": 100}}, {"at": 5, "create": {"cores": "x"}}]}"#
        ),
        "invalid trace at events[1].create.cores: invalid type: string \"x\", expected u32 at line 1 column 81"
    );
    assert_eq!(
        err(r#"{"models": {"100": {"cpu": {"level": 2}}}}"#),
        "invalid trace at models.100.cpu.level: must be a fraction 0..1, got 2"
    );
    assert!(
        err(r#"{"models": {"100": {"cpu": {"levle": 0.2}}}}"#)
            .starts_with("invalid trace at models.100.cpu.levle: unknown field `levle`"),
    );
    assert_eq!(
        err(r#"{"events": [{"at": 1, "delete": {"vmid": 42}}]}"#),
        "invalid trace at events[0].delete.vmid: '42' is not a VMID (100..999999999)"
    );
    assert_eq!(
        err(r#"{"events": [{"at": 1}]}"#),
        "invalid trace at events[0]: needs exactly one of create, delete, maintenance, model"
    );
    let mut doc = cluster();
    doc["sim"]["trace"] = json!({"models": {"555": {"cpu": {"level": 0.1}}}});
    assert_eq!(
        Scenario::from_value(doc).unwrap_err().to_string(),
        "invalid scenario at sim.trace.models.555: guest 555 is not in the scenario"
    );
    let mut doc = cluster();
    doc["sim"]["trace"] =
        json!({"models": {"100": {"mem": {"windows": [{"from": 8, "to": 30, "add": 0.1}]}}}});
    assert_eq!(
        Scenario::from_value(doc).unwrap_err().to_string(),
        "invalid scenario at sim.trace.models.100.mem.windows[0].to: must be an hour 0..24, got 30"
    );
}

#[test]
fn the_trace_schema_names_every_field_of_the_format() {
    let schema: Value =
        serde_json::from_str(include_str!("../../trace.schema.json")).expect("valid JSON");
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    };
    let defs = &schema["$defs"];
    let full = json!({
        "family": "x", "seed": 1,
        "models": {"100": {"cpu": {"level": 0.1, "idle": true, "daily": {"amplitude": 0.1, "peak": 1},
            "weekly": {"amplitude": 0.1, "peak": 1},
            "windows": [{"from": 1, "to": 2, "add": 0.1, "days": [0]}], "noise": 0.1,
            "spikes": [{"at": 1, "minutes": 1, "height": 0.1}], "growth_per_day": 0.1},
            "mem": {"level": 0.1}}},
        "events": [
            {"at": 1, "create": {"vmid": 700, "node": "pve1", "name": "n", "cores": 1, "memory": 64,
                                  "disk_gib": 1, "tags": "t", "model": {}}},
            {"at": 1, "delete": {"vmid": 700}},
            {"at": 1, "maintenance": {"node": "pve1", "enable": true, "via": "note"}},
            {"at": 1, "model": {"vmid": 100, "model": {}}}
        ]
    });
    // The document parses, and writes back every field the schema describes.
    let trace = Trace::from_json(&full.to_string()).unwrap();
    let back: Value = serde_json::from_str(&trace.to_json()).unwrap();
    let names = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&schema), names(&back));
    assert_eq!(keys(&defs["signal"]), names(&back["models"]["100"]["cpu"]));
    assert_eq!(keys(&defs["model"]), names(&back["models"]["100"]));
    assert_eq!(
        keys(&defs["window"]),
        names(&back["models"]["100"]["cpu"]["windows"][0])
    );
    assert_eq!(
        keys(&defs["spike"]),
        names(&back["models"]["100"]["cpu"]["spikes"][0])
    );
    assert_eq!(
        keys(&defs["wave"]),
        names(&back["models"]["100"]["cpu"]["daily"])
    );
    assert_eq!(keys(&defs["create"]), names(&back["events"][0]["create"]));
    assert_eq!(keys(&defs["delete"]), names(&back["events"][1]["delete"]));
    assert_eq!(
        keys(&defs["maintenance"]),
        names(&back["events"][2]["maintenance"])
    );
    assert_eq!(
        keys(&defs["model_change"]),
        names(&back["events"][3]["model"])
    );
    let mut event = keys(&defs["event"]);
    event.retain(|k| k != "at");
    assert_eq!(event, ["create", "delete", "maintenance", "model"]);
}

#[tokio::test(start_paused = true)]
async fn an_ha_migration_is_recorded_with_who_asked_for_it() {
    let s = TestSim::cluster();
    s.ha_migrate_110_to_pve2().await;
    crate::support::sleep(30.0).await;
    let r = records(&s, 0.0).await;
    let m = r["migrations"].as_array().unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0]["vmid"], 110);
    assert_eq!(m[0]["user"], "root@pam", "the HA manager moves it");
    assert_eq!(m[0]["requested_by"], "root@pam!test");
    assert_eq!(m[0]["ok"], true);
}

#[tokio::test(start_paused = true)]
async fn without_a_trace_a_day_jump_samples_its_last_minute_only() {
    // Nothing changes a static cluster's figures between events: sampling each of the 1,440
    // minutes cost a clock run 100,000 times faster than real time most of its CPU.
    let s = TestSim::new(cluster());
    advance_to(&s, START_MINUTE + 86_400.0).await;
    let hour = s.list("/nodes/pve1/rrddata?timeframe=hour").await;
    assert!(
        hour.last().is_some_and(|r| r.get("cpu").is_some()),
        "the last minute has its row"
    );
    let minutes = records(&s, 0.0).await["node_samples"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(minutes, 3, "one sample per node");
}
