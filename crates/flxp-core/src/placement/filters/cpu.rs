//! `cpu`: the subject's vCPUs are not more than the node's CPUs, and (optionally) the vCPU
//! overcommit cap holds.

use super::judge_cap;
use crate::placement::registry::BuiltinFilter;
use crate::placement::{Ctx, FilterKind, NodeView, Reason};

/// Registered name.
pub const NAME: &str = "cpu";

/// Rejects nodes with fewer CPUs than the subject's vCPUs, or over the overcommit cap.
pub static FILTER: BuiltinFilter = BuiltinFilter::new(NAME, FilterKind::Resource, "vCPUs not above the node's CPUs, and the optional overcommit cap", check).with_passes(passes);

/// `check` without building the reason: the same comparisons (so NaN figures pass alike).
fn passes(ctx: &Ctx, node: &NodeView) -> bool {
    if !node.node.is_online() {
        return true;
    }
    let have = node.node.maxcpu;
    if ctx.subject.cores > have {
        return false;
    }
    vcpu_cap(ctx, node).is_ok()
}

/// The optional vCPU overcommit cap (a rounding slack of 1e-9).
fn vcpu_cap(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    judge_cap(
        ctx.options.max_vcpu_ratio,
        node.usage.committed_cpus + ctx.subject.committed_cpus,
        |ratio| node.node.maxcpu * ratio,
        |committed, cap| committed > cap + 1e-9,
        |committed, cap, ratio| Reason::VcpuCap { committed, cap, ratio },
    )
}

fn check(ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
    // An offline node has no stats to judge: `online` alone explains it.
    if !node.node.is_online() {
        return Ok(());
    }
    let have = node.node.maxcpu;
    if ctx.subject.cores > have {
        return Err(Reason::TooManyCores {
            need: ctx.subject.cores,
            have,
        });
    }
    vcpu_cap(ctx, node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementOptions;
    use crate::placement::filters::testing::*;
    use crate::testutil::*;

    #[test]
    fn vcpus_above_node_cpus_are_rejected() {
        let c = ClusterBuilder::new().node(node("a").cpus(4.0)).build();
        let o = PlacementOptions::default();
        assert_eq!(
            verdict(&FILTER, &c, &new_vm(&c, GIB, 4, &[]), &o, "a"),
            Ok(())
        );
        assert_eq!(
            verdict(&FILTER, &c, &new_vm(&c, GIB, 5, &[]), &o, "a"),
            Err(Reason::TooManyCores {
                need: 5.0,
                have: 4.0
            })
        );
    }

    #[test]
    fn overcommit_cap_counts_vcpus_of_running_guests() {
        let c = ClusterBuilder::new()
            .node(node("a").cpus(4.0))
            .guest(vm(101, "a").cores(4.0, 0.5))
            .guest(vm(102, "a").cores(4.0, 0.5).stopped())
            .build();
        let o = PlacementOptions {
            max_vcpu_ratio: Some(2.0),
            ..PlacementOptions::default()
        };
        assert_eq!(
            verdict(&FILTER, &c, &new_vm(&c, GIB, 4, &[]), &o, "a"),
            Ok(())
        );
        assert_eq!(
            verdict(
                &FILTER,
                &c,
                &new_vm(&c, GIB, 4, &[]),
                &PlacementOptions {
                    max_vcpu_ratio: Some(1.5),
                    ..o
                },
                "a"
            ),
            Err(Reason::VcpuCap {
                committed: 8.0,
                cap: 6.0,
                ratio: 1.5
            })
        );
    }
}
