//! `storage`: the target has the storages the subject's local disks are on, with room for them.
//!
//! A migration copies a guest's volumes on local storages to the same storage id on the target
//! (flxp sends no `targetstorage`), live (`with-local-disks`) or offline. Room is the storage's
//! free bytes after the moves planned before. A node whose storages the snapshot does not list
//! is not judged here (the executor's own check and Proxmox's decide).

use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "storage";

/// Rejects nodes without the storage or the room for the subject's local disks.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(
    NAME,
    FilterKind::Resource,
    "the storages of the guest's local disks exist here with room for them",
    check,
)
.applies_when(applies);

/// Only guests with local disks can be refused (a new VM has none).
fn applies(ctx: &Ctx) -> bool {
    let c = ctx.cluster;
    c.has_local_disks()
        && ctx
            .subject
            .members
            .iter()
            .any(|&m| !c.guest(m).local_disks.is_empty())
}

fn check(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    let c = ctx.cluster;
    if !c.has_local_disks() || !node.node.is_online() || c.storages_of(node.idx).is_empty() {
        return Ok(());
    }
    let mut need: Vec<(&str, u64)> = Vec::new();
    for &m in &ctx.subject.members {
        if ctx.state.location(m) == node.idx {
            continue;
        }
        for d in &c.guest(m).local_disks {
            match need.iter_mut().find(|(s, _)| *s == d.storage) {
                Some((_, b)) => *b = b.saturating_add(d.bytes),
                None => need.push((&d.storage, d.bytes)),
            }
        }
    }
    for (storage, bytes) in need {
        let Some(i) = c.storage_on(node.idx, storage) else {
            return Err(Reason::StorageMissing {
                storage: storage.to_owned(),
                subject: ctx.subject.label.clone(),
            });
        };
        let free = ctx.state.storage_free(c, i);
        if bytes > free {
            return Err(Reason::StorageFull {
                storage: storage.to_owned(),
                node: node.node.name.clone(),
                free,
                need: bytes,
                subject: ctx.subject.label.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraints::Rules;
    use crate::placement::{PlacementOptions, Subject};
    use crate::state::State;
    use crate::testutil::*;

    fn cluster() -> crate::Cluster {
        ClusterBuilder::new()
            .nodes(&["a", "b", "c", "d"])
            .storage("a", "local-lvm", false, 100 * GIB, 60 * GIB)
            .storage("b", "local-lvm", false, 100 * GIB, 88 * GIB)
            .storage("c", "local-lvm", false, 100 * GIB, 10 * GIB)
            .storage("d", "local-zfs", false, 100 * GIB, 0)
            .guest(vm(104, "a").named("db1").local_disk("local-lvm", 40 * GIB))
            .guest(vm(105, "a").local_disk("local-lvm", 20 * GIB))
            .build()
    }

    fn verdict_for(c: &crate::Cluster, state: &State, vmid: u32, node: &str) -> Result<(), Reason> {
        let rules = Rules::compile(c);
        let g = c.guest_idx(vmid).unwrap();
        let s = Subject::guest(c, &rules, g, state.location(g));
        let opts = PlacementOptions::default();
        let ctx = Ctx::new(c, &rules, state, &opts, &s);
        check(&ctx, &ctx.view(c.node_idx(node).unwrap()))
    }

    #[test]
    fn local_disks_are_read_per_storage_from_the_volumes_of_the_guests_node() {
        let c = cluster();
        let g = c.guest(c.guest_idx(104).unwrap());
        assert_eq!(g.local_disk_bytes(), 40 * GIB);
        assert_eq!(g.move_bytes(), g.mem_footprint() + 40 * GIB);
    }

    #[test]
    fn a_target_without_the_storage_or_its_room_is_refused_with_the_figures() {
        let c = cluster();
        let s = State::new(&c);
        let e = verdict_for(&c, &s, 104, "b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "storage local-lvm on b has 12.0 GiB free, guest 104 (db1) needs 40.0 GiB for its \
             local disks"
        );
        assert_eq!(verdict_for(&c, &s, 104, "c"), Ok(()));
        let e = verdict_for(&c, &s, 104, "d").unwrap_err();
        assert!(matches!(e, Reason::StorageMissing { .. }), "{e:?}");
    }

    #[test]
    fn a_copy_in_flight_takes_room_on_its_target_until_it_lands() {
        let task = crate::snapshot::Task {
            upid: Some("UPID:a:00001234:00005678:00002700:qmigrate:105:root@pam:".into()),
            node: Some("a".into()),
            kind: Some("qmigrate".into()),
            id: Some("105".into()),
            starttime: Some(9_900),
            target: Some("c".into()),
            ..crate::snapshot::Task::default()
        };
        let c = ClusterBuilder::new()
            .nodes(&["a", "c"])
            .storage("a", "local-lvm", false, 100 * GIB, 60 * GIB)
            .storage("c", "local-lvm", false, 100 * GIB, 45 * GIB)
            .guest(vm(104, "a").local_disk("local-lvm", 40 * GIB))
            .guest(vm(105, "a").local_disk("local-lvm", 20 * GIB))
            .task(task)
            .time(10_000)
            .build();
        let s = State::new(&c);
        // c has 55 GiB free, 20 of them promised to 105 in flight: 104's 40 no longer fit.
        let e = verdict_for(&c, &s, 104, "c").unwrap_err();
        assert!(e.to_string().contains("has 35.0 GiB free"), "{e}");
    }

    #[test]
    fn moves_planned_before_take_and_give_back_room() {
        let c = cluster();
        let mut s = State::new(&c);
        let (g104, g105) = (c.guest_idx(104).unwrap(), c.guest_idx(105).unwrap());
        let cn = c.node_idx("c").unwrap();
        // c has 90 GiB: 104 (40) fits, then 105 (20) still fits, then a third 40 would not.
        s.move_guest(&c, g104, cn);
        assert_eq!(verdict_for(&c, &s, 105, "c"), Ok(()));
        s.move_guest(&c, g105, cn);
        let i = c.storage_on(cn, "local-lvm").unwrap();
        assert_eq!(s.storage_free(&c, i), 30 * GIB);
        // Taking 104 back to a restores c's room exactly.
        s.move_guest(&c, g104, c.node_idx("a").unwrap());
        assert_eq!(s.storage_free(&c, i), 70 * GIB);
    }
}
