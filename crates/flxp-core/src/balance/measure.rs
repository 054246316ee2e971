//! Measuring balance: per-node load of one resource, the spread between the most and least loaded
//! nodes (ProxLB's "balanciness", in percentage points), and Proxmox's coefficient of variation.
//!
//! Offline nodes and nodes in maintenance are left out: they are not part of the balance, and a
//! near-empty maintenance node would otherwise keep the spread high forever.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, Node, NodeIdx};
use crate::pve_crs::Imbalance;
use crate::state::{State, Usage};

/// What a node's load is measured in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Metric {
    /// Used memory (node `mem`, guests' `mem`) as a share of node memory.
    #[default]
    Memory,
    /// Configured memory of running guests (`maxmem`) as a share of node memory.
    MemoryAssigned,
    /// CPU cores in use as a share of node CPUs.
    Cpu,
    /// The larger of the two shares above, CPU and used memory: the resource a node runs out of
    /// first, so a node short of CPU counts as loaded even while its memory is balanced.
    Dominant,
}

impl Metric {
    /// The name used in options and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::MemoryAssigned => "memory-assigned",
            Self::Cpu => "cpu",
            Self::Dominant => "dominant",
        }
    }

    /// The metric a plan on this cluster weighs: itself, except that `dominant` is plain used
    /// memory unless some balanced node is busy on CPU (its CPU share above its memory share
    /// and above [`CPU_BUSY_PCT`]). Below that the two rank nodes alike where it matters, and
    /// memory is additive: the exact step and the lower bounds work on it, which they cannot on
    /// a maximum of two resources.
    pub fn effective(self, cluster: &Cluster, state: &State) -> Self {
        if self != Self::Dominant {
            return self;
        }
        let busy = balanced_nodes(cluster).any(|n| {
            let (node, usage) = (cluster.node(n), state.usage(n));
            let cpu = LoadKind::Cpu.load(node, usage);
            cpu >= CPU_BUSY_PCT && cpu > LoadKind::Memory.load(node, usage)
        });
        if busy { Self::Dominant } else { Self::Memory }
    }

    /// Parses the name used in options.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "memory" | "memory-used" => Some(Self::Memory),
            "memory-assigned" => Some(Self::MemoryAssigned),
            "cpu" => Some(Self::Cpu),
            "dominant" => Some(Self::Dominant),
            _ => None,
        }
    }
}

/// A node's CPU share (percent) from which the `dominant` metric weighs CPU when it exceeds the
/// node's memory share ([`Measure::kind_for`]).
pub const CPU_BUSY_PCT: f64 = 50.0;

/// How the imbalance of a cluster is summed up in one number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Measure {
    /// Most minus least loaded node of one [`Metric`], in percentage points (ProxLB's
    /// "balanciness", flex.plane's default).
    #[default]
    Spread,
    /// Proxmox's imbalance: the coefficient of variation of the nodes' mean of CPU and memory load,
    /// divided by √(n−1) so that it lies in 0..=1 (proxmox-resource-scheduling ≥ 2.1).
    Cv,
    /// The same coefficient of variation without the √(n−1) (ha-manager 5.2.0 logs, thresholds).
    CvRaw,
}

impl Measure {
    /// The name used in options and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spread => "spread",
            Self::Cv => "cv",
            Self::CvRaw => "cv-raw",
        }
    }

    /// Parses the name used in options.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "spread" => Some(Self::Spread),
            "cv" => Some(Self::Cv),
            "cv-raw" => Some(Self::CvRaw),
            _ => None,
        }
    }

    /// The trigger threshold used when none is configured: 10 pp of spread (ProxLB, flex.plane),
    /// 0.3 of CV (Proxmox's `ha-auto-rebalance-threshold`: 30 % normalised, 0.3 raw in 5.2.0).
    pub fn default_threshold(self) -> f64 {
        match self {
            Self::Spread => 10.0,
            Self::Cv | Self::CvRaw => 0.3,
        }
    }

    /// The resource the per-node loads are taken of: the metric for spread, CPU and memory
    /// weighed equally for the CVs.
    pub fn load_kind(self, metric: Metric) -> LoadKind {
        match self {
            Self::Spread => match metric {
                Metric::Memory => LoadKind::Memory,
                Metric::MemoryAssigned => LoadKind::MemoryAssigned,
                Metric::Cpu => LoadKind::Cpu,
                Metric::Dominant => LoadKind::Dominant,
            },
            Self::Cv | Self::CvRaw => LoadKind::CpuMemory,
        }
    }

    /// The resource a plan on this cluster weighs: [`Self::load_kind`] of
    /// [`Metric::effective`].
    pub fn kind_for(self, metric: Metric, cluster: &Cluster, state: &State) -> LoadKind {
        self.load_kind(metric.effective(cluster, state))
    }

    /// The imbalance of a list of per-node loads (percent) under this measure.
    pub fn of_loads(self, loads: &[f64]) -> f64 {
        match self {
            Self::Spread => spread_of(loads),
            Self::Cv => cv(loads).normalized,
            Self::CvRaw => cv(loads).raw,
        }
    }

    /// Unit of the value, for messages (`pp` for spread, nothing for a CV).
    pub fn unit(self) -> &'static str {
        match self {
            Self::Spread => " pp",
            Self::Cv | Self::CvRaw => "",
        }
    }

    /// A value rendered for messages: one decimal for spread, three for a CV.
    pub fn fmt(self, value: f64) -> String {
        match self {
            Self::Spread => format!("{} pp", crate::units::one_decimal(value)),
            Self::Cv | Self::CvRaw => format!("{value:.3}"),
        }
    }
}

/// The per-node quantity a measure looks at, in percent of the node's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum LoadKind {
    /// Used memory.
    Memory,
    /// Configured memory of running guests.
    MemoryAssigned,
    /// CPU cores in use.
    Cpu,
    /// Mean of CPU and memory load (Proxmox's per-node load, docs/proxmox-behaviour.md §2.3).
    #[serde(rename = "cpu+memory")]
    CpuMemory,
    /// The larger of CPU and used memory.
    Dominant,
}

impl fmt::Display for LoadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for LoadKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl LoadKind {
    /// The name used in output (`memory`, `cpu+memory`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::MemoryAssigned => "memory-assigned",
            Self::Cpu => "cpu",
            Self::CpuMemory => "cpu+memory",
            Self::Dominant => "dominant",
        }
    }

    /// The metric whose loads these are (`None` for the CVs' mean of CPU and memory).
    pub fn metric(self) -> Option<Metric> {
        match self {
            Self::Memory => Some(Metric::Memory),
            Self::MemoryAssigned => Some(Metric::MemoryAssigned),
            Self::Cpu => Some(Metric::Cpu),
            Self::Dominant => Some(Metric::Dominant),
            Self::CpuMemory => None,
        }
    }

    /// A node's load in percent given what it carries (0 for a resource the node lacks).
    pub fn load(self, node: &Node, usage: &Usage) -> f64 {
        let pct = |used: f64, total: f64| {
            if total > 0.0 {
                100.0 * used / total
            } else {
                0.0
            }
        };
        let mem = || pct(usage.mem as f64, node.maxmem as f64);
        // CPU use is a sum of floats: rounded to a billionth of a percent, the same guests
        // listed in another order give the same load, and so the same plan.
        let cpu = || (pct(usage.cpu, node.maxcpu) * 1e9).round() / 1e9;
        match self {
            Self::Memory => mem(),
            Self::MemoryAssigned => pct(usage.committed_mem as f64, node.maxmem as f64),
            Self::Cpu => cpu(),
            Self::CpuMemory => (cpu() + mem()) / 2.0,
            Self::Dominant => cpu().max(mem()),
        }
    }
}

/// Nodes that take part in the balance: online, not in maintenance, and reporting their memory
/// (an online node without `maxmem` takes no guest and has no load to compare: counted at 0 %,
/// it would widen the spread that no migration could narrow).
pub fn balanced_nodes(cluster: &Cluster) -> impl Iterator<Item = NodeIdx> + '_ {
    cluster
        .node_indexes()
        .filter(|&n| is_balanced(cluster.node(n)))
}

/// Whether a node takes part in the balance ([`balanced_nodes`]).
fn is_balanced(node: &Node) -> bool {
    node.is_schedulable() && node.maxmem > 0
}

/// A node's load in percent of its capacity (0 for a node without capacity).
pub fn node_load(cluster: &Cluster, state: &State, metric: Metric, node: NodeIdx) -> f64 {
    Measure::Spread
        .load_kind(metric)
        .load(cluster.node(node), state.usage(node))
}

/// Gap in percentage points between the most and least loaded balanced node; 0 with fewer than two.
pub fn spread(cluster: &Cluster, state: &State, metric: Metric) -> f64 {
    let loads: Vec<f64> = balanced_nodes(cluster)
        .map(|n| node_load(cluster, state, metric, n))
        .collect();
    spread_of(&loads)
}

/// The loads (percent) of the balanced nodes, in node order.
pub fn balanced_loads(cluster: &Cluster, state: &State, kind: LoadKind) -> Vec<f64> {
    balanced_nodes(cluster)
        .map(|n| kind.load(cluster.node(n), state.usage(n)))
        .collect()
}

/// The imbalance of a state under a measure (the metric matters only for spread). CVs are taken
/// of Proxmox's fractional loads, so they match its figures to the last bit.
pub fn imbalance(cluster: &Cluster, state: &State, measure: Measure, metric: Metric) -> f64 {
    imbalance_in(
        cluster,
        state,
        measure,
        measure.kind_for(metric, cluster, state),
    )
}

/// The imbalance of a state in one load kind as it is, without [`Metric::effective`]'s choice:
/// what a plan that weighed `kind` reports before and after, so both ends are in the same unit.
pub fn imbalance_in(cluster: &Cluster, state: &State, measure: Measure, kind: LoadKind) -> f64 {
    match measure {
        Measure::Spread => measure.of_loads(&balanced_loads(cluster, state, kind)),
        Measure::Cv | Measure::CvRaw => measure.of_loads(&pve_loads(cluster, state)),
    }
}

/// Most minus least of a list of loads; 0 with fewer than two.
pub fn spread_of(loads: &[f64]) -> f64 {
    if loads.len() < 2 {
        return 0.0;
    }
    let hi = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = loads.iter().copied().fold(f64::INFINITY, f64::min);
    hi - lo
}

/// Proxmox's coefficient of variation of a list of loads (any unit), raw and normalised by √(n−1);
/// 0 with fewer than two nodes or no load at all (docs/proxmox-behaviour.md §2.3, computed by
/// [`crate::pve_crs`]).
pub fn cv(loads: &[f64]) -> Imbalance {
    // Loads here are shares of non-negative usage over positive capacity, so always finite and
    // ≥ 0; the error case cannot arise from a state, and reading it as balanced is the safe side.
    Imbalance::of_loads(loads).unwrap_or(Imbalance {
        normalized: 0.0,
        raw: 0.0,
    })
}

/// Proxmox's per-node loads, `(cpu/maxcpu + mem/maxmem) / 2` as fractions, of the balanced nodes:
/// the exact figures its CV is taken of (a node lacking a capacity counts 0 for it).
pub fn pve_loads(cluster: &Cluster, state: &State) -> Vec<f64> {
    balanced_nodes(cluster)
        .map(|i| {
            let (n, u) = (cluster.node(i), state.usage(i));
            let share = |used: f64, total: f64| if total > 0.0 { used / total } else { 0.0 };
            (share(u.cpu, n.maxcpu) + share(u.mem as f64, n.maxmem as f64)) / 2.0
        })
        .collect()
}

/// One node's figures before or after a plan (`nodes_before` / `nodes_after` of Contract 3).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct NodeLoad {
    /// Node name.
    pub node: String,
    /// `online`, `offline`, `unknown`.
    pub status: String,
    /// Whether it is in maintenance.
    pub maintenance: bool,
    /// Whether it counts in the imbalance (online, not in maintenance).
    pub balanced: bool,
    /// The load the measure looks at, percent.
    pub load: f64,
    /// Its memory and CPU.
    #[serde(flatten)]
    #[cfg_attr(feature = "graphql", graphql(flatten))]
    pub figures: NodeFigures,
    /// Running guests.
    pub guests: u32,
}

/// A node's memory and CPU in a state: what `status` and a plan's node lines both show.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct NodeFigures {
    /// Used memory, bytes.
    pub mem: u64,
    /// Total memory, bytes.
    pub maxmem: u64,
    /// Used memory, percent.
    pub mem_percent: f64,
    /// CPU cores in use.
    pub cpu: f64,
    /// CPUs.
    pub maxcpu: f64,
    /// CPU in use, percent.
    pub cpu_percent: f64,
    /// Configured memory of running guests, bytes.
    pub committed_mem: u64,
}

impl NodeFigures {
    /// The figures of `node` carrying `usage`, percentages rounded to `decimals`.
    pub fn of(node: &Node, usage: &Usage, decimals: i32) -> Self {
        NodeFigures {
            mem: usage.mem,
            maxmem: node.maxmem,
            mem_percent: round(LoadKind::Memory.load(node, usage), decimals),
            cpu: round(usage.cpu, 2),
            maxcpu: node.maxcpu,
            cpu_percent: round(LoadKind::Cpu.load(node, usage), decimals),
            committed_mem: usage.committed_mem,
        }
    }
}

/// Every node's figures in a state, in name order.
pub fn node_loads(cluster: &Cluster, state: &State, kind: LoadKind) -> Vec<NodeLoad> {
    cluster
        .node_indexes()
        .map(|i| {
            let n = cluster.node(i);
            let u = state.usage(i);
            NodeLoad {
                node: n.name.clone(),
                status: n.status_text(),
                maintenance: n.in_maintenance(),
                balanced: is_balanced(n),
                load: round(kind.load(n, u), 2),
                figures: NodeFigures::of(n, u, 2),
                guests: u.guests,
            }
        })
        .collect()
}

/// Rounds to a number of decimals, for output that people read.
pub(crate) fn round(x: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (x * f).round() / f
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    #[test]
    fn load_kinds_are_written_as_their_names() {
        for k in [
            LoadKind::Memory,
            LoadKind::MemoryAssigned,
            LoadKind::Cpu,
            LoadKind::CpuMemory,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert_eq!(LoadKind::CpuMemory.to_string(), "cpu+memory");
    }

    #[test]
    fn spread_is_max_minus_min_over_online_nodes_outside_maintenance() {
        let c = ClusterBuilder::new()
            .node(
                node("a")
                    .memory(100 * GIB)
                    .used(80 * GIB)
                    .cpus(10.0)
                    .load(0.5),
            )
            .node(
                node("b")
                    .memory(100 * GIB)
                    .used(20 * GIB)
                    .cpus(10.0)
                    .load(0.1),
            )
            .node(
                node("c")
                    .memory(100 * GIB)
                    .used(0)
                    .notes("flxp.maintenance"),
            )
            .node(node("d").offline())
            .guest(vm(101, "a").mem(8 * GIB, 16 * GIB))
            .build();
        let s = State::new(&c);
        assert_eq!(spread(&c, &s, Metric::Memory), 60.0);
        assert_eq!(spread(&c, &s, Metric::MemoryAssigned), 16.0);
        assert!((spread(&c, &s, Metric::Cpu) - 40.0).abs() < 1e-9);
        assert_eq!(imbalance(&c, &s, Measure::Spread, Metric::Memory), 60.0);
    }

    /// The fixtures of `proxmox-resource-scheduling`'s `tests/scheduler.rs`
    /// (docs/proxmox-behaviour.md §4): node stats (cpu cores, maxcpu, mem MiB, maxmem GiB), exact
    /// imbalance values.
    fn pve_fixture(caps: [(f64, u64); 3]) -> Vec<f64> {
        let usage = [(1.7, 12334u64), (15.184, 529), (5.2, 9381)];
        usage
            .iter()
            .zip(caps)
            .map(|(&(cpu, mem_mib), (maxcpu, maxmem_gib))| {
                (cpu / maxcpu + (mem_mib * MIB) as f64 / (maxmem_gib * GIB) as f64) / 2.0
            })
            .collect()
    }

    #[test]
    fn cv_reproduces_proxmox_imbalance_of_the_homogeneous_fixture() {
        let c = cv(&pve_fixture([(16.0, 64), (16.0, 64), (16.0, 64)]));
        assert_eq!(c.normalized, 0.3460548572604576);
        assert_eq!(c.raw, 0.4893954724628247);
    }

    #[test]
    fn cv_reproduces_proxmox_imbalance_of_the_heterogeneous_fixture() {
        let c = cv(&pve_fixture([(16.0, 128), (32.0, 96), (24.0, 64)]));
        assert_eq!(c.normalized, 0.23352917788066363);
        assert_eq!(c.raw, 0.33026013056867354);
    }

    #[test]
    fn cv_is_zero_for_empty_single_or_balanced_clusters_and_one_for_all_on_one_node() {
        assert_eq!(cv(&[]).raw, 0.0);
        assert_eq!(cv(&[0.5]).raw, 0.0);
        assert_eq!(cv(&[0.25, 0.25, 0.25]).raw, 0.0);
        assert_eq!(cv(&[0.0, 0.0]).raw, 0.0);
        let one = cv(&[0.9, 0.0, 0.0]);
        assert!((one.raw - 2f64.sqrt()).abs() < 1e-12, "{one:?}");
        assert!((one.normalized - 1.0).abs() < 1e-12, "{one:?}");
    }

    #[test]
    fn cv_of_a_cluster_uses_cpu_and_memory_equally() {
        let c = ClusterBuilder::new()
            .node(
                node("a")
                    .memory(100 * GIB)
                    .used(50 * GIB)
                    .cpus(10.0)
                    .load(0.1),
            )
            .node(
                node("b")
                    .memory(100 * GIB)
                    .used(10 * GIB)
                    .cpus(10.0)
                    .load(0.5),
            )
            .build();
        let s = State::new(&c);
        // Both nodes at (50 + 10) / 2 = 30 %: perfectly balanced although each resource is not.
        assert_eq!(imbalance(&c, &s, Measure::Cv, Metric::Memory), 0.0);
        assert_eq!(imbalance(&c, &s, Measure::Spread, Metric::Memory), 40.0);
    }

    #[test]
    fn dominant_weighs_cpu_only_once_a_node_is_busy_on_it() {
        let cluster = |cpu_a: f64| {
            ClusterBuilder::new()
                .node(
                    node("a")
                        .memory(100 * GIB)
                        .used(40 * GIB)
                        .cpus(10.0)
                        .load(cpu_a),
                )
                .node(
                    node("b")
                        .memory(100 * GIB)
                        .used(30 * GIB)
                        .cpus(10.0)
                        .load(0.1),
                )
                .build()
        };
        // a at 45 % CPU, above its memory but not busy: the plan weighs memory alone.
        let quiet = cluster(0.45);
        let s = State::new(&quiet);
        assert_eq!(Metric::Dominant.effective(&quiet, &s), Metric::Memory);
        assert_eq!(
            imbalance(&quiet, &s, Measure::Spread, Metric::Dominant),
            10.0
        );
        // a at 80 % CPU: the larger share counts, 80 against b's 30 % of memory.
        let busy = cluster(0.8);
        let s = State::new(&busy);
        assert_eq!(Metric::Dominant.effective(&busy, &s), Metric::Dominant);
        assert!((imbalance(&busy, &s, Measure::Spread, Metric::Dominant) - 50.0).abs() < 1e-9);
        assert_eq!(Metric::from_name("dominant"), Some(Metric::Dominant));
        assert_eq!(Metric::default(), Metric::Memory);
    }

    /// An online node reporting no memory takes no guest: at 0 % it would be the spread's
    /// floor, and a rebalance would chase a gap no migration can close.
    #[test]
    fn a_node_without_maxmem_is_left_out_of_the_balance() {
        let c = ClusterBuilder::new()
            .node(node("a").memory(100 * GIB).used(50 * GIB))
            .node(node("b").memory(100 * GIB).used(50 * GIB))
            .node(node("c").memory(0))
            .build();
        let s = State::new(&c);
        assert_eq!(balanced_nodes(&c).count(), 2);
        assert_eq!(imbalance(&c, &s, Measure::Spread, Metric::Memory), 0.0);
        let rows = node_loads(&c, &s, LoadKind::Memory);
        assert_eq!(
            rows.iter().map(|r| r.balanced).collect::<Vec<_>>(),
            vec![true, true, false]
        );
    }

    #[test]
    fn node_rows_show_every_node_with_its_measured_load() {
        let c = ClusterBuilder::new()
            .node(node("a").memory(100 * GIB).used(25 * GIB))
            .node(node("b").offline())
            .build();
        let rows = node_loads(&c, &State::new(&c), LoadKind::Memory);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].load, rows[0].balanced), (25.0, true));
        assert_eq!(
            (rows[1].status.as_str(), rows[1].balanced),
            ("offline", false)
        );
    }

    #[test]
    fn names_round_trip() {
        for m in [Measure::Spread, Measure::Cv, Measure::CvRaw] {
            assert_eq!(Measure::from_name(m.as_str()), Some(m));
        }
        for m in [Metric::Memory, Metric::MemoryAssigned, Metric::Cpu] {
            assert_eq!(Metric::from_name(m.as_str()), Some(m));
        }
        assert_eq!(Measure::from_name("variance"), None);
    }
}
