//! The daemon against the simulator: evacuating maintenance nodes, the trigger's hold count,
//! stopping while migrations run, on-demand rounds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use flxp_core::Overrides;
use flxp_core::balance::{BalanceOptions, Trigger};
use flxp_engine::{DaemonOptions, Error, StaleAction, StaleOptions};
use tokio::sync::Notify;

use crate::support::{self, DEMO, FirstStart, UNBALANCED, daemon_execute, spread, zone};

fn options(hold: u32) -> DaemonOptions {
    DaemonOptions {
        interval: Duration::from_secs(3600),
        balance: BalanceOptions {
            trigger: Trigger {
                hold,
                ..Trigger::default()
            },
            ..BalanceOptions::default()
        },
        execute: daemon_execute(),
        ..DaemonOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_evacuates_a_node_the_config_puts_in_maintenance() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    let overrides = Overrides {
        maintenance: BTreeSet::from(["pve4".to_owned()]),
        ..Overrides::default()
    };
    let d = z.daemon(overrides, options(3));
    let report = d.run_round("lab").await.unwrap();
    let evac = report.evacuation.as_ref().unwrap();
    assert!(!evac.plan.migrations.is_empty(), "{}", evac.plan.summary);
    let execution = evac.execution.as_ref().unwrap();
    assert!(execution.is_clean(), "{execution:#?}");
    assert!(
        report.balance.is_none(),
        "no balancing in a round that evacuated"
    );
    assert_eq!(report.next_in(), Duration::from_secs(3600));
    let left = z.guests_on("pve4");
    assert_eq!(left, [151], "only the flxp.ignore guest stays");
    assert_eq!(d.last_report("lab"), Some(report));
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_in_ha_maintenance_is_emptied_of_what_ha_leaves_behind() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    // `ha-manager crm-command node-maintenance enable pve1`: HA moves its own guests (111).
    z.sim.world().set_maintenance("pve1", true);
    let d = z.daemon(Overrides::default(), options(3));
    let report = d.run_round("lab").await.unwrap();
    let evac = report.evacuation.as_ref().unwrap();
    assert!(
        evac.plan.migrations.iter().all(|m| m.vmid != 111),
        "HA's own guest is HA's to move"
    );
    // HA has it queued, is moving it (its lock, its task) or has moved it already (at 500x
    // HA's 5 s delay is 10 ms): whichever the round saw, flxp left it to HA.
    let why = evac.plan.skipped.iter().find(|s| s.vmid == 111);
    assert!(
        why.is_none_or(|s| s.reason.contains("HA") || s.reason.contains("migrat")),
        "{why:?}"
    );
    assert!(evac.execution.as_ref().unwrap().is_clean());
    for m in &evac.plan.migrations {
        assert_eq!(z.node_of(m.vmid), m.to);
    }
    let left: Vec<u32> = z
        .guests_on("pve1")
        .into_iter()
        .filter(|vmid| *vmid != 111)
        .collect();
    assert_eq!(
        left,
        [9000],
        "only the template stays (and 111 until HA moves it)"
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trigger_holds_for_its_count_then_the_round_balances() {
    let z = zone(UNBALANCED, 500.0, |_| {}).await;
    let d = z.daemon(Overrides::default(), options(3));
    let before = spread(&z.model());
    for held in 1..=2 {
        let r = d.run_round("lab").await.unwrap();
        let t = r.trigger.as_ref().unwrap();
        assert!(!t.act, "{}", t.reason);
        assert_eq!(t.held, held);
        assert!(r.balance.is_none());
        assert_eq!(d.held("lab"), Some(held));
    }
    let r = d.run_round("lab").await.unwrap();
    assert!(r.trigger.as_ref().unwrap().act);
    let b = r.balance.as_ref().unwrap();
    assert!(b.execution.as_ref().unwrap().is_clean());
    assert!(r.migrations_done() >= 3);
    assert_eq!(d.held("lab"), Some(0), "the count restarts after acting");
    assert!(spread(&z.model()) < before - 20.0);
    z.shutdown().await;
}

#[tokio::test]
async fn an_unknown_zone_is_named() {
    let z = zone(UNBALANCED, 500.0, |_| {}).await;
    let d = z.daemon(Overrides::default(), options(1));
    let e = d.run_round("nope").await.unwrap_err();
    assert!(matches!(e, Error::UnknownZone { .. }));
    assert_eq!(
        e.to_string(),
        r#"zone "nope" is not managed here; zones: lab"#
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_starts_nothing_new_and_waits_for_running_migrations() {
    // 50x: an 8 GiB migration takes 0.16 s.
    let z = zone(UNBALANCED, 50.0, |_| {}).await;
    let started = Arc::new(Notify::new());
    let d = z
        .daemon(Overrides::default(), options(1))
        .with_progress(Arc::new(FirstStart(Arc::clone(&started))));
    let when_started = Arc::clone(&started);
    d.run(async move { when_started.notified().await }).await;
    let report = d.last_report("lab").unwrap();
    let execution = report.balance.as_ref().unwrap().execution.as_ref().unwrap();
    assert_eq!(
        execution.stopped.as_deref(),
        Some("a stop was requested"),
        "{execution:#?}"
    );
    assert!(
        !execution.done.is_empty(),
        "the running migration was waited for"
    );
    assert!(execution.unfinished.is_empty());
    let planned = report.balance.as_ref().unwrap().plan.migrations.len();
    assert!(execution.done.len() < planned, "nothing new started");
    let locked = z.sim.world().guests.values().any(|g| g.lock().is_some());
    assert!(!locked, "no migration left running");
    assert!(d.is_stopped());
    z.shutdown().await;
}

/// Marks guests of the demo as creations cut short: `(vmid, extra tags)`.
fn mark(v: &mut serde_json::Value, marks: &[(u32, String)]) {
    for r in v["resources"].as_array_mut().unwrap() {
        let Some(vmid) = r["vmid"].as_u64() else {
            continue;
        };
        if let Some((_, tags)) = marks.iter().find(|(m, _)| u64::from(*m) == vmid) {
            let old = r["tags"].as_str().unwrap_or_default().to_owned();
            r["tags"] = format!("{old};{tags}").trim_start_matches(';').into();
        }
    }
}

/// The demo's time: the scenario's `time`.
const T0: i64 = 1_764_400_000;

fn marks() -> Vec<(u32, String)> {
    vec![
        // Stopped, marked two hours ago: a half-made VM.
        (
            134,
            format!("flxp.creating;flxp.creating-since.{}", T0 - 7200),
        ),
        // Stopped, marked a minute ago: a creation that may be in progress elsewhere.
        (
            160,
            format!("flxp.creating;flxp.creating-since.{}", T0 - 60),
        ),
        // Running, marked two hours ago: complete, its marker's removal failed.
        (
            170,
            format!("flxp.creating;flxp.creating-since.{}", T0 - 7200),
        ),
    ]
}

fn tags_of(z: &support::Zone, vmid: u32) -> String {
    z.sim.world().guests[&vmid]
        .config
        .values
        .get("tags")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_marker_is_cleaned_up_and_a_young_one_left_alone() {
    let z = zone(DEMO, 500.0, |v| mark(v, &marks())).await;
    let d = z.daemon(Overrides::default(), options(3));
    let report = d.run_round("lab").await.unwrap();
    let outcome = |vmid: u32| {
        report
            .stale
            .iter()
            .find(|m| m.vmid == vmid)
            .map(|m| m.outcome.clone())
    };
    assert_eq!(
        outcome(134).as_deref(),
        Some("deleted"),
        "{:?}",
        report.stale
    );
    assert_eq!(
        outcome(170).as_deref(),
        Some("unmarked"),
        "{:?}",
        report.stale
    );
    assert_eq!(outcome(160), None, "{:?}", report.stale);
    {
        let world = z.sim.world();
        assert!(!world.guests.contains_key(&134), "the half-made VM is gone");
        assert!(world.guests[&170].running, "the complete VM is kept");
    }
    assert_eq!(tags_of(&z, 170), "ci");
    assert!(tags_of(&z, 160).contains("flxp.creating"));
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_markers_are_only_reported_when_configured_to_warn() {
    let z = zone(DEMO, 500.0, |v| mark(v, &marks())).await;
    let before = z.sim.world().guests.len();
    let options = DaemonOptions {
        stale: StaleOptions {
            after: Duration::from_secs(3600),
            action: StaleAction::Warn,
        },
        ..options(3)
    };
    let d = z.daemon(Overrides::default(), options);
    let report = d.run_round("lab").await.unwrap();
    let mut warned: Vec<(u32, &str)> = report
        .stale
        .iter()
        .map(|m| (m.vmid, m.outcome.as_str()))
        .collect();
    warned.sort_unstable();
    assert_eq!(warned, [(134, "warned"), (170, "warned")]);
    assert_eq!(z.sim.world().guests.len(), before);
    assert!(tags_of(&z, 170).contains("flxp.creating"));
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_taken_out_of_maintenance_mid_evacuation_keeps_the_rest_of_its_guests() {
    // 1x: each move of pve4's guests (1 to 2 GiB at 1 GiB/s) takes a second or more, one at a
    // time out of pve4.
    let z = zone(DEMO, 1.0, |_| {}).await;
    flxp_engine::maintenance::set(&z.api, "pve4", true)
        .await
        .unwrap();
    let started = Arc::new(Notify::new());
    let d = z
        .daemon(Overrides::default(), options(3))
        .with_progress(Arc::new(FirstStart(Arc::clone(&started))));
    let round = tokio::spawn({
        let d = d.clone();
        async move { d.run_round("lab").await.unwrap() }
    });
    started.notified().await;
    // `flxp maintenance pve4 --off` while the first migration runs.
    flxp_engine::maintenance::set(&z.api, "pve4", false)
        .await
        .unwrap();
    let report = round.await.unwrap();
    let evac = report.evacuation.as_ref().unwrap();
    assert_eq!(evac.plan.migrations.len(), 3, "{}", evac.plan.summary);
    let execution = evac.execution.as_ref().unwrap();
    assert_eq!(execution.done.len(), 1, "{execution:#?}");
    assert!(execution.failed.is_empty(), "{execution:#?}");
    assert_eq!(execution.skipped.len(), 1, "{execution:#?}");
    assert_eq!(
        execution.skipped[0].reasons,
        ["node pve4 is no longer in maintenance"]
    );
    assert_eq!(execution.replans.len(), 1, "{execution:#?}");
    assert_eq!(execution.replans[0].migrations, 0, "{execution:#?}");
    let left = z.guests_on("pve4").len();
    assert_eq!(left, 3, "the ignored guest and the two not yet moved stay");
    z.shutdown().await;
}
