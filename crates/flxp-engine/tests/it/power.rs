//! The daemon's power saving against the simulator: low load frees a node and switches it off,
//! the quorum floor holds, high load (or a need for room) wakes it and guests are balanced back,
//! nothing flaps inside the minimum interval, and an interrupted consolidation is finished. Each
//! daemon here is fresh where it matters: what flxp switched off is read from Proxmox, not memory.

use std::time::{Duration, Instant};

use flxp_core::Overrides;
use flxp_engine::daemon::LeaseSettings;
use flxp_engine::power_mark::{self, PowerState};
use flxp_engine::{AutoConsolidate, Daemon, DaemonOptions, PowerReport, RoundReport};
use flxp_sim::scenario::add_node_like;

use crate::support::{self, DEMO, UNBALANCED, daemon_execute, zone};

fn auto(below: f64, above: f64, min_interval: Duration) -> AutoConsolidate {
    AutoConsolidate {
        shutdown: true,
        consolidate_below: below,
        wake_above: above,
        min_interval,
        ..AutoConsolidate::default()
    }
}

fn daemon(z: &support::Zone, power: AutoConsolidate) -> Daemon {
    daemon_with(z, power, |_| {})
}

fn daemon_with(
    z: &support::Zone,
    power: AutoConsolidate,
    tweak: impl FnOnce(&mut DaemonOptions),
) -> Daemon {
    let mut options = DaemonOptions {
        interval: Duration::from_secs(3600),
        retry_after: Duration::from_secs(1),
        execute: daemon_execute(),
        power: Some(power),
        ..DaemonOptions::default()
    };
    tweak(&mut options);
    z.daemon(Overrides::default(), options)
}

/// A daemon as [`daemon`], with a `[balance] cooldown-secs`.
fn daemon_cooling(z: &support::Zone, power: AutoConsolidate, cooldown_secs: i64) -> Daemon {
    daemon_with(z, power, |o| o.balance.cooldown_secs = cooldown_secs)
}

/// A round of zone `lab` that reports no error.
async fn clean_round(d: &Daemon) -> RoundReport {
    let r = d.run_round("lab").await.unwrap();
    assert!(r.error.is_none(), "{r:#?}");
    r
}

async fn round(d: &Daemon) -> PowerReport {
    let r = clean_round(d).await;
    let text = format!("{r:#?}");
    r.power.unwrap_or_else(|| panic!("no power report: {text}"))
}

/// Marks `node` as a consolidation does before emptying it: power mark `off` (at `since`, set
/// through pve1) and maintenance.
async fn mark_off(z: &support::Zone, node: &str, since: i64) {
    power_mark::set(&z.api, "pve1", node, Some((PowerState::Off, since)))
        .await
        .unwrap();
    flxp_engine::maintenance::set(&z.api, node, true)
        .await
        .unwrap();
}

/// pve2 is back in service: no power mark anywhere, no maintenance note on it.
fn assert_given_back(z: &support::Zone) {
    assert!(!all_notes(z).contains("flxp-power"), "{}", all_notes(z));
    assert!(
        !z.sim.world().nodes["pve2"]
            .notes
            .contains("flxp.maintenance")
    );
}

/// The round after pve2 woke gives it back, and its balancing moves guests onto it cleanly.
async fn assert_balanced_back(z: &support::Zone, d: &Daemon) {
    let r = d.run_round("lab").await.unwrap();
    let p = r.power.as_ref().unwrap();
    assert_eq!(p.back, ["pve2"], "{r:#?}");
    let balance = r.balance.as_ref().unwrap();
    assert!(
        balance.plan.migrations.iter().any(|m| m.to == "pve2"),
        "{}",
        balance.plan.summary
    );
    assert!(balance.execution.as_ref().unwrap().is_clean());
    assert!(guests_on(z, "pve2") > 0, "guests balanced back onto pve2");
}

/// The lease of zone `lab`, held by `me:1:1` on `node`.
fn lease_on(node: &str) -> LeaseSettings {
    LeaseSettings {
        options: flxp_engine::LeaseOptions {
            ttl: Duration::from_secs(30),
            margin: Duration::from_secs(5),
            holder: "me:1:1".into(),
            command: None,
            // Held after the round, so that the test reads it in the node's notes.
            hold: flxp_engine::LeaseHold::Always,
        },
        nodes: [("lab".to_owned(), node.to_owned())].into(),
    }
}

/// Waits (real time, bounded) until the simulated node is online or offline.
async fn until_online(z: &support::Zone, node: &str, online: bool) {
    let start = Instant::now();
    while z.sim.world().nodes[node].online != online && start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(z.sim.world().nodes[node].online, online, "{node}");
}

fn all_notes(z: &support::Zone) -> String {
    let w = z.sim.world();
    w.nodes
        .values()
        .map(|n| n.notes.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

fn guests_on(z: &support::Zone, node: &str) -> usize {
    z.guests_on(node).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_load_switches_a_node_off_and_high_load_wakes_it_and_balances_back() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    // The demo zone uses about a sixth of its memory: well below 40%.
    let d = daemon(&z, auto(0.4, 0.7, Duration::ZERO));
    let p = round(&d).await;
    let c = p.consolidation.as_ref().unwrap();
    assert_eq!(c.freed_names(), ["pve2"], "{p:#?}");
    assert!(p.execution.as_ref().unwrap().is_clean(), "{p:#?}");
    assert_eq!(p.switched_off, ["pve2"], "{p:#?}");
    assert!(
        p.decision.contains("below consolidate-below"),
        "{}",
        p.decision
    );
    until_online(&z, "pve2", false).await;
    assert_eq!(guests_on(&z, "pve2"), 0);
    assert!(
        all_notes(&z).contains("<!-- flxp-power node=pve2 state=off since="),
        "{}",
        all_notes(&z)
    );

    // Three of four nodes online: quorum lets no further node go, whatever the load.
    let p = round(&d).await;
    let c = p.consolidation.as_ref().unwrap();
    assert!(c.freed.is_empty(), "{p:#?}");
    assert!(p.switched_off.is_empty());
    assert!(
        c.kept.iter().any(|k| k.reason.contains("quorum")),
        "{:#?}",
        c.kept
    );

    // A fresh daemon whose wake level is below the load: it finds pve2 from the mark and wakes it.
    let d = daemon(&z, auto(0.05, 0.1, Duration::ZERO));
    let p = round(&d).await;
    assert_eq!(p.woken, ["pve2"], "{p:#?}");
    assert!(p.decision.contains("above wake-above"), "{}", p.decision);
    assert!(all_notes(&z).contains("node=pve2 state=waking"));
    until_online(&z, "pve2", true).await;
    assert_balanced_back(&z, &d).await;
    assert_given_back(&z);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_flaps_inside_the_minimum_interval_but_a_need_for_room_wakes_at_once() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    let day = Duration::from_secs(86_400);
    // Low load, but it has not been low for a day yet: nothing changes.
    let d = daemon(&z, auto(0.4, 0.7, day));
    let p = round(&d).await;
    assert!(p.consolidation.is_none(), "{p:#?}");
    assert!(
        p.decision.contains("waiting for min-interval-secs"),
        "{}",
        p.decision
    );
    assert!(guests_on(&z, "pve2") > 1);
    assert!(z.sim.world().nodes["pve2"].online);

    // Consolidated now (no interval), then a daemon with a day's interval and a low wake level.
    round(&daemon(&z, auto(0.4, 0.7, Duration::ZERO))).await;
    until_online(&z, "pve2", false).await;
    let d = daemon(&z, auto(0.05, 0.1, day));
    let p = round(&d).await;
    assert!(p.woken.is_empty(), "{p:#?}");
    assert!(p.decision.contains("last power change"), "{}", p.decision);
    assert!(!z.sim.world().nodes["pve2"].online);

    // A VM creation that found no room does not wait for the interval.
    d.want_room("lab");
    let p = round(&d).await;
    assert_eq!(p.woken, ["pve2"], "{p:#?}");
    assert!(p.decision.contains("room is needed"), "{}", p.decision);
    until_online(&z, "pve2", true).await;
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_consolidation_is_finished_by_the_next_round() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    // As a consolidation killed mid-way leaves it: pve2 marked and in maintenance, still full.
    mark_off(&z, "pve2", z.sim.now() as i64).await;
    assert!(guests_on(&z, "pve2") > 1);
    // A high consolidate level would not consolidate now: only the resume acts.
    let d = daemon(&z, auto(0.4, 0.7, Duration::from_secs(86_400)));
    for _ in 0..4 {
        let r = clean_round(&d).await;
        if r.power.as_ref().is_some_and(|p| !p.switched_off.is_empty()) {
            break;
        }
    }
    until_online(&z, "pve2", false).await;
    assert_eq!(guests_on(&z, "pve2"), 0);
    assert!(all_notes(&z).contains("node=pve2 state=off"));
    z.shutdown().await;
}

/// As a consolidation killed after emptying pve2 leaves it: marked `off` `age` simulated
/// seconds ago, in maintenance, no guest left (moved to pve1). Returns when it was marked.
async fn emptied_and_marked(z: &support::Zone, age: i64) -> i64 {
    let since = z.sim.now() as i64 - age;
    mark_off(z, "pve2", since).await;
    for g in z.sim.world().guests.values_mut() {
        if g.node == "pve2" {
            g.node = "pve1".into();
        }
    }
    assert_eq!(guests_on(z, "pve2"), 0);
    since
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_node_is_given_back_not_switched_off_when_the_load_rose() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    emptied_and_marked(&z, 0).await;
    // The demo's load (about a sixth) is above both levels here.
    let d = daemon(&z, auto(0.05, 0.1, Duration::from_secs(86_400)));
    let p = round(&d).await;
    assert!(p.switched_off.is_empty(), "{p:#?}");
    assert_eq!(p.back, ["pve2"], "{p:#?}");
    assert!(p.decision.contains("consolidate-below"), "{}", p.decision);
    assert!(z.sim.world().nodes["pve2"].online);
    assert_given_back(&z);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_shutdown_restarts_the_minimum_interval() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    let old = emptied_and_marked(&z, 200_000).await;
    let day = Duration::from_secs(86_400);
    let p = round(&daemon(&z, auto(0.4, 0.7, day))).await;
    assert_eq!(p.switched_off, ["pve2"], "{p:#?}");
    until_online(&z, "pve2", false).await;
    let notes = all_notes(&z);
    assert!(notes.contains("node=pve2 state=off"), "{notes}");
    assert!(!notes.contains(&format!("since={old}")), "{notes}");
    // A fresh daemon whose wake level is below the load waits a day from the shutdown.
    let p = round(&daemon(&z, auto(0.05, 0.1, day))).await;
    assert!(p.woken.is_empty(), "{p:#?}");
    assert!(p.decision.contains("last power change"), "{}", p.decision);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_node_takes_load_at_once_whatever_the_cooldown() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    // A cooldown of a year: every guest the consolidation moved stays in it for the whole test.
    let year = 365 * 86_400;
    let p = round(&daemon_cooling(&z, auto(0.4, 0.7, Duration::ZERO), year)).await;
    assert_eq!(p.switched_off, ["pve2"], "{p:#?}");
    until_online(&z, "pve2", false).await;
    // Every guest moved recently, as when a consolidation packed most of the zone.
    {
        let mut w = z.sim.world();
        let guests: Vec<(String, u32)> = w
            .guests
            .values()
            .map(|g| (g.node.clone(), g.vmid))
            .collect();
        for (node, vmid) in guests {
            w.instant_task(&node, "qmigrate", &vmid.to_string(), "root@pam");
        }
    }
    let d = daemon_cooling(&z, auto(0.05, 0.1, Duration::ZERO), year);
    let p = round(&d).await;
    assert_eq!(p.woken, ["pve2"], "{p:#?}");
    until_online(&z, "pve2", true).await;
    assert_balanced_back(&z, &d).await;
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_gives_an_unfinished_node_back_before_emptying_it() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    // As a consolidation killed mid-way leaves it: pve2 marked and in maintenance, still full.
    mark_off(&z, "pve2", z.sim.now() as i64).await;
    let before = guests_on(&z, "pve2");
    assert!(before > 1);
    // The load (about a sixth) is above consolidate-below now: pve2 is needed back.
    let d = daemon(&z, auto(0.05, 0.1, Duration::from_secs(86_400)));
    let r = clean_round(&d).await;
    assert!(r.evacuation.is_none(), "{r:#?}");
    assert_eq!(r.migrations_done(), 0, "{r:#?}");
    assert_eq!(r.power.as_ref().unwrap().back, ["pve2"], "{r:#?}");
    assert_eq!(guests_on(&z, "pve2"), before);
    assert!(!all_notes(&z).contains("flxp-power"), "{}", all_notes(&z));
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_going_down_is_not_asked_to_shut_down_again() {
    // A shutdown that takes a (simulated) day: the node stays online meanwhile.
    let z = zone(DEMO, 500.0, |v| {
        v["sim"]["node_shutdown_secs"] = 86_400.0.into()
    })
    .await;
    let d = daemon(&z, auto(0.4, 0.7, Duration::ZERO));
    let p = round(&d).await;
    assert_eq!(p.switched_off, ["pve2"], "{p:#?}");
    let marked = all_notes(&z);
    let mark = marked
        .lines()
        .find(|l| l.contains("flxp-power node=pve2"))
        .unwrap()
        .to_owned();
    // Simulated time passes (a re-dated mark would show it).
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(z.sim.world().nodes["pve2"].online);
    let p = round(&d).await;
    assert!(p.switched_off.is_empty(), "{p:#?}");
    assert!(all_notes(&z).contains(&mark), "{mark}\n{}", all_notes(&z));
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_load_does_not_balance_onto_nodes_the_consolidation_would_free() {
    // pve1 carries most guests, the zone a quarter of its memory: balancing would spread onto
    // the idle nodes a consolidation (waiting for its interval) empties again.
    let z = zone(UNBALANCED, 500.0, |_| {}).await;
    let d = daemon_with(&z, auto(0.4, 0.7, Duration::from_secs(86_400)), |o| {
        o.balance.trigger.hold = 1;
    });
    let r = clean_round(&d).await;
    let p = r.power.as_ref().unwrap();
    assert!(!p.to_free.is_empty(), "{p:#?}");
    let t = r.trigger.as_ref().unwrap();
    assert!(!t.act, "{}", t.reason);
    assert!(t.reason.contains("balancing waits"), "{}", t.reason);
    assert!(r.balance.is_none(), "{r:#?}");
    assert_eq!(r.migrations_done(), 0);
    // Without power saving the same round balances (the trigger would act).
    let plain = daemon_with(&z, auto(0.4, 0.7, Duration::ZERO), |o| {
        o.balance.trigger.hold = 1;
        o.power = None;
    });
    let r = plain.run_round("lab").await.unwrap();
    assert!(r.trigger.as_ref().unwrap().act, "{r:#?}");
    z.shutdown().await;
}

/// The nodes balancing waits for are those the consolidation really frees: never the lease's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balancing_waits_for_what_the_consolidation_frees_not_the_lease_node() {
    let z = zone(UNBALANCED, 500.0, |_| {}).await;
    let waiting = auto(0.4, 0.7, Duration::from_secs(86_400));
    let d = daemon_with(&z, waiting.clone(), |o| o.balance.trigger.hold = 1);
    let r = d.run_round("lab").await.unwrap();
    let first = r.power.as_ref().unwrap().to_free[0].clone();
    assert_eq!(r.migrations_done(), 0);
    // The node it would free first holds the lease: it is kept, and not named.
    let d = daemon_with(&z, waiting, |o| o.balance.trigger.hold = 1).with_lease(lease_on(&first));
    let r = clean_round(&d).await;
    let p = r.power.as_ref().unwrap();
    assert!(!p.to_free.contains(&first), "{first}: {p:#?}");
    let t = r.trigger.as_ref().unwrap();
    assert!(!t.reason.contains(&first), "{first}: {}", t.reason);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_holding_the_lease_is_never_consolidated() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    // pve2 is the node a consolidation frees first (above): let it hold the lease.
    let d = daemon(&z, auto(0.4, 0.7, Duration::ZERO)).with_lease(lease_on("pve2"));
    let p = round(&d).await;
    let c = p.consolidation.as_ref().unwrap();
    assert!(!c.freed_names().contains(&"pve2".to_owned()), "{p:#?}");
    let k = c.kept.iter().find(|k| k.node == "pve2").unwrap();
    assert!(k.reason.contains("holds flxp's lease of zone lab"), "{k:?}");
    assert!(!p.switched_off.contains(&"pve2".to_owned()), "{p:#?}");
    assert!(z.sim.world().nodes["pve2"].online);
    assert!(
        z.sim.world().nodes["pve2"]
            .notes
            .contains("<!-- flxp-lease zone=lab holder=me:1:1 ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_power_mark_is_dated_at_the_shutdown_not_at_the_start_of_the_round() {
    let z = zone(DEMO, 500.0, |_| {}).await;
    let d = daemon(&z, auto(0.4, 0.7, Duration::ZERO));
    let r = d.run_round("lab").await.unwrap();
    let p = r.power.as_ref().unwrap();
    assert_eq!(p.switched_off, ["pve2"], "{r:#?}");
    assert!(!p.execution.as_ref().unwrap().done.is_empty(), "{r:#?}");
    // The last migration off pve2 ended (simulated time) before the shutdown.
    let last_move = z
        .sim
        .world()
        .tasks
        .all()
        .iter()
        .filter(|t| matches!(t.kind.as_str(), "qmigrate" | "vzmigrate"))
        .filter_map(|t| t.ended)
        .fold(0.0_f64, f64::max) as i64;
    assert!(last_move > r.time, "the migrations took simulated time");
    let notes = z
        .sim
        .world()
        .nodes
        .iter()
        .map(|(n, s)| (n.clone(), s.notes.clone()))
        .collect();
    let marks = power_mark::read(&notes);
    let mark = marks.iter().find(|m| m.node == "pve2").unwrap();
    assert_eq!(mark.state, PowerState::Off);
    assert!(
        mark.since >= last_move,
        "mark since {} is before the last migration ended at {last_move} (round began {})",
        mark.since,
        r.time
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_during_a_migration_off_a_marked_node_finishes_that_node() {
    // A consolidation killed while 102 was migrating off pve2 (slowly: 1 MiB/s is minutes of
    // simulated time at scale 50): pve2 marked and in maintenance, 102 locked `migrate`.
    let z = zone(DEMO, 50.0, |_| {}).await;
    mark_off(&z, "pve2", z.sim.now() as i64).await;
    let params = flxp_pve::types::QemuMigrateParams {
        target: "pve4".into(),
        online: Some(true),
        bwlimit: Some(1024),
        ..flxp_pve::types::QemuMigrateParams::default()
    };
    z.api.migrate_qemu("pve2", 102, &params).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(z.node_of(102), "pve2", "102 is still on its way");
    // A fresh daemon (a restart) with a low load and a day's min-interval.
    let d = daemon(&z, auto(0.4, 0.7, Duration::from_secs(86_400)));
    let p = round(&d).await;
    assert!(p.back.is_empty(), "{p:#?}");
    let c = p.consolidation.as_ref().unwrap();
    assert_eq!(c.freed_names(), ["pve2"], "{p:#?}");
    assert!(c.freed[0].resumed);
    assert!(c.plan.migrations.iter().all(|m| m.vmid != 102), "{p:#?}");
    let notes = all_notes(&z);
    assert!(notes.contains("node=pve2 state=off"), "{notes}");
    for other in ["pve1", "pve3", "pve4"] {
        assert!(!notes.contains(&format!("node={other} ")), "{notes}");
    }
    assert_eq!(
        guests_on(&z, "pve2"),
        1,
        "only 102 (in flight) is left on pve2"
    );
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_on_lan_is_sent_again_once_per_wake_timeout() {
    // pve2 was woken long ago and is still off (scale 1: a boot takes minutes of real time).
    let z = zone(DEMO, 1.0, |_| {}).await;
    let long_ago = emptied_and_marked(&z, 1000).await;
    power_mark::set(&z.api, "pve1", "pve2", Some((PowerState::Waking, long_ago)))
        .await
        .unwrap();
    z.sim.world().nodes.get_mut("pve2").unwrap().online = false;
    let d = daemon(
        &z,
        AutoConsolidate {
            wake_timeout: Duration::from_secs(30),
            ..auto(0.4, 0.7, Duration::from_secs(86_400))
        },
    );
    let p = round(&d).await;
    assert_eq!(p.woken, ["pve2"], "{p:#?}");
    assert!(
        p.errors.iter().any(|e| e.contains("sending it again")),
        "{p:#?}"
    );
    let notes = all_notes(&z);
    assert!(notes.contains("node=pve2 state=waking"), "{notes}");
    assert!(
        !notes.contains(&format!("since={long_ago}")),
        "re-dated: {notes}"
    );
    // The next round, inside the timeout, neither sends nor warns again.
    let p = round(&d).await;
    assert!(p.woken.is_empty(), "{p:#?}");
    assert!(
        p.errors.iter().all(|e| !e.contains("sending it again")),
        "{p:#?}"
    );
    z.shutdown().await;
}

/// DEMO with two more nodes like pve4 (pve5 empty, pve6 holding 102): six nodes, so quorum lets
/// two go.
fn six_nodes(v: &mut serde_json::Value) {
    for name in ["pve5", "pve6"] {
        add_node_like(v, "pve4", name);
    }
    let resources = v["resources"].as_array_mut().unwrap();
    for r in resources.iter_mut().filter(|r| r["vmid"] == 102) {
        r["node"] = "pve6".into();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_migration_backs_off_and_the_empty_node_still_goes_off() {
    let z = zone(DEMO, 50.0, six_nodes).await;
    let now = z.sim.now() as i64;
    for node in ["pve5", "pve6"] {
        mark_off(&z, node, now).await;
    }
    z.sim.world().faults.set(flxp_sim::scenario::FaultSpec {
        fail_migrations: vec![flxp_sim::scenario::FailMigration {
            vmid: 102,
            message: Some("simulated: connection reset".into()),
        }],
        ..flxp_sim::scenario::FaultSpec::default()
    });
    let d = daemon_cooling(&z, auto(0.4, 0.7, Duration::from_secs(86_400)), 3600);
    let p = round(&d).await;
    assert_eq!(z.migrations_of(102), 1, "{p:#?}");
    assert_eq!(
        p.switched_off,
        ["pve5"],
        "each emptied node on its own: {p:#?}"
    );
    assert!(
        p.still_on
            .iter()
            .any(|s| s.starts_with("pve6: ") && s.contains("102")),
        "{p:#?}"
    );
    // The next rounds do not hammer 102: it waits for the cooldown, and pve6 says why it is on.
    for _ in 0..2 {
        let p = round(&d).await;
        assert!(p.switched_off.is_empty(), "{p:#?}");
        assert!(
            p.still_on
                .iter()
                .any(|s| s.starts_with("pve6: ") && s.contains("cooldown")),
            "{p:#?}"
        );
    }
    assert_eq!(z.migrations_of(102), 1, "not retried within the cooldown");
    assert_eq!(z.node_of(102), "pve6");
    z.shutdown().await;
}

/// Starts a live migration of qemu guest `vmid` from `from` to `to` by hand at 1 KiB/s (hours of
/// real time here): it is in flight for the whole test.
async fn migrate_slowly(z: &support::Zone, vmid: u32, from: &str, to: &str) {
    let params = flxp_pve::types::QemuMigrateParams {
        target: to.into(),
        online: Some(true),
        bwlimit: Some(1),
        ..flxp_pve::types::QemuMigrateParams::default()
    };
    z.api.migrate_qemu(from, vmid, &params).await.unwrap();
    assert_eq!(z.sim.world().guests[&vmid].lock(), Some("migrate"));
}

/// DEMO with pve5, an empty node like pve4, in maintenance, and guest 101 migrating onto it.
async fn landing_on_pve5(marked_off: bool) -> support::Zone {
    let z = zone(DEMO, 500.0, |v| add_node_like(v, "pve4", "pve5")).await;
    if marked_off {
        mark_off(&z, "pve5", z.sim.now() as i64).await;
    } else {
        flxp_engine::maintenance::set(&z.api, "pve5", true)
            .await
            .unwrap();
    }
    migrate_slowly(&z, 101, "pve1", "pve5").await;
    z
}

/// The guest stays running, on its way to pve5, and pve5 stays on.
fn assert_still_landing(z: &support::Zone) {
    let w = z.sim.world();
    assert!(w.nodes["pve5"].online, "pve5 stays on");
    assert!(w.guests[&101].running, "101 keeps running");
    assert_eq!(w.guests[&101].lock(), Some("migrate"), "101 is on its way");
}

/// Checks why pve5 was not shut down: guest 101 landing on it.
fn assert_held_by_landing(node: &str, reason: &str) {
    assert_eq!(node, "pve5");
    assert_eq!(
        reason,
        "guest 101 (web-1) is migrating onto pve5 (from pve1): it holds the node once it lands"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_check_refuses_a_node_a_guest_is_migrating_onto() {
    let z = landing_on_pve5(false).await;
    let exec = z.executor(flxp_engine::Limits::default());
    match exec.shut_down_if_empty("pve5").await {
        Err(flxp_engine::consolidate::PowerError::Refused { node, reason }) => {
            assert_held_by_landing(&node, &reason);
        }
        other => panic!("not refused: {other:?}"),
    }
    assert_still_landing(&z);
    z.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_node_a_guest_is_migrating_onto_goes_back_not_off() {
    let z = landing_on_pve5(true).await;
    let d = daemon(&z, auto(0.4, 0.7, Duration::from_secs(86_400)));
    let p = round(&d).await;
    assert!(p.switched_off.is_empty(), "{p:#?}");
    assert_eq!(p.back, ["pve5"], "{p:#?}");
    let c = p.consolidation.as_ref().unwrap();
    let k = c.kept.iter().find(|k| k.node == "pve5").unwrap();
    assert!(
        k.reason
            .contains("guest 101 (web-1) is migrating onto pve5"),
        "{k:?}"
    );
    assert_still_landing(&z);
    assert!(!all_notes(&z).contains("flxp-power"), "{}", all_notes(&z));
    z.shutdown().await;
}

/// GET requests made so far to `path` (a route template), by anyone.
fn gets(z: &support::Zone, path: &str) -> u64 {
    let w = z.sim.world();
    w.records
        .requests
        .iter()
        .filter(|(k, _)| k.method == "GET" && k.path == path)
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_begun_while_the_shutdown_call_travels_is_reported_not_hidden() {
    let z = zone(DEMO, 500.0, |v| add_node_like(v, "pve4", "pve5")).await;
    flxp_engine::maintenance::set(&z.api, "pve5", true)
        .await
        .unwrap();
    // The shutdown call takes 3 real seconds to arrive: time enough for an admin's migration to
    // begin after flxp's last check read the node empty.
    z.sim.world().faults.set(flxp_sim::scenario::FaultSpec {
        latency: vec![flxp_sim::scenario::LatencyFault {
            path: "/nodes/pve5/status".into(),
            method: Some("POST".into()),
            ms: 3000,
        }],
        ..flxp_sim::scenario::FaultSpec::default()
    });
    let (resources, tasks) = (gets(&z, "/cluster/resources"), gets(&z, "/cluster/tasks"));
    let exec = z.executor(flxp_engine::Limits::default());
    let shutdown = tokio::spawn(async move { exec.shut_down_if_empty("pve5").await });
    // The check's read is answered (the call itself waits in the gate): the admin acts now.
    while gets(&z, "/cluster/resources") == resources || gets(&z, "/cluster/tasks") == tasks {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Counted as they arrive: give their answers a moment to be written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    migrate_slowly(&z, 101, "pve1", "pve5").await;
    match shutdown.await.unwrap() {
        Err(flxp_engine::consolidate::PowerError::Raced { node, reason }) => {
            assert_held_by_landing(&node, &reason);
        }
        other => panic!("a clean shutdown with a guest landing: {other:?}"),
    }
    z.shutdown().await;
}
