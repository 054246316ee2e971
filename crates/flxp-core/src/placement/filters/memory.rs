//! `memory`: the subject's memory fits in the node's available memory, and (optionally) the
//! committed-memory cap holds.
//!
//! Available memory is total − used − reserve, where used is what the node reports (Proxmox's
//! `mem` = MemTotal − MemAvailable) adjusted by planned moves.

use super::judge_cap;
use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "memory";

/// Rejects nodes without room for the subject's memory.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Resource, "memory fits: total − used − reserve, and the optional commit cap", check).with_passes(passes);

/// Bytes a node can still give: total − used − reserve, never below zero; used includes the
/// guests still migrating away.
pub fn available(ctx: &Ctx, node: &NodeView) -> u64 {
    node.node
        .maxmem
        .saturating_sub(node.usage.mem_held())
        .saturating_sub(ctx.reserve(node))
}

/// `check` as a yes or no: the same comparisons, without the memory reason's figures.
fn passes(ctx: &Ctx, node: &NodeView) -> bool {
    if !node.node.is_online() {
        return true;
    }
    if ctx.subject.memory > available(ctx, node) {
        return false;
    }
    memory_commit_cap(ctx, node).is_ok()
}

/// The optional committed-memory cap.
fn memory_commit_cap(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    judge_cap(
        ctx.options.max_memory_commit,
        node.usage.committed_mem + ctx.subject.committed_mem,
        |ratio| (node.node.maxmem as f64 * ratio) as u64,
        |committed, cap| committed > cap,
        |committed, cap, ratio| Reason::MemoryCommitCap { committed, cap, ratio },
    )
}

fn check(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    // An offline node has no stats to judge: `online` alone explains it.
    if !node.node.is_online() {
        return Ok(());
    }
    let need = ctx.subject.memory;
    let available = available(ctx, node);
    if need > available {
        return Err(Reason::InsufficientMemory {
            need,
            available,
            total: node.node.maxmem,
            used: node.usage.mem_held(),
            reserve: ctx.reserve(node),
        });
    }
    memory_commit_cap(ctx, node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementOptions;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    fn cluster() -> crate::Cluster {
        ClusterBuilder::new()
            .node(node("a").memory(16 * GIB).used(10 * GIB))
            .node(node("b").memory(16 * GIB))
            .guest(vm(101, "b").mem(2 * GIB, 8 * GIB))
            .build()
    }

    #[test]
    fn fits_when_need_is_at_most_total_minus_used_minus_reserve() {
        let c = cluster();
        let o = PlacementOptions::default();
        assert_eq!(
            verdict(&FILTER, &c, &new_vm(&c, 6 * GIB, 1, &[]), &o, "a"),
            Ok(())
        );
        let err = verdict(&FILTER, &c, &new_vm(&c, 6 * GIB + 1, 1, &[]), &o, "a").unwrap_err();
        assert_eq!(
            err,
            Reason::InsufficientMemory {
                need: 6 * GIB + 1,
                available: 6 * GIB,
                total: 16 * GIB,
                used: 10 * GIB,
                reserve: 0
            }
        );
        assert_eq!(
            err.to_string(),
            "needs 6442450945 B but 6442450944 B is available (16.0 GiB total − 10.0 GiB used − 0 B reserve)"
        );
    }

    #[test]
    fn reserve_is_kept_free_per_node() {
        let c = cluster();
        let mut o = PlacementOptions {
            reserve_bytes: GIB,
            ..PlacementOptions::default()
        };
        assert!(verdict(&FILTER, &c, &new_vm(&c, 6 * GIB, 1, &[]), &o, "a").is_err());
        o.node_reserve_bytes.insert("a".into(), 0);
        assert_eq!(
            verdict(&FILTER, &c, &new_vm(&c, 6 * GIB, 1, &[]), &o, "a"),
            Ok(())
        );
    }

    #[test]
    fn commit_cap_counts_configured_memory_of_running_guests() {
        let c = cluster();
        let o = PlacementOptions {
            max_memory_commit: Some(1.0),
            ..PlacementOptions::default()
        };
        // b: 8 GiB committed + 8 GiB = 16 GiB = cap: fits; one byte more does not.
        assert_eq!(
            verdict(&FILTER, &c, &new_vm(&c, 8 * GIB, 1, &[]), &o, "b"),
            Ok(())
        );
        let err = verdict(&FILTER, &c, &new_vm(&c, 8 * GIB + 1, 1, &[]), &o, "b").unwrap_err();
        assert!(
            matches!(err, Reason::MemoryCommitCap { cap, .. } if cap == 16 * GIB),
            "{err:?}"
        );
    }
}
