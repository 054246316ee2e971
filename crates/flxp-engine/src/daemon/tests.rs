//! The daemon loop under paused time: rounds at the interval each report asks for, retries
//! after errors, a stop ends the loop at once.
// Tests may panic on malformed fixtures: that is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use flxp_core::Snapshot;
use flxp_core::placement::PlacementOptions;
use flxp_pve::fake::FakeApi;

use super::*;

const BALANCED: &str = r#"[
    {"id":"node/a","type":"node","node":"a","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1},
    {"id":"node/b","type":"node","node":"b","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1}
]"#;

/// Each round's report with the (paused) time it ended at, seconds from the start.
type Seen = Arc<Mutex<Vec<(f64, RoundReport)>>>;

fn daemon(api: FakeApi, options: DaemonOptions) -> (Daemon, Seen) {
    let placer = Arc::new(Placer::new(PlacementOptions::default(), Vec::new()).unwrap());
    let zone = Zone {
        name: "lab".into(),
        api: api.into(),
        overrides: Overrides::default(),
        reservations: None,
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let start = tokio::time::Instant::now();
    let d = Daemon::new(vec![zone], placer, options)
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
