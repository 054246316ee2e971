//! Local disks in plans: their bytes are part of a move's cost and a target needs room for them.

use crate::balance::{BalanceOptions, plan};
use crate::cluster::Cluster;
use crate::constraints::Rules;
use crate::state::State;
use crate::testutil::*;

/// Nodes a and b, a's local-lvm with `a_used` of 200 GiB used, b's with 12 GiB free of 100.
fn a_and_b(a_used: u64) -> ClusterBuilder {
    ClusterBuilder::new()
        .node(node("a"))
        .node(node("b"))
        .storage("a", "local-lvm", false, 200 * GIB, a_used)
        .storage("b", "local-lvm", false, 100 * GIB, 88 * GIB)
}

/// 104 on a: 30 GiB of memory (32 configured) and 40 GiB of local disks.
fn guest_104() -> GuestSpec {
    vm(104, "a")
        .mem(30 * GIB, 32 * GIB)
        .local_disk("local-lvm", 40 * GIB)
}

/// a is full; b is the emptiest node but its local-lvm has 12 GiB free; c has room. 104 carries
/// 40 GiB of local disks, 107 none.
fn cluster() -> Cluster {
    ClusterBuilder::new()
        .node(node("a"))
        .node(node("b"))
        .node(node("c"))
        .storage("a", "local-lvm", false, 200 * GIB, 60 * GIB)
        .storage("b", "local-lvm", false, 100 * GIB, 88 * GIB)
        .storage("c", "local-lvm", false, 200 * GIB, 20 * GIB)
        .guest(guest_104())
        .guest(vm(107, "a").mem(5 * GIB, 8 * GIB))
        .guest(vm(108, "a").mem(5 * GIB, 8 * GIB))
        .guest(vm(109, "c").mem(10 * GIB, 12 * GIB))
        .build()
}

#[test]
fn no_move_lands_local_disks_on_a_storage_without_room() {
    let c = cluster();
    let r = Rules::compile(&c);
    let s = State::new(&c);
    let p = plan(&c, &r, &s, &placer(), &BalanceOptions::default()).unwrap();
    assert!(!p.migrations.is_empty(), "{}", p.summary);
    assert!(
        !p.migrations.iter().any(|m| m.vmid == 104 && m.to == "b"),
        "104's 40 GiB of local disks do not fit b's 12 GiB: {:#?}",
        p.migrations
    );
}

#[test]
fn a_moves_bytes_are_its_memory_and_its_local_disks_and_the_reason_says_so() {
    let c = cluster();
    // Evacuating a moves every guest: 104 can only go to c, and copies memory and disks.
    let e = crate::evacuate::evacuate_node(&c, "a");
    let m = e.migrations.iter().find(|m| m.vmid == 104).unwrap();
    assert_eq!(m.to, "c", "{:#?}", e.migrations);
    assert_eq!(m.bytes, 30 * GIB + 40 * GIB, "{m:#?}");
    assert!(
        m.reason
            .contains("copies its local disks (40.0 GiB on local-lvm)"),
        "{}",
        m.reason
    );
}

#[test]
fn a_guest_whose_disks_fit_nowhere_is_unplaced_with_the_storage_figures() {
    let c = a_and_b(60 * GIB).guest(guest_104()).build();
    let e = crate::evacuate::evacuate_node(&c, "a");
    assert!(e.migrations.is_empty(), "{}", e.summary);
    let u = e.unplaced.iter().find(|u| u.vmid == 104).unwrap();
    assert!(
        u.reason.contains(
            "storage local-lvm on b has 12.0 GiB free, guest 104 (qemu104) needs 40.0 GiB"
        ),
        "{}",
        u.reason
    );
}

/// When storage room is what refuses the moves that would balance, the stop
/// reason and the headline say which storage and how much, not just "no safe move".
#[test]
fn a_spread_kept_by_storage_room_names_the_storage() {
    let c = a_and_b(100 * GIB)
        .guest(
            vm(104, "a")
                .mem(20 * GIB, 20 * GIB)
                .local_disk("local-lvm", 40 * GIB),
        )
        .guest(
            vm(105, "a")
                .mem(20 * GIB, 20 * GIB)
                .local_disk("local-lvm", 60 * GIB),
        )
        .build();
    let r = Rules::compile(&c);
    let s = State::new(&c);
    let p = plan(&c, &r, &s, &placer(), &BalanceOptions::default()).unwrap();
    assert!(p.migrations.is_empty(), "{}", p.summary);
    let stop = p.stop.as_ref().map(ToString::to_string).unwrap_or_default();
    assert!(
        stop.contains(
            "storage local-lvm on b has 12.0 GiB free, guest 104 (qemu104) needs 40.0 GiB"
        ),
        "{stop}"
    );
    assert!(
        p.summary.contains("storage local-lvm on b"),
        "{}",
        p.summary
    );
}
