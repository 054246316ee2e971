//! The plan as `flxp balance --json` and `flxp evacuate --json` print it (Contract 3).
//!
//! `{"imbalance_before", "imbalance_after", "metric", "migrations": [{"vmid", "type", "name",
//! "from", "to", "reason"}], "nodes_before", "nodes_after", "violations_before",
//! "violations_after", "warnings"}`, plus what the engine and people need beyond that: per
//! migration its purpose, bytes, bundle and wave; guests that could not be placed and guests that
//! stay, with why. Migrations are in the order they are to run: each was checked against the state
//! all earlier ones leave behind.

use std::fmt;

use serde::{Serialize, Serializer};

use super::measure::{LoadKind, Measure, NodeLoad};
use super::methods::MethodName;
use super::movable::StayKind;
use super::stop::PlanStop;
use crate::Warning;
use crate::cluster::GuestKind;
use crate::constraints::Violation;

/// Why a migration is in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Purpose {
    /// Fixes a broken hard rule (pin, selector, anti-affinity, split affinity group).
    Fix,
    /// Empties a node in maintenance.
    Evacuate,
    /// Frees memory on a node so that a fix can land there.
    MakeRoom,
    /// Lowers the imbalance.
    Balance,
    /// One half of a swap that lowers the imbalance when no single move can.
    Swap,
    /// Takes a guest back to the node it was evacuated from, once that node's maintenance ended.
    ReturnHome,
}

impl Purpose {
    /// The name in output, as serialised (`make-room`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fix => "fix",
            Self::Evacuate => "evacuate",
            Self::MakeRoom => "make-room",
            Self::Balance => "balance",
            Self::Swap => "swap",
            Self::ReturnHome => "return-home",
        }
    }
}

/// One migration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(
    feature = "graphql",
    derive(async_graphql::SimpleObject),
    graphql(name = "PlanMigration")
)]
pub struct Migration {
    /// Guest id.
    pub vmid: u32,
    /// `qemu` or `lxc`.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "graphql", graphql(name = "type"))]
    pub kind: GuestKind,
    /// Guest name.
    pub name: String,
    /// Source node.
    pub from: String,
    /// Target node.
    pub to: String,
    /// Why this guest, why this target, what it changes.
    pub reason: String,
    /// What it is for: `fix`, `evacuate`, `make-room`, `balance`, `swap` or `return-home`.
    pub purpose: Purpose,
    /// Live migration of a running guest; `false` is an offline migration of a stopped one.
    pub online: bool,
    /// Bytes to copy: the memory of a running guest plus its local disks.
    pub bytes: u64,
    /// All guests of the bundle this migration belongs to (vmids), empty for a single guest; the
    /// engine checks the bundle as a whole before its first member moves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bundle: Vec<u32>,
    /// The affinity group(s) of the bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The planner's decision this migration belongs to, from 0: the members of a bundle and the
    /// two halves of a swap share one; the state is only judged whole between decisions.
    pub step: u32,
    /// Wave: migrations of one wave may run in parallel within the inflow limit; waves run in order.
    pub wave: u32,
    /// The imbalance after this migration.
    pub imbalance_after: f64,
}

/// A guest that had to move but could not.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Unplaced {
    /// Guest id.
    pub vmid: u32,
    /// Guest name.
    pub name: String,
    /// Where it is.
    pub node: String,
    /// The rule that wants it elsewhere (`maintenance`, `flxp.node`, ...).
    pub rule: String,
    /// Why no node takes it: every node's failed filters, condensed.
    pub reason: String,
}

/// A guest the plan does not move although it is on a node being emptied or breaks a rule, or that
/// balancing may not touch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Skipped {
    /// Guest id.
    pub vmid: u32,
    /// Guest name.
    pub name: String,
    /// Where it is.
    pub node: String,
    /// Why it stays.
    pub reason: String,
}

/// Guests left where they are for one reason, counted: why nothing (more) moves.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct LeftInPlace {
    /// The reason's kind: `ha-auto-rebalance`, `locked`, `migrating`, ...
    pub kind: StayKind,
    /// How many guests.
    pub count: usize,
    /// The reason in words, with the count: `2 guests are locked (backup)`.
    pub reason: String,
    /// The guests (vmids), in order.
    pub vmids: Vec<u32>,
}

/// A node that still carries more memory than it has once the plan has run: it reported using
/// more than its total (counted as full), and the plan moves too little off it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Overfull {
    /// Node name.
    pub node: String,
    /// Memory it carries once the plan has run, bytes: what it reported using, less what
    /// leaves it, plus what arrives.
    pub mem: u64,
    /// Its total memory, bytes.
    pub maxmem: u64,
}

impl Overfull {
    /// The online nodes of a state that carry more memory than they have, in name order.
    pub fn of(cluster: &crate::Cluster, state: &crate::State) -> Vec<Self> {
        cluster
            .node_indexes()
            .filter(|&n| state.usage(n).mem_over > 0 && cluster.node(n).is_online())
            .map(|n| Self {
                node: cluster.node(n).name.clone(),
                mem: state.usage(n).mem_carried(),
                maxmem: cluster.node(n).maxmem,
            })
            .collect()
    }
}

impl fmt::Display for Overfull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (used, total) = crate::units::fmt_bytes_apart(self.mem, self.maxmem);
        write!(f, "{} ({used} used of {total})", self.node)
    }
}

/// What Proxmox's balancing methods took as a node's load, and why (`crs: ha=` or the option).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct UsageUsed {
    /// `static`: configured CPUs and memory of the guests; `dynamic`: measured usage.
    pub mode: UsageMode,
    /// Where the choice comes from: `crs ha=static`, `usage option`, ...
    pub from: String,
}

/// The load Proxmox's CRS balances on (`crs: ha=static|dynamic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UsageMode {
    /// Sum of configured CPUs and memory of a node's guests, against its CPUs and memory.
    Static,
    /// Measured CPU and memory.
    Dynamic,
}

impl UsageMode {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::Dynamic => "dynamic",
        }
    }
}

/// What the best possible plan could reach with the same number of migrations
/// (docs/rebalancing-reference.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Bounds {
    /// The lowest imbalance any placement could have: 0 for a perfectly even cluster, more when
    /// load that can never move already exceeds the mean (for spread; a CV's floor is given as 0).
    pub imbalance_floor: f64,
    /// Spread that no plan with this many migrations can go below: only that many nodes can shed
    /// load and that many gain it (`null` for a CV measure).
    pub spread_floor: Option<f64>,
    /// Fewest migrations any plan needs to bring the fullest node down to where this plan leaves
    /// it (`null` for a CV measure).
    pub peak_migrations: Option<usize>,
    /// Fewest migrations any plan needs to lift the emptiest node up to where this plan leaves it
    /// (`null` for a CV measure). A plan ending between this one's trough and peak needs at least
    /// the larger of the two; one reaching the same spread elsewhere may need fewer.
    pub trough_migrations: Option<usize>,
    /// Fewest migrations any plan needs to reach what this plan reaches (its imbalance, with the
    /// guests it moves off nodes in maintenance); `null` when unknown
    /// (`bounds::need_for_spread` at `Tightness::Landing`).
    pub migrations: Option<usize>,
    /// Fewest bytes any such plan copies (`null` when unknown).
    pub bytes: Option<u64>,
    /// This plan's migrations over `migrations` (1 is the fewest possible; `null` when the bound
    /// is unknown or 0).
    pub migrations_gap: Option<f64>,
    /// This plan's bytes over `bytes` (`null` when the bound is unknown or 0).
    pub bytes_gap: Option<f64>,
}

/// What made a plan, serialised as its name: the balancing method's (`flxp`, `pve-topsis`, a
/// balance plugin's), `evacuate` or `consolidate`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanSource {
    /// A balancing method of the [`Registry`](super::Registry).
    Balance(MethodName),
    /// An evacuation of nodes in maintenance.
    Evacuate,
    /// A consolidation onto fewer nodes.
    Consolidate,
    /// Guests going back to a node whose maintenance ended.
    ReturnHome,
}

impl PlanSource {
    /// The name in output: the method's, `evacuate` or `consolidate`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Balance(method) => method.as_str(),
            Self::Evacuate => "evacuate",
            Self::Consolidate => "consolidate",
            Self::ReturnHome => "return-home",
        }
    }
}

impl fmt::Display for PlanSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for PlanSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialEq<str> for PlanSource {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for PlanSource {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A plan of migrations with its before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Plan {
    /// What made the plan, by name: a registered balancing method (`flxp`, `pve-topsis`, a
    /// balance plugin), `evacuate`, `consolidate` or `return-home`.
    pub method: PlanSource,
    /// How imbalance is summed up: `spread`, `cv` or `cv-raw`.
    pub measure: Measure,
    /// What the per-node loads are of: `memory`, `memory-assigned`, `cpu`, `cpu+memory`.
    pub metric: LoadKind,
    /// Balancing starts above this.
    pub threshold: f64,
    /// Balancing stops at or below this.
    pub target: f64,
    /// Imbalance in the snapshot.
    pub imbalance_before: f64,
    /// Imbalance once every migration has run.
    pub imbalance_after: f64,
    /// Migrations in the order they are to run.
    pub migrations: Vec<Migration>,
    /// Memory copied by all migrations, bytes.
    pub bytes: u64,
    /// Nodes in the snapshot.
    pub nodes_before: Vec<NodeLoad>,
    /// Nodes once every migration has run.
    pub nodes_after: Vec<NodeLoad>,
    /// Hard rules broken in the snapshot.
    pub violations_before: Vec<Violation>,
    /// Hard rules still broken afterwards.
    pub violations_after: Vec<Violation>,
    /// Of `violations_after`, the rules that wait for a migration in flight: a guest they involve
    /// is migrating now, so no plan may move it, and the next run, once it has landed, fixes the
    /// rule. Not an unmet goal (no exit code 3); absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<WaitingRule>,
    /// Nodes that still carry more memory than they have once every migration has run: each
    /// reported using more than its total (counted as full, 100 % in `nodes_after` and the
    /// imbalance) and the plan moves too little off it. A balance that leaves one is unmet
    /// (exit code 3); absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overfull: Vec<Overfull>,
    /// Guests that had to move but fit nowhere, with every node's reason.
    pub unplaced: Vec<Unplaced>,
    /// Guests left in place that a rule or maintenance would move, or that balance may not touch.
    pub skipped: Vec<Skipped>,
    /// Guests balancing could not touch, counted by reason (every guest that did not move and has
    /// a reason to stay).
    pub left_in_place: Vec<LeftInPlace>,
    /// For the `pve-*` methods: the usage they balanced on; absent for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageUsed>,
    /// Lower bounds for the same number of migrations.
    pub bounds: Bounds,
    /// One sentence: what the plan does and why.
    pub summary: String,
    /// Why balancing stopped while the imbalance stays above the threshold (the budget, the
    /// margin, HA guests in motion, no safe move); absent when it did not stop early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<PlanStop>,
    /// Why hard rules stay broken when fixing stopped early (the migration budget ran out before
    /// a fix); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules_stop: Option<PlanStop>,
    /// Problems in the input, conflicts, limits reached.
    pub warnings: Vec<Warning>,
    /// For a balance plugin: what it answered and the verdict on each proposal; absent for the
    /// other methods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginOutcome>,
}

/// A broken hard rule that waits for a migration in flight to land before it can be fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct WaitingRule {
    /// The rule, as listed in `violations_after`.
    pub violation: Violation,
    /// Its guests migrating now, by vmid.
    pub in_flight: Vec<u32>,
}

impl fmt::Display for WaitingRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vmids: Vec<String> = self.in_flight.iter().map(u32::to_string).collect();
        write!(
            f,
            "{} waits for the migration in flight of {}",
            self.violation.rule,
            vmids.join(", ")
        )
    }
}

/// The broken rules of `violations` that involve a guest migrating now.
pub(crate) fn waiting_rules(
    cluster: &crate::Cluster,
    violations: &[Violation],
) -> Vec<WaitingRule> {
    violations
        .iter()
        .filter_map(|v| {
            let in_flight: Vec<u32> = v
                .vmids
                .iter()
                .copied()
                .filter(|&vmid| {
                    cluster
                        .guest_idx(vmid)
                        .is_some_and(|g| cluster.guest(g).migrating.is_some())
                })
                .collect();
            (!in_flight.is_empty()).then(|| WaitingRule {
                violation: v.clone(),
                in_flight,
            })
        })
        .collect()
}

/// What a balance plugin answered and what flxp made of each proposal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct PluginOutcome {
    /// The plugin's name.
    pub plugin: String,
    /// Why the call failed (with `on-failure = "ignore"`: the plan then moves nothing); `None`
    /// when it answered.
    pub error: Option<String>,
    /// Every proposal in the order given, each with exactly one verdict.
    pub proposals: Vec<ProposalVerdict>,
}

/// One proposed migration and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct ProposalVerdict {
    /// The guest to move.
    pub vmid: u32,
    /// The node proposed.
    pub target: String,
    /// The plugin's reason, if it gave one.
    pub reason: Option<String>,
    /// Whether it is planned.
    pub accepted: bool,
    /// Why not, as a kind (`None`: accepted).
    pub refused: Option<Refusal>,
    /// Why not, in words (`None`: accepted).
    pub why: Option<String>,
}

/// Why flxp refused a balance plugin's proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Refusal {
    /// No guest of that vmid in the zone.
    UnknownGuest,
    /// No node of that name in the zone.
    UnknownNode,
    /// The guest (or a member of its group) moves in this plan already.
    Duplicate,
    /// The guest is on the target already.
    AlreadyThere,
    /// The guest may not be moved by balancing (locked, HA, in flight, template, cooldown, ...).
    NotMovable,
    /// The plan's migration budget is spent.
    Budget,
    /// The target is offline or unknown.
    Unavailable,
    /// The move breaks a hard rule (affinity, node rules, taints, maintenance).
    Rule,
    /// The target has no room (memory, CPU).
    Overcommit,
    /// The guest left the target less than the return hold ago (no ping-pong).
    ReturnHold,
}

impl Refusal {
    /// The name in output, as serialised (`already-there`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownGuest => "unknown-guest",
            Self::UnknownNode => "unknown-node",
            Self::Duplicate => "duplicate",
            Self::AlreadyThere => "already-there",
            Self::NotMovable => "not-movable",
            Self::Budget => "budget",
            Self::Unavailable => "unavailable",
            Self::Rule => "rule",
            Self::Overcommit => "overcommit",
            Self::ReturnHold => "return-hold",
        }
    }

    /// The kind in words, for people.
    pub fn words(self) -> &'static str {
        match self {
            Self::UnknownGuest => "unknown guest",
            Self::UnknownNode => "unknown node",
            Self::Duplicate => "duplicate",
            Self::AlreadyThere => "already there",
            Self::NotMovable => "not movable",
            Self::Budget => "budget",
            Self::Unavailable => "node unavailable",
            Self::Rule => "rule",
            Self::Overcommit => "overcommit",
            Self::ReturnHold => "return hold",
        }
    }
}

impl Plan {
    /// The imbalance of another state of the cluster (as re-read after the plan was carried
    /// out), measured as this plan measured its own: the same measure and metric, and for the
    /// `pve-*` methods on configured sizes, the same usage. `None` when the measure is undefined.
    pub fn imbalance_on(&self, cluster: &crate::Cluster, state: &crate::State) -> Option<f64> {
        if let Some(UsageUsed {
            mode: UsageMode::Static,
            ..
        }) = &self.usage
        {
            return super::pve::usage_imbalance(cluster, state, UsageMode::Static, self.measure);
        }
        Some(match self.measure {
            Measure::Spread => {
                self.measure
                    .of_loads(&super::measure::balanced_loads(cluster, state, self.metric))
            }
            _ => self
                .measure
                .of_loads(&super::measure::pve_loads(cluster, state)),
        })
    }

    /// Whether the plan moves nothing.
    pub fn is_empty(&self) -> bool {
        self.migrations.is_empty()
    }

    /// Whether something had to move and could not (exit code 3 for evacuation).
    pub fn has_unplaced(&self) -> bool {
        !self.unplaced.is_empty()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::balance::methods::{flxp, pve_topsis};

    #[test]
    fn the_names_in_output_are_the_serialised_ones() {
        use Purpose as P;
        for p in [
            P::Fix,
            P::Evacuate,
            P::MakeRoom,
            P::Balance,
            P::Swap,
            P::ReturnHome,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str(), "{p:?}");
        }
        use Refusal as R;
        for r in [
            R::UnknownGuest,
            R::UnknownNode,
            R::Duplicate,
            R::AlreadyThere,
            R::NotMovable,
            R::Budget,
            R::Unavailable,
            R::Rule,
            R::Overcommit,
            R::ReturnHold,
        ] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str(), "{r:?}");
        }
    }

    #[test]
    fn a_plan_source_serialises_as_the_name_plans_always_had() {
        let cases = [
            (PlanSource::Balance(flxp::NAME), "flxp"),
            (PlanSource::Balance(pve_topsis::NAME), "pve-topsis"),
            (PlanSource::Evacuate, "evacuate"),
            (PlanSource::Consolidate, "consolidate"),
        ];
        for (source, name) in cases {
            assert_eq!(serde_json::to_value(&source).unwrap(), name, "{source:?}");
            assert_eq!(source.to_string(), name, "{source:?}");
            assert_eq!(source, name);
        }
    }
}
