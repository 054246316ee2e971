//! Calls to the Proxmox API per migration and per daemon round, counted at the transport against
//! the simulator on a generated cluster.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use flxp_core::Overrides;
use flxp_core::balance::{BalanceOptions, EvacuateOptions};
use flxp_engine::{DaemonOptions, ExecuteOptions, Executor, Goal, Limits};
use flxp_pve::{Data, Pve, Request, Transport};
use serde_json::json;

use crate::support::{GIB, Zone, daemon_execute, scheduler, zone};

/// Counts every call by `METHOD /path` on its way to another transport.
struct Counter {
    inner: Arc<dyn Transport>,
    calls: Mutex<Vec<String>>,
}

#[async_trait]
impl Transport for Counter {
    async fn send(&self, request: Request) -> flxp_pve::Result<Data> {
        let call = format!("{} {}", request.method, request.path);
        self.calls.lock().unwrap().push(call);
        self.inner.send(request).await
    }

    fn server_time(&self) -> Option<i64> {
        self.inner.server_time()
    }
}

/// A zone's API with a call counter in front.
struct Counted {
    api: Pve,
    counter: Arc<Counter>,
}

impl Counted {
    fn new(z: &Zone) -> Self {
        let counter = Arc::new(Counter {
            inner: Arc::clone(z.api.transport()),
            calls: Mutex::new(Vec::new()),
        });
        Self {
            api: Pve::from_arc(Arc::clone(&counter) as Arc<dyn Transport>),
            counter,
        }
    }

    /// The calls so far, and forgets them.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.counter.calls.lock().unwrap())
    }
}

/// Calls by kind, for messages: `GET /cluster/resources` → count; node paths folded.
fn by_kind(calls: &[String]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for c in calls {
        let folded: Vec<&str> = c
            .split('/')
            .enumerate()
            .map(|(i, part)| {
                if i == 2 && c.contains(" /nodes/") {
                    "{node}"
                } else if part.starts_with("UPID:") {
                    "{upid}"
                } else if part.parse::<u32>().is_ok() {
                    "{vmid}"
                } else {
                    part
                }
            })
            .collect();
        *out.entry(folded.join("/")).or_default() += 1;
    }
    out
}

/// How many calls of `kind` [`by_kind`] counted; none when it counted none.
fn count(kinds: &BTreeMap<String, usize>, kind: &str) -> usize {
    kinds.get(kind).copied().unwrap_or(0)
}

/// `nodes` nodes of 64 GiB; `crowded` of them carry `per_crowded` guests of 4 GiB, the others
/// two each.
fn generated(nodes: usize, crowded: usize, per_crowded: usize) -> String {
    let mut resources = Vec::new();
    let mut vmid = 100;
    for i in 1..=nodes {
        let node = format!("pve{i}");
        let guests = if i <= crowded { per_crowded } else { 2 };
        resources.push(json!({
            "id": format!("node/{node}"), "type": "node", "node": node, "status": "online",
            "maxcpu": 32, "cpu": 0.05, "maxmem": 64 * GIB, "mem": 2 * GIB,
            "maxdisk": 100 * GIB, "disk": 10 * GIB, "uptime": 864_000, "level": ""
        }));
        resources.push(json!({
            "id": format!("storage/{node}/ceph"), "type": "storage", "node": node,
            "storage": "ceph", "plugintype": "rbd", "shared": 1, "content": "images,rootdir",
            "maxdisk": 1u64 << 50, "disk": 0, "status": "available"
        }));
        for _ in 0..guests {
            resources.push(json!({
                "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid,
                "name": format!("g{vmid}"), "node": node, "status": "running",
                "maxmem": 4 * GIB, "mem": 4 * GIB, "maxcpu": 2, "cpu": 0.1,
                "maxdisk": 32 * GIB, "uptime": 3600
            }));
            vmid += 1;
        }
    }
    serde_json::to_string(&json!({ "resources": resources, "time": 1_764_400_000 })).unwrap()
}

fn fast() -> ExecuteOptions {
    ExecuteOptions {
        limits: Limits::default(),
        poll: Duration::from_millis(10),
        timeout: Duration::from_secs(60),
        drain_timeout: Duration::from_secs(30),
        // The simulator runs 500 times faster than the clock here: a slow machine would reach
        // a timed full read within a run. Those are tested on their own.
        full_read_every: Duration::from_secs(365 * 86_400),
        ..ExecuteOptions::default()
    }
}

fn executor(z: &Zone, c: &Counted) -> Executor {
    let sim = z.sim.clone();
    Executor::new("sim", c.api.clone(), &scheduler())
        .with_options(fast())
        .with_clock(Arc::new(move || sim.now() as i64))
}

/// Plans and carries out `goal`; the migrations done and the calls made.
async fn run(z: &Zone, c: &Counted, goal: &Goal) -> (usize, Vec<String>) {
    let exec = executor(z, c);
    let plan = exec.plan(goal).await.unwrap();
    let report = exec.execute(plan, goal).await;
    assert!(report.is_clean(), "{report:#?}");
    (report.done.len(), c.take())
}

/// The calls of a full read at `nodes` online nodes without local guest disks: resources, notes
/// and RRD of each node, HA rules, resources, status and manager status, options, tasks.
fn full_read(nodes: usize) -> usize {
    1 + 2 * nodes + 6
}

/// Checks a run's calls: the whole cluster read once, and at most six calls per migration
/// besides following them (one task list per poll interval for all of them); returns the
/// calls per migration with and without following, for the figures.
fn check_run(what: &str, nodes: usize, migrations: usize, calls: &[String]) -> (f64, f64) {
    let kinds = by_kind(calls);
    let n = |k: &str| count(&kinds, k);
    assert!(migrations >= 10, "{what}: {migrations} migrations");
    assert_eq!(n("GET /nodes/{node}/config"), nodes, "{what}: {kinds:#?}");
    assert_eq!(n("GET /nodes/{node}/rrddata"), nodes, "{what}: {kinds:#?}");
    // Every refresh reads resources and tasks together; the other task lists are the polls.
    let polls = n("GET /cluster/tasks") - n("GET /cluster/resources")
        + n("GET /nodes/{node}/tasks/{upid}/status");
    let c = full_read(nodes);
    assert!(
        calls.len() - polls <= 6 * migrations + c,
        "{what}: {} calls besides {polls} polls for {migrations} migrations: {kinds:#?}",
        calls.len() - polls
    );
    let per = |n: usize| (n - c) as f64 / migrations as f64;
    (per(calls.len() - polls), per(calls.len()))
}

/// Runs `goal` over `nodes` nodes, checks its calls with [`check_run`] and prints the figures;
/// the migrations done.
async fn run_and_check(z: &Zone, c: &Counted, what: &str, nodes: usize, goal: &Goal) -> usize {
    let (n, calls) = run(z, c, goal).await;
    let (besides, all) = check_run(what, nodes, n, &calls);
    eprintln!(
        "{what}, {nodes} nodes: {n} migrations, {} calls, {besides:.2} per migration besides polls, {all:.2} with them",
        calls.len()
    );
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balance_and_evacuate_make_at_most_six_calls_per_migration_at_32_nodes() {
    let z = zone(&generated(32, 2, 12), 500.0, |_| {}).await;
    let c = Counted::new(&z);
    run_and_check(
        &z,
        &c,
        "balance",
        32,
        &Goal::Balance(BalanceOptions::default()),
    )
    .await;
    z.shutdown().await;

    let z = zone(&generated(32, 1, 12), 500.0, |_| {}).await;
    let c = Counted::new(&z);
    let goal = Goal::Evacuate {
        nodes: vec!["pve1".into()],
        options: EvacuateOptions::default(),
    };
    let n = run_and_check(&z, &c, "evacuate", 32, &goal).await;
    assert_eq!(n, 12);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balance_at_6_nodes_reads_the_cluster_once() {
    let z = zone(&generated(6, 2, 12), 500.0, |_| {}).await;
    let c = Counted::new(&z);
    run_and_check(
        &z,
        &c,
        "balance",
        6,
        &Goal::Balance(BalanceOptions::default()),
    )
    .await;
    z.shutdown().await;
}

/// A daemon over the counted zone, only evacuating, with full reads every `full_read_secs`.
fn daemon(c: &Counted, z: &Zone, full_read_secs: u64) -> flxp_engine::Daemon {
    daemon_reading(c, z, full_read_secs, true)
}

/// [`daemon`], reading node RRD on timed reads only with `read_pressure`.
fn daemon_reading(
    c: &Counted,
    z: &Zone,
    full_read_secs: u64,
    read_pressure: bool,
) -> flxp_engine::Daemon {
    let sim = z.sim.clone();
    flxp_engine::Daemon::new(
        vec![flxp_engine::Zone {
            name: "lab".into(),
            api: c.api.clone(),
            overrides: Overrides::default(),
            reservations: None,
        }],
        &scheduler(),
        DaemonOptions {
            rebalance: false,
            execute: ExecuteOptions {
                full_read_every: Duration::from_secs(full_read_secs),
                read_pressure,
                // Time stands still in the tests of marks: what they start never lands.
                timeout: Duration::from_secs(1),
                ..daemon_execute()
            },
            ..DaemonOptions::default()
        },
    )
    .with_clock(Arc::new(move || sim.now() as i64))
}

/// [`daemon`] over `time_scale`, acting only while it holds the zone's lease on pve1, taken
/// when a round is about to act (`hold = acting`, the default).
fn leased(c: &Counted, z: &Zone, full_read_secs: u64) -> flxp_engine::Daemon {
    let lease = flxp_engine::daemon::LeaseSettings {
        options: flxp_engine::LeaseOptions {
            holder: "flxp-a:1:1".into(),
            command: Some("daemon".into()),
            ..flxp_engine::LeaseOptions::default()
        },
        nodes: [("lab".to_owned(), "pve1".to_owned())].into(),
    };
    daemon(c, z, full_read_secs).with_lease(lease)
}

/// A first round, then pve4 marked for maintenance by this process outside the rounds, the
/// daemon told so that its next round reads the mark back.
async fn round_then_mark_pve4(d: &flxp_engine::Daemon, z: &Zone) {
    d.run_round("lab").await.unwrap();
    flxp_engine::maintenance::set(&z.api, "pve4", true)
        .await
        .unwrap();
    d.notes_written("lab", "pve4");
}

/// The calls of a refresh, in order.
const REFRESH: [&str; 3] = [
    "GET /cluster/resources",
    "GET /cluster/tasks",
    "GET /cluster/ha/status/current",
];

/// Calls that write.
fn writes(calls: &[String]) -> Vec<&String> {
    calls.iter().filter(|c| !c.starts_with("GET ")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_leased_daemon_round_makes_three_calls_and_none_to_the_lease() {
    let z = zone(&generated(8, 0, 0), 1e-9, |_| {}).await;
    let c = Counted::new(&z);
    let d = leased(&c, &z, 900);
    let first = d.run_round("lab").await.unwrap();
    assert_eq!((first.error, first.standby), (None, None));
    let calls = c.take();
    // The first round reads everything, the lease not at all: it had nothing to do.
    assert_eq!(calls.len(), full_read(8), "{:#?}", by_kind(&calls));
    for _ in 0..3 {
        let r = d.run_round("lab").await.unwrap();
        assert_eq!((r.error, r.standby), (None, None));
        assert_eq!(c.take(), REFRESH.map(String::from));
    }
    assert!(!z.sim.world().nodes["pve1"].notes.contains("flxp-lease"));
    z.shutdown().await;
}

/// The first calls of a round that acts after this process marked `marked`: planned on a refresh
/// (the mark read back) without the lease; the lease on pve1 taken (a read, a write); read again
/// under it with a refresh.
fn taken_and_refreshed(marked: &str) -> Vec<String> {
    let noted = format!("GET /nodes/{marked}/config");
    REFRESH
        .iter()
        .chain(&[noted.as_str()])
        .chain(&["GET /nodes/pve1/config", "PUT /nodes/pve1/config"])
        .chain(&REFRESH)
        .map(|s| s.to_string())
        .collect()
}

/// Whether these notes hold no lease: no line, or one given back (`expires=0`).
fn lease_free(notes: &str) -> bool {
    flxp_engine::lease::find(notes, "").is_none_or(|r| r.expires == flxp_engine::lease::FREE)
}

/// Waits until the counted calls end with the lease's release (a write of pve1's notes), which
/// the lease keeper makes once the round's guard is dropped; the calls so far.
async fn until_released(c: &Counted) -> Vec<String> {
    let mut calls = Vec::new();
    for _ in 0..500 {
        calls.extend(c.take());
        if calls.last().is_some_and(|l| l == "PUT /nodes/pve1/config") {
            return calls;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the lease was not released: {calls:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_with_work_takes_the_lease_reads_again_under_it_acts_and_gives_it_back() {
    let z = zone(&generated(8, 0, 0), 500.0, |_| {}).await;
    let c = Counted::new(&z);
    let d = leased(&c, &z, 365 * 86_400);
    round_then_mark_pve4(&d, &z).await;
    c.take();
    let r = d.run_round("lab").await.unwrap();
    assert_eq!((&r.error, &r.standby), (&None, &None), "{r:#?}");
    let evacuation = r.evacuation.expect("evacuated");
    let done = evacuation.execution.expect("carried out").done.len();
    assert_eq!(done, 2);
    assert!(z.sim.world().guests.values().all(|g| g.node != "pve4"));
    let calls = until_released(&c).await;
    // Planned on a refresh without the lease; the lease taken (a read, a write); read again
    // under it; then the steps; the lease given back (a read, a write) after the last.
    assert_eq!(calls[..9], taken_and_refreshed("pve4"), "{calls:#?}");
    let n = calls.len();
    assert_eq!(
        calls[n - 2..],
        ["GET /nodes/pve1/config", "PUT /nodes/pve1/config"].map(String::from),
        "{calls:#?}"
    );
    // Between the two: the two migrations and nothing else written.
    let between = writes(&calls[9..n - 2]);
    assert_eq!(between.len(), 2, "{between:#?}");
    assert!(
        between.iter().all(|w| w.ends_with("/migrate")),
        "{between:#?}"
    );
    assert!(lease_free(&z.sim.world().nodes["pve1"].notes));
    // The next round has nothing to do (pve4, still in maintenance, is empty): a refresh and
    // no lease call.
    let idle = d.run_round("lab").await.unwrap();
    let again = idle.evacuation.expect("pve4 still in maintenance");
    assert_eq!((again.plan.migrations.len(), again.execution), (0, None));
    assert_eq!(c.take(), REFRESH.map(String::from));
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_that_finds_the_lease_held_when_about_to_act_stands_by_and_writes_nothing() {
    let z = zone(&generated(8, 0, 0), 1e-9, |_| {}).await;
    let c = Counted::new(&z);
    let d = leased(&c, &z, 900);
    round_then_mark_pve4(&d, &z).await;
    // Another flxp took the lease meanwhile (its line, as it writes it, in pve1's notes).
    let expires = z.sim.now() as i64 + 3600;
    let line =
        format!("<!-- flxp-lease zone=lab holder=flxp-b:7:ab expires={expires} command=serve -->");
    note_by_hand(&z, "pve1", &line);
    c.take();
    let r = d.run_round("lab").await.unwrap();
    let standby = r.standby.as_deref().expect("stands by");
    assert!(
        standby.starts_with(
            "zone lab is held by another flxp (flxp-b:7:ab, running `flxp serve`) until"
        ),
        "{standby}"
    );
    assert_eq!((r.error, r.evacuation), (None, None));
    // It planned on its refresh, asked for the lease once it had work, and wrote nothing.
    let calls = c.take();
    let want: Vec<String> = REFRESH
        .iter()
        .chain(&["GET /nodes/pve4/config", "GET /nodes/pve1/config"])
        .map(|s| s.to_string())
        .collect();
    assert_eq!(calls, want);
    assert_eq!(z.sim.world().nodes["pve1"].notes, line);
    let on_pve4 = z
        .sim
        .world()
        .guests
        .values()
        .filter(|g| g.node == "pve4")
        .count();
    assert_eq!(on_pve4, 2);
    z.shutdown().await;
}

/// Another flxp (`flxp maintenance NODE` from a shell) takes the zone's lease on pve1, marks
/// `node` for maintenance, and gives the lease back, as a one-off run does.
async fn another_flxp_marks(z: &Zone, node: &str) {
    let other = Arc::new(flxp_engine::LeaseKeeper::new(
        z.api.clone(),
        "lab".into(),
        Some("pve1".into()),
        flxp_engine::LeaseOptions {
            holder: "flxp-b:7:ab".into(),
            command: Some("maintenance".into()),
            ..flxp_engine::LeaseOptions::default()
        },
    ));
    let held = other.demand().await.unwrap();
    assert!(
        flxp_engine::maintenance::set(&z.api, node, true)
            .await
            .unwrap()
    );
    drop(held);
    other.release().await;
}

/// The migrations' targets of a round's evacuation.
fn evacuated_to(r: &flxp_engine::RoundReport) -> Vec<String> {
    let e = r.evacuation.as_ref().expect("evacuated");
    e.plan.migrations.iter().map(|m| m.to.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_after_another_flxp_marked_a_node_reads_it_under_the_lease_and_moves_nothing_there()
{
    // pve5 is empty: the best target of any move, until another flxp marks it.
    let z = zone(&generated(8, 0, 0), 500.0, |v| {
        let resources = v["resources"].as_array_mut().unwrap();
        resources.retain(|r| !(r["type"] == "qemu" && r["node"] == "pve5"));
    })
    .await;
    let c = Counted::new(&z);
    let d = leased(&c, &z, 365 * 86_400);
    // The daemon's first round reads everything; then this process marks pve4, and another
    // flxp marks pve5 between the rounds.
    round_then_mark_pve4(&d, &z).await;
    another_flxp_marks(&z, "pve5").await;
    c.take();
    let r = d.run_round("lab").await.unwrap();
    assert_eq!((&r.error, &r.standby), (&None, &None), "{r:#?}");
    let to = evacuated_to(&r);
    assert_eq!(to.len(), 2, "{r:#?}");
    assert!(!to.contains(&"pve5".to_owned()), "{to:?}");
    assert_eq!(
        z.sim
            .world()
            .guests
            .values()
            .filter(|g| g.node == "pve5")
            .count(),
        0
    );
    let marked: Vec<&str> = r.maintenance.iter().map(|m| m.node.as_str()).collect();
    assert_eq!(marked, ["pve4", "pve5"]);
    // Planned on a refresh without the lease; the lease taken from the other flxp's line given
    // back; then, under it, a full read of the 8 nodes (no RRD: this daemon does not balance).
    let calls = until_released(&c).await;
    let want_start: Vec<String> = REFRESH
        .iter()
        .chain(&["GET /nodes/pve4/config"])
        .chain(&["GET /nodes/pve1/config", "PUT /nodes/pve1/config"])
        .map(|s| s.to_string())
        .collect();
    assert_eq!(calls[..6], want_start, "{calls:#?}");
    let first_step = calls.iter().position(|c| c.ends_with("/migrate")).unwrap();
    let read: std::collections::BTreeSet<&str> = calls[6..first_step]
        .iter()
        .filter(|c| c.starts_with("GET /nodes/") && c.ends_with("/config"))
        .map(String::as_str)
        .collect();
    let every: std::collections::BTreeSet<String> = (1..=8)
        .map(|i| format!("GET /nodes/pve{i}/config"))
        .collect();
    assert_eq!(
        read,
        every.iter().map(String::as_str).collect(),
        "{calls:#?}"
    );

    // No other flxp held the lease since: the next round that acts takes it back from the line
    // it gave back itself and reads under it with a refresh, no node's config.
    flxp_engine::maintenance::set(&z.api, "pve6", true)
        .await
        .unwrap();
    d.notes_written("lab", "pve6");
    let r = d.run_round("lab").await.unwrap();
    assert_eq!((&r.error, &r.standby), (&None, &None), "{r:#?}");
    let to = evacuated_to(&r);
    assert_eq!(to.len(), 2, "{r:#?}");
    assert!(
        !to.iter()
            .any(|t| ["pve4", "pve5", "pve6"].contains(&t.as_str())),
        "{to:?}"
    );
    let calls = until_released(&c).await;
    assert_eq!(calls[..9], taken_and_refreshed("pve6"), "{calls:#?}");
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_daemon_round_makes_three_calls_whatever_the_node_count() {
    for nodes in [6, 32] {
        let z = zone(&generated(nodes, 0, 0), 1.0, |_| {}).await;
        let c = Counted::new(&z);
        let d = daemon(&c, &z, 900);
        let first = d.run_round("lab").await.unwrap();
        assert_eq!(first.error, None);
        let calls = c.take();
        let kinds = by_kind(&calls);
        // The first round reads everything: each node's RRD once.
        assert_eq!(calls.len(), full_read(nodes), "{kinds:#?}");
        assert_eq!(kinds["GET /nodes/{node}/rrddata"], nodes);
        for _ in 0..2 {
            d.run_round("lab").await.unwrap();
            let calls = c.take();
            assert_eq!(
                calls,
                [
                    "GET /cluster/resources",
                    "GET /cluster/tasks",
                    "GET /cluster/ha/status/current"
                ]
                .map(String::from)
                .iter()
                .filter(|c| calls.contains(c))
                .cloned()
                .collect::<Vec<_>>()
            );
            assert_eq!(calls.len(), 3, "{nodes} nodes: {calls:?}");
        }
        z.shutdown().await;
    }
}

/// Writes node notes as an admin does in Proxmox's GUI: straight into the world, past flxp.
fn note_by_hand(z: &Zone, node: &str, notes: &str) {
    z.sim.world().nodes.get_mut(node).unwrap().notes = notes.into();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_set_by_hand_is_seen_at_the_first_round_a_full_read_is_due() {
    // Time all but stands still; the test moves it.
    let z = zone(&generated(8, 0, 0), 1e-9, |_| {}).await;
    let c = Counted::new(&z);
    let d = daemon(&c, &z, 600);
    let first = d.run_round("lab").await.unwrap();
    assert!(first.evacuation.is_none());
    note_by_hand(&z, "pve3", "flxp.maintenance");
    c.take();
    z.sim.clock().advance(599.0);
    let before = d.run_round("lab").await.unwrap();
    assert!(before.evacuation.is_none(), "{before:#?}");
    assert_eq!(c.take().len(), 3);
    z.sim.clock().advance(1.0);
    let due = d.run_round("lab").await.unwrap();
    let evacuation = due.evacuation.expect("evacuated at the full read");
    let from: Vec<&str> = evacuation
        .plan
        .migrations
        .iter()
        .map(|m| m.from.as_str())
        .collect();
    assert_eq!(from, ["pve3", "pve3"]);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_this_process_writes_is_read_back_at_the_next_round() {
    let z = zone(&generated(8, 0, 0), 1e-9, |_| {}).await;
    let c = Counted::new(&z);
    let d = daemon(&c, &z, 600);
    round_then_mark_pve4(&d, &z).await;
    c.take();
    let next = d.run_round("lab").await.unwrap();
    let calls = c.take();
    assert_eq!(
        calls[..4],
        [
            "GET /cluster/resources",
            "GET /cluster/tasks",
            "GET /cluster/ha/status/current",
            "GET /nodes/pve4/config",
        ]
        .map(String::from),
        "{calls:#?}"
    );
    let evacuation = next.evacuation.expect("evacuated at once");
    assert!(evacuation.plan.migrations.iter().all(|m| m.from == "pve4"));
    assert_eq!(evacuation.plan.migrations.len(), 2);
    z.shutdown().await;
}

/// At the end of the first migration, an admin moves guests by hand onto the second step's
/// target until it has no room for the second step's guest.
struct MoveOnto {
    sim: flxp_sim::Sim,
    target: String,
    first: u32,
    planned: Vec<u32>,
}

impl flxp_engine::Progress for MoveOnto {
    fn event(&self, event: &flxp_engine::Event) {
        let flxp_engine::Event::Done { vmid, .. } = event else {
            return;
        };
        if *vmid != self.first {
            return;
        }
        let mut w = self.sim.world();
        let max = w.nodes[&self.target].maxmem;
        let movable: Vec<u32> = w
            .guests
            .values()
            .filter(|g| g.node != self.target && !self.planned.contains(&g.vmid))
            .map(|g| g.vmid)
            .collect();
        for vmid in movable {
            if max - crate::support::carried(&w, &self.target) < 4 * GIB {
                break;
            }
            w.guests.get_mut(&vmid).unwrap().node = self.target.clone();
        }
    }

    fn wants_fractions(&self) -> bool {
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_moved_by_hand_onto_the_target_makes_the_next_step_replan() {
    let z = zone(&generated(16, 2, 12), 500.0, |_| {}).await;
    let c = Counted::new(&z);
    let goal = Goal::Balance(BalanceOptions::default());
    let exec = executor(&z, &c).with_options(ExecuteOptions {
        limits: Limits {
            parallel: 1,
            ..Limits::default()
        },
        ..fast()
    });
    let plan = exec.plan(&goal).await.unwrap();
    let second = plan.migrations[1].clone();
    let hand = MoveOnto {
        sim: z.sim.clone(),
        target: second.to.clone(),
        first: plan.migrations[0].vmid,
        planned: plan.migrations.iter().map(|m| m.vmid).collect(),
    };
    let report = exec
        .with_progress(Arc::new(hand))
        .execute(plan.clone(), &goal)
        .await;
    assert_eq!(report.skipped[0].vmid, second.vmid, "{report:#?}");
    assert!(
        report.skipped[0]
            .reasons
            .iter()
            .any(|r| r.starts_with(&format!("{}: memory", second.to))),
        "{:?}",
        report.skipped[0].reasons
    );
    assert!(!report.replans.is_empty());
    assert!(report.failed.is_empty(), "{report:#?}");
    assert_ne!(z.node_of(second.vmid), second.to);
    // The move was no one's flxp knew of: the cluster was read whole again.
    let kinds = by_kind(&c.take());
    assert_eq!(kinds["GET /nodes/{node}/config"], 2 * 16, "{kinds:#?}");
    // RRD rows (pressure) only on the timed full reads: once in this run.
    assert_eq!(kinds["GET /nodes/{node}/rrddata"], 16, "{kinds:#?}");
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_full_read_rereads_notes_and_ha_config_only_and_rrd_only_when_asked() {
    for read_pressure in [false, true] {
        // Time all but stands still; the test moves it.
        let z = zone(&generated(8, 0, 0), 1e-9, |_| {}).await;
        let c = Counted::new(&z);
        let d = daemon_reading(&c, &z, 600, read_pressure);
        d.run_round("lab").await.unwrap();
        let first = by_kind(&c.take());
        // The first read is whole, whatever is asked: a one-off read shows pressure too.
        assert_eq!(first["GET /nodes/{node}/rrddata"], 8, "{first:#?}");
        z.sim.clock().advance(600.0);
        d.run_round("lab").await.unwrap();
        let calls = c.take();
        let kinds = by_kind(&calls);
        let rrd = count(&kinds, "GET /nodes/{node}/rrddata");
        assert_eq!(rrd, if read_pressure { 8 } else { 0 }, "{kinds:#?}");
        assert_eq!(kinds["GET /nodes/{node}/config"], 8, "{kinds:#?}");
        // Resources, tasks, HA status and manager status, HA rules and resources, options.
        assert_eq!(calls.len(), 8 + rrd + 7, "{kinds:#?}");
        z.shutdown().await;
    }
}

/// pve1 carries VMs 104 and 105 with a 40 GiB disk each on its local-lvm; pve2 is empty.
fn local_disks() -> String {
    let gib: u64 = 1 << 30;
    let node = |name: &str| {
        json!({"id": format!("node/{name}"), "type": "node", "node": name, "status": "online",
               "maxcpu": 16, "cpu": 0.05, "maxmem": 64 * gib})
    };
    let storage = |node: &str| {
        json!({"id": format!("storage/{node}/local-lvm"), "type": "storage", "node": node,
               "storage": "local-lvm", "plugintype": "lvmthin", "shared": 0,
               "content": "images,rootdir", "status": "available", "maxdisk": 200 * gib,
               "disk": 0})
    };
    let vm = |vmid: u32| {
        json!({"id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": "pve1",
               "name": format!("vm{vmid}"), "status": "running", "maxcpu": 2, "cpu": 0.1,
               "maxmem": 8 * gib, "mem": 6 * gib, "maxdisk": 40 * gib})
    };
    let disk =
        |vmid: u32| json!({"config": {"scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=40G")}});
    let resources = vec![
        node("pve1"),
        node("pve2"),
        storage("pve1"),
        storage("pve2"),
        vm(104),
        vm(105),
    ];
    json!({"resources": resources, "sim": {"guests": {"104": disk(104), "105": disk(105)}}})
        .to_string()
}

/// [`executor`] with a timed full read every ten minutes, reading no node RRD.
fn timed_executor(z: &Zone, c: &Counted) -> Executor {
    executor(z, c).with_options(ExecuteOptions {
        full_read_every: Duration::from_secs(600),
        read_pressure: false,
        ..fast()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_full_read_keeps_the_local_volumes_it_knows_until_the_cluster_changes() {
    let z = zone(&local_disks(), 1e-9, |_| {}).await;
    let c = Counted::new(&z);
    let exec = timed_executor(&z, &c);
    let disks = |m: &flxp_core::Model| -> Vec<u64> {
        m.cluster
            .guests()
            .iter()
            .map(|g| g.local_disk_bytes())
            .collect()
    };
    let first = exec.read().await.unwrap();
    assert_eq!(disks(&first), [40 << 30, 40 << 30]);
    let kinds = by_kind(&c.take());
    assert_eq!(
        count(&kinds, "GET /nodes/{node}/storage/local-lvm/content"),
        1,
        "{kinds:#?}"
    );
    z.sim.clock().advance(600.0);
    let timed = exec.read().await.unwrap();
    let kinds = by_kind(&c.take());
    assert_eq!(count(&kinds, "GET /nodes/{node}/config"), 2, "{kinds:#?}");
    assert!(
        !kinds.contains_key("GET /nodes/{node}/storage/local-lvm/content"),
        "{kinds:#?}"
    );
    assert_eq!(disks(&timed), disks(&first));
    // A disk grown by hand shows in the guest's size: the volumes are listed again.
    let grown = "local-lvm:vm-105-disk-0,size=50G".to_string();
    let mut world = z.sim.world();
    world
        .guests
        .get_mut(&105)
        .unwrap()
        .config
        .values
        .insert("scsi0".into(), grown);
    drop(world);
    z.sim.clock().advance(600.0);
    exec.read().await.unwrap();
    let kinds = by_kind(&c.take());
    assert_eq!(
        count(&kinds, "GET /nodes/{node}/storage/local-lvm/content"),
        1,
        "{kinds:#?}"
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_gone_lists_its_nodes_volumes_and_reads_no_notes() {
    let z = zone(&local_disks(), 1e-9, |_| {}).await;
    let c = Counted::new(&z);
    let exec = timed_executor(&z, &c);
    exec.read().await.unwrap();
    c.take();
    // Deleted by someone else: nothing moved, no node's notes changed.
    z.sim.world().guests.remove(&105);
    let after = exec.read().await.unwrap();
    let disks: Vec<(u32, u64)> = after
        .cluster
        .guests()
        .iter()
        .map(|g| (g.vmid, g.local_disk_bytes()))
        .collect();
    assert_eq!(disks, [(104, 40 << 30)]);
    let want: Vec<String> = REFRESH
        .iter()
        .chain(&[
            "GET /nodes/pve1/storage/local-lvm/content",
            "GET /cluster/ha/rules",
            "GET /cluster/ha/resources",
            "GET /cluster/options",
        ])
        .map(|s| s.to_string())
        .collect();
    assert_eq!(c.take(), want);
    // The next read expects it: a refresh.
    exec.read().await.unwrap();
    assert_eq!(c.take(), REFRESH.map(String::from));
    z.shutdown().await;
}
