//! The return hold: balancing takes no guest back to a node it left recently (no ping-pong);
//! fixes may, and say so.

use crate::balance::{BalanceOptions, Plan, StayKind, plan};
use crate::cluster::Cluster;
use crate::constraints::Rules;
use crate::state::State;
use crate::testutil::*;

/// The snapshot's time.
const NOW: i64 = 1_000_000;

/// pve1 holds 101 (16 GiB) and 102 (16 GiB, never moved); pve2 is empty, the best target; with
/// `third`, pve3 holds 103 (8 GiB, never moved). 101 left pve2 `ago` seconds before the snapshot.
fn cluster(third: bool, ago: i64, tag: &str) -> Cluster {
    let mut b = ClusterBuilder::new()
        .node(node("pve1").memory(64 * GIB))
        .node(node("pve2").memory(64 * GIB));
    if third {
        b = b
            .node(node("pve3").memory(64 * GIB))
            .guest(vm(103, "pve3").mem(8 * GIB, 8 * GIB).tagged("flxp.ignore"));
    }
    b.guest(vm(101, "pve1").mem(16 * GIB, 16 * GIB).tagged(tag))
        .guest(
            vm(102, "pve1")
                .mem(16 * GIB, 16 * GIB)
                .tagged("flxp.ignore"),
        )
        .task(finished_migration_task(101, "pve2", NOW - ago))
        .time(NOW)
        .build()
}

fn run(c: &Cluster, o: &BalanceOptions) -> Plan {
    let (rules, state) = (Rules::compile(c), State::new(c));
    plan(c, &rules, &state, &placer(), o).unwrap()
}

#[test]
fn balancing_does_not_take_a_guest_back_to_the_node_it_left_an_hour_ago() {
    let p = run(&cluster(false, 3_600, ""), &BalanceOptions::default());
    assert_eq!(targets(&p), vec![], "{}", p.summary);
    let held: Vec<_> = p
        .left_in_place
        .iter()
        .filter(|l| l.kind == StayKind::ReturnHold)
        .collect();
    assert_eq!(held.len(), 1, "{:?}", p.left_in_place);
    assert_eq!(held[0].vmids, [101]);
    assert_eq!(
        held[0].reason,
        "1 guest would return to a node it left within the 6 h return hold"
    );
    let skipped: Vec<(u32, &str)> = p
        .skipped
        .iter()
        .map(|s| (s.vmid, s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            (
                101,
                "not moved to balance: its best target pve2 is a node it left 1 h ago, within the 6 h return hold"
            ),
            (
                102,
                "not moved to balance: tagged flxp.ignore / plb_ignore: never moved"
            )
        ]
    );
}

#[test]
fn balancing_takes_another_target_when_the_best_one_is_held() {
    let free = run(&cluster(true, 30 * 3_600, ""), &BalanceOptions::default());
    assert_eq!(targets(&free), vec![(101, "pve2")], "{}", free.summary);
    let p = run(&cluster(true, 3_600, ""), &BalanceOptions::default());
    assert_eq!(targets(&p), vec![(101, "pve3")], "{}", p.summary);
    assert!(
        p.left_in_place
            .iter()
            .all(|l| l.kind != StayKind::ReturnHold),
        "101 moved: {:?}",
        p.left_in_place
    );
}

#[test]
fn after_the_hold_or_with_it_off_balancing_may_return_a_guest() {
    let after = run(&cluster(false, 21_600, ""), &BalanceOptions::default());
    assert_eq!(targets(&after), vec![(101, "pve2")], "{}", after.summary);
    let off = BalanceOptions {
        return_hold_secs: 0,
        ..BalanceOptions::default()
    };
    let p = run(&cluster(false, 3_600, ""), &off);
    assert_eq!(targets(&p), vec![(101, "pve2")], "{}", p.summary);
}

#[test]
fn a_fix_returns_a_guest_within_the_hold_and_says_so() {
    let p = run(
        &cluster(false, 7_200, "flxp.node.pve2"),
        &BalanceOptions::default(),
    );
    assert_eq!(targets(&p), vec![(101, "pve2")], "{}", p.summary);
    let reason = &p.migrations[0].reason;
    assert!(
        reason.starts_with("returns to pve2, which it left 2 h ago, to fix flxp.node"),
        "{reason}"
    );
}

#[test]
fn a_held_guest_another_plan_moves_is_no_longer_counted_as_held() {
    use crate::balance::LeftInPlace;
    let held = |vmids: Vec<u32>, reason: &str| LeftInPlace {
        kind: StayKind::ReturnHold,
        count: vmids.len(),
        reason: reason.into(),
        vmids,
    };
    let locked = LeftInPlace {
        kind: StayKind::Locked,
        count: 1,
        reason: "1 guest is locked (backup)".into(),
        vmids: vec![105],
    };
    let left = vec![
        held(
            vec![101, 102],
            "2 guests would return to a node they left within the 6 h return hold",
        ),
        locked.clone(),
    ];
    let kept = super::explain::without_moved(left.clone(), &[102, 105], 21_600);
    assert_eq!(
        kept,
        [
            held(
                vec![101],
                "1 guest would return to a node it left within the 6 h return hold"
            ),
            locked.clone()
        ]
    );
    let kept = super::explain::without_moved(left, &[101, 102], 21_600);
    assert_eq!(kept, [locked]);
}
