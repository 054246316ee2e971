//! Webhooks against receivers on 127.0.0.1: delivery with headers and retries, the events
//! filter, a hanging receiver that never holds up a daemon round, and the events of rounds.
#![allow(clippy::unwrap_used)] // tests may panic

use std::collections::BTreeMap;
use std::sync::Mutex;

use flxp_core::balance::Registry;
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::{Scheduler, Snapshot};
use flxp_engine::daemon::{DaemonOptions, Zone};
use flxp_engine::{Daemon, RoundReport};
use flxp_pve::fake::FakeApi;
use serde_json::{Value, json};

use super::*;

/// What a receiver got: each request's `Authorization` header and body.
type Got = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// A receiver on 127.0.0.1 answering 500 to the first `fail` requests, then 204.
async fn receiver(fail: usize) -> (String, Got) {
    use axum::http::{HeaderMap, StatusCode};
    let got: Got = Arc::default();
    let seen = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook/secret-path",
        axum::routing::post(move |headers: HeaderMap, body: axum::Json<Value>| {
            let seen = Arc::clone(&seen);
            async move {
                let mut g = seen.lock().unwrap();
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_owned());
                g.push((auth, body.0));
                if g.len() <= fail {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::NO_CONTENT
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook/secret-path"), got)
}

/// A receiver that accepts connections and never answers.
fn hanging() -> (String, std::net::TcpListener) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (format!("http://{}/hook", l.local_addr().unwrap()), l)
}

fn hook(url: &str, events: &[&str]) -> WebhookSection {
    WebhookSection {
        url: url.to_owned(),
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        headers: BTreeMap::from([("Authorization".to_owned(), "Bearer hook-secret".to_owned())]),
        timeout_secs: 10,
        retries: 3,
        backoff_ms: 1,
        queue: 10,
    }
}

fn failed_migration() -> Event {
    Event::new(
        MIGRATION_FAILED,
        "lab",
        "flxp: migration of 101 (web) from a to b failed in zone lab: boom",
        json!({ "vmid": 101 }),
    )
}

#[tokio::test]
async fn an_event_reaches_its_webhook_after_retries_with_its_headers() {
    let (url, got) = receiver(2).await;
    let n = Notifier::start_hooks(&[hook(&url, &[])], "daemon");
    n.send(failed_migration());
    assert!(n.flush(Duration::from_secs(60)).await);
    let got = got.lock().unwrap();
    // Two failures, then the third attempt is taken.
    assert_eq!(got.len(), 3);
    let (auth, body) = &got[2];
    assert_eq!(auth.as_deref(), Some("Bearer hook-secret"));
    assert_eq!(body["event"], "migration.failed");
    assert_eq!(body["zone"], "lab");
    assert_eq!(body["source"], "daemon");
    assert_eq!(
        body["text"],
        "flxp: migration of 101 (web) from a to b failed in zone lab: boom"
    );
    assert_eq!(body["details"], json!({ "vmid": 101 }));
}

#[tokio::test]
async fn a_webhook_gets_only_the_events_it_lists() {
    let (url, got) = receiver(0).await;
    let n = Notifier::start_hooks(&[hook(&url, &[LEASE_LOST])], "serve");
    n.send(failed_migration());
    n.send(Event::new(LEASE_LOST, "lab", "lost", json!({})));
    assert!(n.flush(Duration::from_secs(60)).await);
    let events: Vec<Value> = got
        .lock()
        .unwrap()
        .iter()
        .map(|(_, b)| b["event"].clone())
        .collect();
    assert_eq!(events, [json!("lease.lost")]);
}

#[tokio::test]
async fn a_webhook_that_keeps_failing_is_given_up_after_its_retries() {
    let (url, got) = receiver(usize::MAX).await;
    let mut h = hook(&url, &[]);
    h.retries = 2;
    let n = Notifier::start_hooks(&[h], "serve");
    n.send(failed_migration());
    assert!(n.flush(Duration::from_secs(60)).await);
    assert_eq!(got.lock().unwrap().len(), 3);
}

/// Daemon rounds under paused time, each sending an event to a receiver that never answers,
/// through a queue of one: the rounds come at their interval all the same, and what does not fit
/// the queue is dropped.
#[tokio::test(start_paused = true)]
async fn a_hanging_webhook_never_holds_up_a_daemon_round() {
    let (url, _listener) = hanging();
    let mut h = hook(&url, &[]);
    h.queue = 1;
    // Four attempts of 300 s each: the first event outlasts the test's 1000 s.
    h.timeout_secs = 300;
    let n = Notifier::start_hooks(&[h], "daemon");
    let snapshot = Snapshot::from_json(
        r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":68719476736,"mem":8589934592,"maxcpu":16,"cpu":0.1}]"#,
    )
    .unwrap();
    let zone = Zone {
        name: "lab".into(),
        api: FakeApi::new(snapshot).into(),
        overrides: flxp_core::Overrides::default(),
        reservations: None,
    };
    let scheduler = Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap();
    let start = tokio::time::Instant::now();
    let at: Arc<Mutex<Vec<f64>>> = Arc::default();
    let (seen, sender) = (Arc::clone(&at), n.clone());
    let d = Daemon::new(vec![zone], &scheduler, DaemonOptions::default())
        .with_clock(Arc::new(|| 1_764_400_000))
        .on_round(Arc::new(move |r: &RoundReport| {
            sender.send(Event::new(MIGRATION_FAILED, &r.zone, "x", json!({})));
            seen.lock().unwrap().push(start.elapsed().as_secs_f64());
        }));
    d.run(tokio::time::sleep(Duration::from_secs(1000))).await;
    assert_eq!(*at.lock().unwrap(), [0.0, 300.0, 600.0, 900.0]);
    // The first event is in flight (never answered), the second waits in the queue of one.
    assert_eq!(n.dropped(), 2);
}

fn round(standby: Option<&str>) -> RoundReport {
    let mut r = RoundReport::begin("lab", 1_764_400_000, Duration::from_secs(300));
    r.standby = standby.map(str::to_owned);
    r
}

#[test]
fn the_lease_is_told_when_taken_and_when_lost_not_every_round() {
    let w = RoundWatch::new(true);
    let kinds =
        |r: &RoundReport| -> Vec<&'static str> { w.events(r).iter().map(|e| e.event).collect() };
    assert_eq!(kinds(&round(Some("held by other"))), Vec::<&str>::new());
    assert_eq!(kinds(&round(None)), [LEASE_TAKEN]);
    assert_eq!(kinds(&round(None)), Vec::<&str>::new());
    assert_eq!(kinds(&round(Some("held by other"))), [LEASE_LOST]);
    assert_eq!(kinds(&round(Some("held by other"))), Vec::<&str>::new());
    assert_eq!(kinds(&round(None)), [LEASE_TAKEN]);
    // Without a lease there is nothing to tell.
    assert!(RoundWatch::new(false).events(&round(None)).is_empty());
}
