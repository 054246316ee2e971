//! The cluster at a glance (`flxp status`): per node load, guests and broken rules, and the spread.

use serde::Serialize;

use crate::Warning;
use crate::balance::{Metric, NodeFigures, spread};
use crate::cluster::Cluster;
use crate::constraints::{Conflict, Rules, Violation, violations};
use crate::left_running::{MaintenanceState, maintenance_state};
use crate::state::State;

/// One node's line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSummary {
    /// Node name.
    pub node: String,
    /// `online`, `offline`, `unknown`.
    pub status: String,
    /// Why it is in maintenance, empty if it is not.
    pub maintenance: Vec<String>,
    /// Its memory and CPU, percentages to one decimal.
    #[serde(flatten)]
    pub figures: NodeFigures,
    /// Running guests, those migrating here in flight included (their memory is counted here).
    pub running: u32,
    /// Of `running`, guests migrating here in flight: Proxmox still lists them on their source,
    /// so they are not among this node's `guests`.
    pub arriving: u32,
    /// All guests on the node as Proxmox lists them (stopped and templates included).
    pub guests: usize,
    /// Labels from notes.
    pub labels: Vec<String>,
    /// Taints from notes.
    pub taints: Vec<String>,
    /// Hard rules broken on this node.
    pub violations: usize,
    /// Whether it is safe to reboot, for a node in maintenance (absent for the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maintenance_state: Option<MaintenanceState>,
}

/// The whole report: `flxp status --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    /// Nodes in name order.
    pub nodes: Vec<NodeSummary>,
    /// Memory spread: max − min used memory percent over online nodes outside maintenance.
    pub memory_spread: f64,
    /// CPU spread, the same for CPU.
    pub cpu_spread: f64,
    /// Guests in the cluster (running, all).
    pub running: usize,
    /// All guests.
    pub guests: usize,
    /// Broken hard rules.
    pub violations: Vec<Violation>,
    /// Rules that cannot all hold.
    pub conflicts: Vec<Conflict>,
    /// Problems in the input.
    pub warnings: Vec<Warning>,
}

/// Builds the report for a state (the snapshot's, usually).
pub fn status(cluster: &Cluster, rules: &Rules, state: &State) -> StatusReport {
    let violations = violations(cluster, rules, state);
    let mut arriving = vec![0u32; cluster.nodes().len()];
    for g in cluster.guests().iter().filter(|g| g.running) {
        if let Some(to) = g.migrating_to() {
            arriving[to.get()] += 1;
        }
    }
    let nodes = cluster
        .node_indexes()
        .map(|i| {
            let n = cluster.node(i);
            let u = state.usage(i);
            NodeSummary {
                node: n.name.clone(),
                status: n.status_text(),
                maintenance: n
                    .maintenance
                    .iter()
                    .map(|m| m.describe().to_owned())
                    .collect(),
                figures: NodeFigures::of(n, u, 1),
                running: u.guests,
                arriving: arriving[i.get()],
                guests: cluster.guests_on(i).len(),
                labels: n.labels.iter().cloned().collect(),
                taints: n.taints.iter().cloned().collect(),
                violations: violations.iter().filter(|v| v.node == n.name).count(),
                maintenance_state: n
                    .in_maintenance_reported()
                    .then(|| maintenance_state(cluster, rules, i)),
            }
        })
        .collect();
    let mut warnings = cluster.warnings.clone();
    warnings.extend(rules.warnings.iter().cloned());
    StatusReport {
        nodes,
        memory_spread: round1(spread(cluster, state, Metric::Memory)),
        cpu_spread: round1(spread(cluster, state, Metric::Cpu)),
        running: cluster.guests().iter().filter(|g| g.running).count(),
        guests: cluster.guests().len(),
        violations,
        conflicts: rules.conflicts.clone(),
        warnings,
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn report_counts_guests_load_and_violations_per_node() {
        let c = ClusterBuilder::new()
            .node(
                node("a")
                    .memory(100 * GIB)
                    .used(50 * GIB)
                    .cpus(8.0)
                    .load(0.25),
            )
            .node(
                node("b")
                    .memory(100 * GIB)
                    .used(20 * GIB)
                    .cpus(8.0)
                    .load(0.5),
            )
            .guest(vm(101, "a").tagged("flxp.anti-affinity.x"))
            .guest(vm(102, "a").tagged("flxp.anti-affinity.x"))
            .guest(vm(103, "b").stopped())
            .build();
        let r = Rules::compile(&c);
        let s = status(&c, &r, &State::new(&c));
        assert_eq!(s.memory_spread, 30.0);
        assert_eq!(s.cpu_spread, 25.0);
        assert_eq!((s.running, s.guests), (2, 3));
        assert_eq!(s.nodes[0].figures.mem_percent, 50.0);
        assert_eq!(s.nodes[0].figures.cpu, 2.0);
        assert_eq!(s.nodes[0].violations, 1);
        assert_eq!(s.nodes[1].running, 0);
        assert_eq!(s.nodes[1].guests, 1);
    }

    #[test]
    fn a_guest_migrating_in_flight_is_shown_arriving_on_its_target() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a"))
            .guest(vm(102, "b"))
            .migrating(101, "a", "b")
            .build();
        let s = status(&c, &Rules::compile(&c), &State::new(&c));
        let counts: Vec<(u32, u32, usize)> = s
            .nodes
            .iter()
            .map(|n| (n.running, n.arriving, n.guests))
            .collect();
        assert_eq!(counts, [(1, 0, 1), (2, 1, 1)]);
    }

    #[test]
    fn a_node_reporting_more_memory_than_it_has_is_shown_full_and_warned_about() {
        let c = ClusterBuilder::new()
            .node(node("a").memory(64 * GIB).used(320 * GIB))
            .node(node("b").memory(64 * GIB).used(32 * GIB))
            .build();
        let s = status(&c, &Rules::compile(&c), &State::new(&c));
        assert_eq!(s.nodes[0].figures.mem_percent, 100.0);
        assert_eq!(s.nodes[0].figures.mem, 64 * GIB);
        assert_eq!(s.memory_spread, 50.0);
        let w: Vec<String> = s.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            w,
            [
                "node a: reports 320.0 GiB of memory used of 64.0 GiB: counted as full, no guest can \
              be placed on it"
            ]
        );
    }

    #[test]
    fn a_node_ha_is_fencing_shows_so_and_is_left_out_of_the_spread() {
        let mut c = ClusterBuilder::new()
            .node(node("a").memory(100 * GIB).used(2 * GIB))
            .node(node("b").memory(100 * GIB).used(60 * GIB))
            .node(node("c").memory(100 * GIB).used(30 * GIB))
            .build();
        c.node_mut(crate::cluster::NodeIdx(0)).ha_state = Some("fence".into());
        let s = status(&c, &Rules::compile(&c), &State::new(&c));
        assert_eq!(s.nodes[0].status, "online (HA fence)");
        assert_eq!(s.nodes[1].status, "online");
        assert_eq!(s.memory_spread, 30.0, "measured over b and c only");
    }
}
