//! `pve-static` and `pve-dynamic`: Proxmox's own start scoring (TOPSIS over average and highest CPU
//! and memory load, memory weighing most), as its CRS computes it in static and dynamic mode.
//!
//! The alternatives are all online nodes outside maintenance, as in Proxmox (its usage holds only
//! online nodes), each with the new guest added; the scores of the feasible ones are reported. The
//! node stats come from the state at hand, so planned moves and in-flight placements count. -
//! static (docs/proxmox-behaviour.md §1.3): node usage = Σ configured vCPUs and memory of running
//! guests.
//! - dynamic (§1.4): node usage = measured CPU cores and memory, plus the full configured size of
//!   guests still starting (a start task running), which measurements have not caught up with.

use crate::cluster::NodeIdx;
use crate::placement::registry::BuiltinScorer;
#[cfg(test)]
use crate::placement::Subject;
use crate::placement::{Ctx, NodeView, as_is};
use crate::pve_crs::{NodeStats, ResourceStats, score_stats_to_start};

/// Registered name of the static variant.
pub const STATIC_NAME: &str = "pve-static";
/// Registered name of the dynamic variant.
pub const DYNAMIC_NAME: &str = "pve-dynamic";

/// Node stats of every alternative node, by mode.
fn alternatives(ctx: &Ctx, dynamic: bool) -> (Vec<NodeIdx>, Vec<NodeStats>) {
    let mut idx = Vec::new();
    let mut stats = Vec::new();
    for n in ctx.cluster.node_indexes() {
        let node = ctx.cluster.node(n);
        if !node.is_schedulable() || node.maxmem == 0 || node.maxcpu <= 0.0 {
            continue;
        }
        let u = ctx.state.usage(n);
        let (cpu, mem) = if dynamic {
            (u.cpu, u.mem)
        } else {
            (u.committed_cpus, u.committed_mem)
        };
        idx.push(n);
        stats.push(NodeStats {
            cpu,
            maxcpu: node.maxcpu,
            mem,
            maxmem: node.maxmem,
        });
    }
    if dynamic {
        for g_idx in ctx.cluster.guest_indexes() {
            let g = ctx.cluster.guest(g_idx);
            // Most guests change nothing: skipped before the node lookup.
            if !(g.ha_starting || (g.running && ctx.cluster.tasks.is_starting(g.vmid))) {
                continue;
            }
            let Ok(pos) = idx.binary_search(&ctx.state.location(g_idx)) else {
                continue;
            };
            let s = &mut stats[pos];
            // Not in the measurements yet: Proxmox adds its configured size (§1.4).
            s.cpu += g.static_cpus(s.maxcpu);
            s.mem = s.mem.saturating_add(g.maxmem);
        }
    } else {
        // The committed sums are right for every other guest: only these few are visited (this
        // runs once per placement, and a cluster may hold many thousand guests).
        for &g_idx in ctx.cluster.static_usage_differs() {
            let g = ctx.cluster.guest(g_idx);
            let Ok(pos) = idx.binary_search(&ctx.state.location(g_idx)) else {
                continue;
            };
            let s = &mut stats[pos];
            if g.running {
                // The committed sum holds its `maxcpu`, 0 for a container without a CPU limit,
                // which Proxmox counts as the whole node (§1.3).
                s.cpu += g.static_cpus(s.maxcpu) - g.maxcpu;
            } else {
                // HA starts it: Proxmox counts every HA resource that holds a node, running or
                // not (§1.3).
                s.cpu += g.static_cpus(s.maxcpu);
                s.mem = s.mem.saturating_add(g.maxmem);
            }
        }
    }
    (idx, stats)
}

fn topsis_scores(ctx: &Ctx, nodes: &[NodeView], dynamic: bool) -> Vec<f64> {
    let (idx, stats) = alternatives(ctx, dynamic);
    let resource = if ctx.subject.members.is_empty() {
        ResourceStats::from_static(ctx.subject.cores, ctx.subject.memory)
    } else {
        // Proxmox adds a guest it starts or moves at its configured size in both modes (§1.3-1.4),
        // not at what it uses now; `maxcpu` 0 (a container without a limit) stays "whole node".
        let (cpus, mem) = ctx.subject.members.iter().fold((0.0, 0u64), |(c, m), &g| {
            let g = ctx.cluster.guest(g);
            (c + g.maxcpu, m.saturating_add(g.maxmem))
        });
        ResourceStats::from_static(cpus, mem)
    };
    // Errors need bad capacities, which `alternatives` leaves out; NaN makes the pipeline name
    // this scorer if it happens anyway.
    let name = |i: usize| ctx.cluster.node(idx[i]).name.as_str();
    let scored = score_stats_to_start(&stats, name, &resource).unwrap_or_default();
    let mut position = vec![usize::MAX; ctx.cluster.nodes().len()];
    for (p, n) in idx.iter().enumerate() {
        position[n.get()] = p;
    }
    nodes
        .iter()
        .map(|v| {
            scored
                .get(position[v.idx.get()])
                .map_or(f64::NAN, |s| 100.0 * s)
        })
        .collect()
}

/// Proxmox's TOPSIS over configured sizes.
pub static STATIC: BuiltinScorer = BuiltinScorer::all(
    STATIC_NAME,
    "Proxmox's TOPSIS start scoring over configured guest sizes (CRS static)",
    |ctx, nodes| topsis_scores(ctx, nodes, false),
)
.normalized(as_is);

/// Proxmox's TOPSIS over measured usage plus starting guests.
pub static DYNAMIC: BuiltinScorer = BuiltinScorer::all(
    DYNAMIC_NAME,
    "Proxmox's TOPSIS start scoring over measured usage plus starting guests (CRS dynamic)",
    |ctx, nodes| topsis_scores(ctx, nodes, true),
)
.normalized(as_is);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Scorer;
    use crate::placement::filters::testing::new_vm;
    use crate::placement::scorers::testing::scores;
    use crate::testutil::*;

    use crate::units::MIB;

    /// docs/proxmox-behaviour.md §4 homogeneous fixture as a cluster: usage (cores, MiB) on 16 CPUs
    /// / 64 GiB.
    fn homogeneous(dynamic: bool) -> crate::Cluster {
        let usage = [
            ("node1", 1.7, 12334),
            ("node2", 15.184, 529),
            ("node3", 5.2, 9381),
        ];
        let mut b = ClusterBuilder::new();
        for (name, cpu, mem_mib) in usage {
            let n = node(name).cpus(16.0).memory(64 * GIB);
            b = b.node(if dynamic {
                n.load(cpu / 16.0).used(mem_mib * MIB)
            } else {
                n
            });
        }
        b.build()
    }

    fn ranking(sc: &dyn Scorer, c: &crate::Cluster, mem: u64, cores: impl Into<f64>) -> Vec<String> {
        let mut s = scores(sc, c, &new_vm(c, mem, cores, &[])).unwrap();
        s.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        s.into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn dynamic_mode_reproduces_proxmox_start_rankings_on_measured_usage() {
        // docs/proxmox-behaviour.md §4 test_score_homogeneous_nodes_to_start_resource: heavy-mem (1
        // core, 12 GiB) → node2, node3, node1; combined (12 cores, 12 GiB) → node2, node3, node1.
        let c = homogeneous(true);
        assert_eq!(
            ranking(&DYNAMIC, &c, 12 * GIB, 1),
            ["node2", "node3", "node1"]
        );
        assert_eq!(
            ranking(&DYNAMIC, &c, 12 * GIB, 12),
            ["node2", "node3", "node1"]
        );
    }

    #[test]
    fn static_mode_counts_configured_sizes_and_spreads_over_empty_nodes() {
        // An empty cluster: all alternatives equal, TOPSIS gives 0 and the first node wins.
        let c = homogeneous(false);
        let s = scores(&STATIC, &c, &new_vm(&c, 4 * GIB, 2, &[])).unwrap();
        assert!(s.iter().all(|(_, v)| *v == 0.0), "{s:?}");
        // A node with configured guests is avoided.
        let c = ClusterBuilder::new()
            .nodes(&["node1", "node2", "node3"])
            .guest(vm(101, "node1").mem(GIB, 16 * GIB).cores(4.0, 0.0))
            .guest(vm(102, "node2").mem(GIB, 8 * GIB).cores(4.0, 0.0))
            .build();
        assert_eq!(
            ranking(&STATIC, &c, 4 * GIB, 2),
            ["node3", "node2", "node1"]
        );
    }

    #[test]
    fn dynamic_mode_counts_guests_still_starting_at_full_size() {
        let c = ClusterBuilder::new()
            .node(node("a").used(10 * GIB))
            .node(node("b").used(11 * GIB))
            .guest(vm(101, "a").mem(0, 32 * GIB))
            .task(crate::snapshot::Task {
                kind: Some("qmstart".into()),
                id: Some("101".into()),
                starttime: Some(1),
                ..Default::default()
            })
            .build();
        assert_eq!(ranking(&DYNAMIC, &c, 4 * GIB, 2), ["b", "a"]);
    }

    #[test]
    fn static_mode_counts_a_container_without_cpu_limit_as_the_whole_node() {
        // Proxmox's static usage counts a CT at `cpulimit || cores || 0`, and 0 at the node's
        // full CPU count: the CT on node1 loads it like 16 cores, more than the 8-core VM on
        // node2, so node2 wins (were it counted as 0 cores, node1 would).
        let c = ClusterBuilder::new()
            .nodes(&["node1", "node2"])
            .guest(ct(101, "node1").mem(GIB, 4 * GIB).cores(0.0, 0.0))
            .guest(vm(102, "node2").mem(GIB, 4 * GIB).cores(8.0, 0.0))
            .build();
        assert_eq!(ranking(&STATIC, &c, GIB, 1), ["node2", "node1"]);
        // A CT with a limit counts at its limit, fractions included.
        let c = ClusterBuilder::new()
            .nodes(&["node1", "node2"])
            .guest(ct(101, "node1").mem(GIB, 4 * GIB).cores(0.5, 0.0))
            .guest(vm(102, "node2").mem(GIB, 4 * GIB).cores(1.0, 0.0))
            .build();
        assert_eq!(ranking(&STATIC, &c, GIB, 0.5), ["node1", "node2"]);
    }

    /// Three equal nodes with equal measured load.
    fn three_measured() -> ClusterBuilder {
        let mut b = ClusterBuilder::new();
        for name in ["node1", "node2", "node3"] {
            b = b.node(node(name).load(0.1).used(8 * GIB));
        }
        b
    }

    #[test]
    fn dynamic_mode_counts_guests_ha_reports_starting_at_their_configured_size() {
        // Proxmox's dynamic start scoring adds every HA resource that is started but not yet
        // running at its configured CPUs and memory, so that a burst of starts spreads out: two
        // starting on node1 and one on node2 send the next start to node3, then node2.
        let c = three_measured()
            .guest(vm(101, "node1").mem(0, 8 * GIB).cores(4.0, 0.0).stopped())
            .guest(vm(102, "node1").mem(0, 8 * GIB).cores(4.0, 0.0).stopped())
            .guest(ct(103, "node2").mem(0, 8 * GIB).cores(0.0, 0.0).stopped())
            .ha_service("vm:101", "node1", "starting", "started")
            .ha_service("vm:102", "node1", "starting", "started")
            .ha_service("ct:103", "node2", "starting", "started")
            .build();
        assert_eq!(
            ranking(&DYNAMIC, &c, 4 * GIB, 2),
            ["node3", "node2", "node1"]
        );
        // Without the starting guests all nodes tie and the first wins, as in Proxmox.
        let c = three_measured()
            .guest(vm(101, "node1").mem(0, 8 * GIB).cores(4.0, 0.0).stopped())
            .ha_service("vm:101", "node1", "started", "started")
            .build();
        assert_eq!(
            ranking(&DYNAMIC, &c, 4 * GIB, 2),
            ["node1", "node2", "node3"]
        );
    }

    #[test]
    fn a_resource_not_yet_asked_to_start_holds_no_node() {
        // HA shows `starting` for a stopped resource whose requested state is started too, but
        // its manager state is still `stopped`, which holds no node in Proxmox's usage.
        let c = three_measured()
            .guest(vm(101, "node1").mem(0, 8 * GIB).cores(4.0, 0.0).stopped())
            .ha_service("vm:101", "node1", "starting", "stopped")
            .build();
        assert!(!c.guest(c.guest_idx(101).unwrap()).ha_starting);
        assert_eq!(
            ranking(&DYNAMIC, &c, 4 * GIB, 2),
            ["node1", "node2", "node3"]
        );
    }

    #[test]
    fn static_mode_counts_a_guest_ha_is_starting_before_it_runs() {
        // Proxmox's static usage counts every HA resource that holds a node, running or not.
        let c = ClusterBuilder::new()
            .nodes(&["node1", "node2"])
            .guest(vm(101, "node1").mem(0, 8 * GIB).cores(4.0, 0.0).stopped())
            .ha_service("vm:101", "node1", "starting", "started")
            .build();
        assert_eq!(ranking(&STATIC, &c, GIB, 1), ["node2", "node1"]);
    }

    #[test]
    fn dynamic_mode_counts_new_guests_placed_earlier_in_the_same_batch() {
        // Proxmox re-adds a resource's usage after each decision of a round; flxp's creations
        // in flight are added to the state at full size, which the next decision sees.
        let c = three_measured().build();
        let rules = crate::Rules::compile(&c);
        let mut state = crate::State::new(&c);
        let placer = crate::placement::Placer::new(
            crate::placement::PlacementOptions::default(),
            Vec::new(),
        )
        .unwrap();
        let request = crate::placement::PlacementRequest {
            memory: 8 * GIB,
            cores: 4.0,
            policy: Some(DYNAMIC_NAME.into()),
            ..Default::default()
        };
        let mut chosen = Vec::new();
        for _ in 0..3 {
            let p = placer.place(&c, &rules, &state, &request).unwrap();
            let name = p.node.clone().unwrap();
            state.add_guest(c.node_idx(&name).unwrap(), request.memory, request.cores);
            chosen.push(name);
        }
        assert_eq!(chosen, ["node1", "node2", "node3"]);
    }

    #[test]
    fn an_existing_guest_counts_at_its_configured_size_not_its_use() {
        // Proxmox scores moving or recovering a guest with its configured CPUs and memory. The
        // guest configured with 24 GiB uses 1 GiB: at 24 GiB the small node2 (32 GiB) would end
        // 75% full, so node1 wins; at the 1 GiB it uses, node2 would win on CPU.
        let c = ClusterBuilder::new()
            .node(node("node1").memory(64 * GIB).cpus(16.0))
            .node(node("node2").memory(32 * GIB).cpus(64.0))
            .node(node("node3").memory(64 * GIB).cpus(16.0))
            .guest(vm(101, "node3").mem(GIB, 24 * GIB).cores(2.0, 0.0))
            .guest(vm(102, "node1").mem(GIB, 8 * GIB).cores(8.0, 0.0))
            .build();
        let rules = crate::Rules::compile(&c);
        let state = crate::State::new(&c);
        let g = c.guest_idx(101).unwrap();
        let subject = Subject::guest(&c, &rules, g, c.node_idx("node3").unwrap());
        let opts = crate::placement::PlacementOptions::default();
        let ctx = Ctx::new(&c, &rules, &state, &opts, &subject);
        let views: Vec<_> = c.node_indexes().map(|n| ctx.view(n)).collect();
        let s = STATIC.score_all(&ctx, &views);
        assert!(s[0] > s[1], "{s:?}");
    }
}
