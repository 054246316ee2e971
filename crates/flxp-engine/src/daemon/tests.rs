//! The daemon loop under paused time: rounds at the interval each report asks for, retries
//! after errors, a stop ends the loop at once.
// Tests may panic on malformed fixtures: that is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use flxp_core::Snapshot;
use flxp_core::balance::Registry;
use flxp_core::placement::PlacementOptions;
use flxp_pve::fake::FakeApi;

use super::*;

const BALANCED: &str = r#"[
    {"id":"node/a","type":"node","node":"a","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1},
    {"id":"node/b","type":"node","node":"b","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1}
]"#;

/// Each round's report with the (paused) time it ended at, seconds from the start.
type Seen = Arc<Mutex<Vec<(f64, RoundReport)>>>;

fn daemon(api: impl Into<flxp_pve::Pve>, options: DaemonOptions) -> (Daemon, Seen) {
    let scheduler = Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap();
    let zone = Zone {
        name: "lab".into(),
        api: api.into(),
        overrides: Overrides::default(),
        reservations: None,
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let start = tokio::time::Instant::now();
    let d = Daemon::new(vec![zone], &scheduler, options)
        .with_clock(Arc::new(|| 1_764_400_000))
        .on_round(Arc::new(move |r: &RoundReport| {
            log.lock()
                .unwrap()
                .push((start.elapsed().as_secs_f64(), r.clone()));
        }));
    (d, seen)
}

#[tokio::test(start_paused = true)]
async fn rounds_come_at_the_interval_and_a_shutdown_ends_the_loop() {
    let api = FakeApi::new(Snapshot::from_json(BALANCED).unwrap());
    let (d, seen) = daemon(api, DaemonOptions::default());
    d.run(tokio::time::sleep(Duration::from_secs(1000))).await;
    let seen = seen.lock().unwrap();
    let at: Vec<f64> = seen.iter().map(|(t, _)| *t).collect();
    assert_eq!(at, [0.0, 300.0, 600.0, 900.0]);
    let r = &seen[0].1;
    assert_eq!(r.error, None);
    assert!(!r.trigger.as_ref().unwrap().act, "a balanced cluster");
    assert_eq!(r.next_in_secs, 300.0);
    assert!(d.is_stopped());
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_zone_is_retried_sooner_and_reported() {
    let api = FakeApi::new(Snapshot::from_json(BALANCED).unwrap()).fail(
        "GET /cluster/resources",
        595,
        "Connection refused",
    );
    let (d, seen) = daemon(api, DaemonOptions::default());
    d.run(tokio::time::sleep(Duration::from_secs(130))).await;
    let seen = seen.lock().unwrap();
    let at: Vec<f64> = seen.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        at,
        [0.0, 60.0, 120.0],
        "retry-after 60 s, not the 300 s interval"
    );
    let e = seen[0].1.error.as_deref().unwrap();
    assert!(
        e.starts_with("collecting the snapshot: GET /cluster/resources failed"),
        "{e}"
    );
    assert!(e.contains("Connection refused"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn a_held_zone_lock_keeps_rounds_out() {
    let api = FakeApi::new(Snapshot::from_json(BALANCED).unwrap());
    let (d, seen) = daemon(api, DaemonOptions::default());
    let guard = d.lock_zone("lab").await.unwrap();
    let round = tokio::spawn({
        let d = d.clone();
        async move { d.run_round("lab").await.map(|r| r.zone) }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "the round waits for the lock"
    );
    drop(guard);
    assert_eq!(round.await.unwrap().unwrap(), "lab");
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert!(d.lock_zone("nope").await.is_err());
}

/// The fake zone with the lease kept in node pve1's config (in memory, with Proxmox's digest
/// check and a clock following the paused time): each call to it is logged with its time,
/// seconds from the start.
struct LeaseNode {
    fake: Arc<flxp_pve::fake::FakeTransport>,
    lease: Arc<crate::lease::tests::Node>,
    start: tokio::time::Instant,
    calls: Mutex<Vec<(u64, &'static str)>>,
}

impl LeaseNode {
    fn new() -> Arc<Self> {
        let fake = FakeApi::new(Snapshot::from_json(BALANCED).unwrap());
        Arc::new(Self {
            fake: Arc::clone(fake.transport()),
            lease: crate::lease::tests::Node::new(),
            start: tokio::time::Instant::now(),
            calls: Mutex::new(Vec::new()),
        })
    }

    /// The lease node's notes.
    fn notes(&self) -> String {
        self.lease.notes.lock().unwrap().clone()
    }

    /// The calls to the lease node's config until `until` seconds from the start.
    fn calls_until(&self, until: u64) -> Vec<(u64, &'static str)> {
        let calls = self.calls.lock().unwrap();
        calls.iter().filter(|(t, _)| *t < until).cloned().collect()
    }
}

#[async_trait::async_trait]
impl flxp_pve::Transport for LeaseNode {
    async fn send(&self, request: flxp_pve::Request) -> flxp_pve::Result<flxp_pve::Data> {
        if request.path != "/nodes/pve1/config" {
            return self.fake.send(request).await;
        }
        let method = if request.method.as_str() == "PUT" {
            "PUT"
        } else {
            "GET"
        };
        let at = self.start.elapsed().as_secs();
        self.calls.lock().unwrap().push((at, method));
        flxp_pve::Transport::send(&*self.lease, request).await
    }

    fn server_time(&self) -> Option<i64> {
        flxp_pve::Transport::server_time(&*self.lease)
    }
}

fn lease_options(holder: &str, command: &str, hold: LeaseHold) -> LeaseOptions {
    LeaseOptions {
        ttl: Duration::from_secs(30),
        margin: Duration::from_secs(5),
        holder: holder.into(),
        command: Some(command.into()),
        hold,
    }
}

/// A daemon over the lease node's zone, its lease held as `hold` says.
fn leased_daemon(node: &Arc<LeaseNode>, hold: LeaseHold) -> (Daemon, Seen) {
    let api = flxp_pve::Pve::from_arc(Arc::clone(node) as Arc<dyn flxp_pve::Transport>);
    let (d, seen) = daemon(api, DaemonOptions::default());
    let lease = LeaseSettings {
        options: lease_options("daemon:1:1", "daemon", hold),
        nodes: [("lab".to_owned(), "pve1".to_owned())].into(),
    };
    (d.with_lease(lease), seen)
}

#[tokio::test(start_paused = true)]
async fn an_idle_daemon_holding_while_acting_never_calls_the_lease_node() {
    let node = LeaseNode::new();
    let (d, seen) = leased_daemon(&node, LeaseHold::Acting);
    d.run(tokio::time::sleep(Duration::from_secs(1000))).await;
    let at: Vec<f64> = seen.lock().unwrap().iter().map(|(t, _)| *t).collect();
    assert_eq!(at, [0.0, 300.0, 600.0, 900.0]);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|(_, r)| r.standby.is_none() && r.error.is_none())
    );
    // The rounds had nothing to write: the lease is taken only by a round about to act.
    assert_eq!(node.calls_until(1000), []);
    assert_eq!(node.notes(), "flxp.label.ssd");
}

#[tokio::test(start_paused = true)]
async fn an_idle_daemon_holding_always_renews_every_third_of_the_ttl() {
    let node = LeaseNode::new();
    let (d, seen) = leased_daemon(&node, LeaseHold::Always);
    d.run(tokio::time::sleep(Duration::from_secs(1000))).await;
    assert_eq!(seen.lock().unwrap().len(), 4);
    let calls = node.calls_until(1000);
    let mut puts: Vec<u64> = calls
        .iter()
        .filter(|(_, m)| *m == "PUT")
        .map(|(t, _)| *t)
        .collect();
    let written = puts.len();
    // At the start the first round and the renewal may both write (whichever comes second
    // renews); then a renewal, a read and a write, every 10 s, rounds or not.
    puts.dedup();
    let every_10s: Vec<u64> = (0..100).map(|i| i * 10).collect();
    assert_eq!(puts, every_10s);
    assert!(written == 100 || written == 101, "{written}");
    assert_eq!(calls.len(), 2 * written);
}

#[tokio::test(start_paused = true)]
async fn idle_rounds_go_on_while_a_one_off_run_holds_the_lease() {
    let node = LeaseNode::new();
    let (d, seen) = leased_daemon(&node, LeaseHold::Acting);
    let runner = d.clone();
    let run = tokio::spawn(async move {
        runner
            .run(tokio::time::sleep(Duration::from_secs(650)))
            .await;
    });
    // Between the rounds at 0 and 300 s, a one-off run takes the lease and holds it until 395 s.
    tokio::time::sleep(Duration::from_secs(100)).await;
    let api = flxp_pve::Pve::from_arc(Arc::clone(&node) as Arc<dyn flxp_pve::Transport>);
    let cli = Arc::new(LeaseKeeper::new(
        api,
        "lab".into(),
        Some("pve1".into()),
        lease_options("cli:2:2", "evacuate", LeaseHold::Acting),
    ));
    let guard = cli.demand().await.unwrap();
    tokio::time::sleep(Duration::from_secs(295)).await;
    assert!(guard.holding(), "renewed while the run lasts");
    drop(guard);
    run.await.unwrap();
    let seen = seen.lock().unwrap();
    let rounds: Vec<(f64, Option<&str>)> = seen
        .iter()
        .map(|(t, r)| (*t, r.standby.as_deref()))
        .collect();
    // The rounds have nothing to write: they never ask for the lease, so never stand by.
    assert_eq!(rounds, [(0.0, None), (300.0, None), (600.0, None)]);
    // Only the one-off run called the lease node: taken at 100 s, renewed every 10 s, given
    // back at 395 s.
    let puts: Vec<u64> = node
        .calls_until(1000)
        .iter()
        .filter(|(_, m)| *m == "PUT")
        .map(|(t, _)| *t)
        .collect();
    let want: Vec<u64> = (0..30).map(|i| 100 + 10 * i).chain([395]).collect();
    assert_eq!(puts, want);
    // Given back: the line stays, expired, naming the run that held it last.
    let notes = node.notes();
    let left = crate::lease::find(&notes, "").map(|r| (r.holder, r.expires));
    assert_eq!(
        left,
        Some(("cli:2:2".into(), crate::lease::FREE)),
        "{notes}"
    );
}
