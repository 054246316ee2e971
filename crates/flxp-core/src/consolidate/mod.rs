//! Consolidation (power saving): pack guests onto as few nodes as the limits allow, so that the
//! emptied nodes can go into maintenance and be switched off until they are needed.
//!
//! Nodes are tried cheapest first (least guest memory to move, then fewest guests, then by name).
//! A node is freed when evacuating it together with every node freed before it keeps all of:
//!
//! - the utilisation ceiling on every remaining node: memory through the placement filters (the
//!   part of a node above the ceiling counts as reserve), CPU checked on the result;
//! - every hard rule: the guests are placed by the evacuation planner through the same filters;
//! - N+1 headroom: if any one remaining node fails, its running guests still fit (memory, the
//!   configured reserves kept) on the other remaining nodes;
//! - the quorum floor: powering a node off does not lower Proxmox's expected votes (corosync counts
//!   every configured node), so more than half of all the cluster's nodes must stay online;
//! - the HA floor: at least `min-nodes` nodes that can take guests;
//! - no guest arriving: a node a running migration is taking a guest to is not empty (the guest
//!   stays on its source until it lands, so an evacuation of the target would not move it).
//!
//! Every node that stays says why: the floor, a guest that fits nowhere else or may not move, the
//! CPU ceiling, the headroom, or a guest arriving.
//!
//! On small clusters (guests × nodes at most [`EXACT_SIZE`]) each candidate is tried by planning
//! the evacuation of it and every node freed before it anew. On larger ones that re-plan grows
//! with the square of the nodes freed, so a candidate is tried by placing only its own guests on
//! the state the nodes freed before leave (module `incremental`); the plan is the sum of those
//! steps.
//! Either way the work is counted in units (a guest placed on one node's view; a sweep over the
//! guests to judge a trial) against a deterministic budget ([`WORK`], raised by `effort-secs`):
//! once it is spent no further node is tried, the rest say so, and the plan (safe, as every
//! accepted step was judged) carries a warning of kind `budget-spent`.

mod incremental;

use serde::{Deserialize, Serialize};

use crate::balance::draft::Draft;
use crate::balance::planner::finish;
use crate::balance::{EvacuateOptions, Plan};
use crate::balance::{Skipped, Unplaced};
use crate::cluster::{Cluster, MaintenanceSource, NodeIdx};
use crate::constraints::Rules;
use crate::evacuate::evacuate;
use crate::placement::{PlacementOptions, Placer};
use crate::state::State;
use crate::units::fmt_bytes;
use crate::{Error, Result, Warning, WarningKind};

/// Largest cluster (guests × candidate nodes) whose candidates are each tried by a full re-plan
/// of every node freed so far; larger ones are tried incrementally (module doc).
pub const EXACT_SIZE: usize = 20_000;
/// Work units (module doc) a consolidation may spend by default: a few seconds on one core of
/// the project's shared machine (3 to 6 million units a second; the 300-node benchmark cluster,
/// 15,000 guests, needs 13 million).
pub const WORK: u64 = 15_000_000;
/// Work units per second of `effort-secs` (thorough mode raises the budget, never lowers it).
const WORK_PER_SEC: f64 = 3_000_000.0;
/// Most targets a try closes for the CPU ceiling before it gives up on the node (each closing
/// plans the try again).
const MAX_CLOSED: usize = 16;

/// The limits of a consolidation (`[consolidate]` in the config file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ConsolidateOptions {
    /// Highest share of a remaining node's memory in use once guests are packed (0..=1).
    pub max_memory: f64,
    /// Highest share of a remaining node's CPUs in use once guests are packed (0..=1).
    pub max_cpu: f64,
    /// Fewest nodes that can take guests, for HA to restart guests on (never below 1).
    pub min_nodes: usize,
    /// Keep N+1 headroom: the remaining nodes still hold every running guest if any one fails.
    pub headroom: bool,
    /// Highest zone load ([`load`]) the remaining nodes may carry, when set: the daemon's auto
    /// mode frees no node that would push the zone past it (and so wake a node right away).
    #[serde(skip)]
    pub max_load: Option<f64>,
    /// Nodes a consolidation already marked and began to empty (an interrupted run): they are
    /// freed first, whatever their guests, so a rerun finishes them.
    #[serde(skip)]
    pub resume: Vec<String>,
    /// Only finish the nodes in `resume`: no other node is freed (the daemon finishes an
    /// interrupted consolidation at once, but a new one waits for its own turn).
    #[serde(skip)]
    pub finish_only: bool,
    /// A node holding a guest that migrated less than this many seconds ago is not freed now
    /// (the daemon passes `balance.cooldown-secs`, so it does not move guests straight back).
    #[serde(skip)]
    pub cooldown_secs: i64,
    /// Nodes never freed, each with why in a sentence (the node holding flxp's zone lease:
    /// switched off, no replica could act again).
    #[serde(skip)]
    pub keep: std::collections::BTreeMap<String, String>,
    /// Seconds of work to allow beyond the default budget (`--effort`; 0: the default [`WORK`]).
    pub effort_secs: f64,
    /// The work budget in units, when set (tests and benchmarks); else from `effort_secs`.
    #[serde(skip)]
    pub work_budget: Option<u64>,
}

impl Default for ConsolidateOptions {
    fn default() -> Self {
        Self {
            max_memory: 0.8,
            max_cpu: 0.8,
            min_nodes: 3,
            headroom: true,
            max_load: None,
            resume: Vec::new(),
            finish_only: false,
            cooldown_secs: 0,
            keep: std::collections::BTreeMap::new(),
            effort_secs: 0.0,
            work_budget: None,
        }
    }
}

impl ConsolidateOptions {
    /// Checks ranges; the error names the option.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [("max-memory", self.max_memory), ("max-cpu", self.max_cpu)] {
            if !v.is_finite() || v <= 0.0 || v > 1.0 {
                return Err(Error::Option {
                    name: format!("consolidate.{name}"),
                    message: format!("must be a share of the node above 0 and at most 1, got {v}"),
                });
            }
        }
        if !self.effort_secs.is_finite() || !(0.0..=86_400.0).contains(&self.effort_secs) {
            return Err(Error::Option {
                name: "consolidate.effort-secs".into(),
                message: format!("must be from 0 to 86400 seconds, got {}", self.effort_secs),
            });
        }
        if self.min_nodes == 0 {
            return Err(Error::Option {
                name: "consolidate.min-nodes".into(),
                message: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// The work budget in units: `work_budget` when set, else [`WORK`] raised by `effort_secs`.
    pub fn budget(&self) -> u64 {
        self.work_budget
            .unwrap_or_else(|| WORK.max((self.effort_secs * WORK_PER_SEC) as u64))
    }

    /// [`Self::validate`]. A `min-nodes` above the cluster's node count is no error: the plan
    /// frees nothing and each node says so (a default must not fail on a small cluster).
    pub fn validate_for(&self, _cluster: &Cluster) -> Result<()> {
        self.validate()
    }
}

/// Why a node is not freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum KeptBecause {
    /// Freeing it would leave too few nodes online for quorum or too few for HA.
    Floor,
    /// A guest on it (or on a node freed before) fits on no remaining node within the limits.
    NoRoom,
    /// A guest on it may not be moved (ignored, locked, a template, ...).
    Unmovable,
    /// A remaining node would use more of its CPUs than the ceiling.
    Cpu,
    /// A remaining node's guests would not fit on the others if it failed.
    Headroom,
    /// The remaining nodes would carry more than the zone load the daemon allows (`max_load`).
    Load,
    /// It cannot take guests anyway: offline, in maintenance or lost by HA.
    NotCandidate,
    /// The caller asked to keep it (it holds flxp's zone lease).
    Required,
    /// Only an interrupted consolidation is finished now (`finish_only`): no new node is freed.
    Finishing,
    /// A guest is migrating onto it: it is not empty, and will hold that guest once it lands.
    Arriving,
    /// The planner's work budget was spent before it was tried (`effort-secs` raises it).
    Budget,
}

/// A node the plan empties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Freed {
    /// The node.
    pub node: String,
    /// Migrations off it.
    pub migrations: usize,
    /// Already marked by an earlier, interrupted consolidation: this plan finishes it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

/// A node that stays in service, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// The node.
    pub node: String,
    /// Why, in a word.
    pub because: KeptBecause,
    /// Why, in a sentence.
    pub reason: String,
    /// Marked by an earlier, interrupted consolidation that cannot be finished: a run gives it
    /// back to service (clears its maintenance and power marks).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

/// A consolidation plan: the migrations, the nodes they free and why the others stay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consolidation {
    /// The migrations, in the order they run (method `consolidate`).
    pub plan: Plan,
    /// Nodes emptied, in the order they were chosen.
    pub freed: Vec<Freed>,
    /// Every other node, with why it stays.
    pub kept: Vec<Kept>,
    /// Nodes in the cluster (each one a corosync vote).
    pub nodes_total: usize,
    /// Nodes online now.
    pub nodes_online: usize,
    /// Fewest nodes that must stay online: more than half of all nodes, and `min-nodes`.
    pub min_online: usize,
    /// One sentence: what it frees.
    pub summary: String,
    /// Work units the planner spent (module doc), against its budget.
    pub work: u64,
}

impl Kept {
    /// A node a run keeps in service, and why.
    fn new(node: String, because: KeptBecause, reason: String) -> Self {
        Kept {
            node,
            because,
            reason,
            resumed: false,
        }
    }

    /// A node an interrupted consolidation marked that this run gives back to service.
    fn given_back(node: String, because: KeptBecause, reason: &str) -> Self {
        Kept {
            reason: format!("its consolidation cannot be finished: {reason}"),
            resumed: true,
            ..Kept::new(node, because, String::new())
        }
    }
}

impl Consolidation {
    /// Names of the freed nodes.
    pub fn freed_names(&self) -> Vec<String> {
        self.freed.iter().map(|f| f.node.clone()).collect()
    }
}

/// Plans a consolidation: the nodes to empty, cheapest first, within every limit (module doc).
///
/// `placer` is the zone's pipeline: its reserves count for the headroom, and the ceiling is added
/// to them for packing. Stopped guests move too (a node switched off cannot start them). `Err` for
/// an invalid option or a scorer bug.
pub fn consolidate(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &ConsolidateOptions,
    evacuate_options: &EvacuateOptions,
) -> Result<Consolidation> {
    options.validate_for(cluster)?;
    let total = cluster.nodes().len();
    let online = cluster.nodes().iter().filter(|n| n.is_online()).count();
    let hosts: Vec<NodeIdx> = cluster
        .node_indexes()
        .filter(|&n| cluster.node(n).is_schedulable())
        .collect();
    // An interrupted consolidation left these marked and part emptied: they go first.
    let mut resumed: Vec<NodeIdx> = options
        .resume
        .iter()
        .filter_map(|name| cluster.node_idx(name))
        .filter(|&n| cluster.node(n).is_online() && cluster.node(n).in_maintenance())
        .collect();
    resumed.sort_unstable();
    resumed.dedup();
    let ceiling = ceiling_placer(cluster, placer, options)?;
    // The nodes tried are emptied as freed by this consolidation, not as in maintenance: the
    // plan's words and its broken rules say so.
    let evac = EvacuateOptions {
        include_stopped: true,
        emptied_as: MaintenanceSource::Consolidation,
        ..evacuate_options.clone()
    };
    let per_node = NodeFacts::new(cluster, state, options.cooldown_secs);
    let landing: Vec<crate::cluster::GuestIdx> = cluster
        .guest_indexes()
        .filter(|&g| cluster.guest(g).migrating_to().is_some())
        .collect();
    let mut search = Search::new(
        Ctx {
            cluster,
            rules,
            state,
            placer,
            ceiling: &ceiling,
            options,
            evac: &evac,
            hosts: &hosts,
            landing: &landing,
        },
        &per_node,
    );
    // Finishing them must keep every limit too; else they are given up, each with its own
    // reason: tried one by one, so that one node's stuck guest does not keep another.
    let mut given_up: Vec<Kept> = Vec::new();
    let marked = std::mem::take(&mut resumed);
    let required = |n: NodeIdx| options.keep.get(&cluster.node(n).name);
    for n in marked {
        let name = cluster.node(n).name.clone();
        if let Some(why) = required(n) {
            given_up.push(Kept::given_back(name, KeptBecause::Required, why));
        } else if let Some(reason) = per_node.arriving(n) {
            given_up.push(Kept::given_back(name, KeptBecause::Arriving, &reason));
        } else if search.spent() {
            given_up.push(Kept::given_back(
                name,
                KeptBecause::Budget,
                &search.spent_words(),
            ));
        } else if let Some((because, reason)) = search.grow(&mut resumed, n)? {
            given_up.push(Kept::given_back(name, because, &reason));
        }
    }
    let quorum = total / 2 + 1;
    let by_quorum = online.saturating_sub(quorum).saturating_sub(resumed.len());
    let by_ha = hosts.len().saturating_sub(options.min_nodes);
    let max_free = by_quorum.min(by_ha);

    let gave_up = |n: NodeIdx| given_up.iter().any(|k| k.node == cluster.node(n).name);
    let mut kept: Vec<Kept> = cluster
        .node_indexes()
        .filter(|&n| !hosts.contains(&n) && !resumed.contains(&n) && !gave_up(n))
        .map(|n| {
            let node = cluster.node(n);
            let reason = if !node.is_online() {
                format!("{} is {}", node.name, node.status_text())
            } else if let Some(ha) = node.ha_lost() {
                format!("{} is lost by HA ({ha})", node.name)
            } else {
                format!("{} is in maintenance already", node.name)
            };
            Kept::new(node.name.clone(), KeptBecause::NotCandidate, reason)
        })
        .collect();
    kept.append(&mut given_up);
    let mut order = hosts.clone();
    order.sort_by_cached_key(|&n| {
        let (mem, count) = per_node.guests(n);
        (mem, count, cluster.node(n).name.clone())
    });

    let mut freed: Vec<NodeIdx> = resumed.clone();
    for &n in &order {
        let name = cluster.node(n).name.clone();
        if let Some(why) = required(n) {
            kept.push(Kept::new(name, KeptBecause::Required, why.clone()));
            continue;
        }
        if options.finish_only {
            kept.push(Kept::new(
                name,
                KeptBecause::Finishing,
                "only the interrupted consolidation is finished now; freeing more waits for a \
                 consolidation of its own"
                    .into(),
            ));
            continue;
        }
        if freed.len() - resumed.len() >= max_free {
            let by_quorum_words = || {
                format!(
                    "{} node(s) must stay online: quorum needs more than half of the cluster's \
                     {total} nodes ({quorum}), and a node switched off still counts",
                    online - freed.len()
                )
            };
            let by_ha_words = || {
                if options.min_nodes > total {
                    format!(
                        "min-nodes = {} is more than the cluster's {total} node(s): every node \
                         stays in service",
                        options.min_nodes
                    )
                } else {
                    format!(
                        "{} node(s) must stay in service for HA (min-nodes = {})",
                        hosts.len() + resumed.len() - freed.len(),
                        options.min_nodes
                    )
                }
            };
            // Both floors named when both bind.
            let reason = match by_quorum.cmp(&by_ha) {
                std::cmp::Ordering::Less => by_quorum_words(),
                std::cmp::Ordering::Greater => by_ha_words(),
                std::cmp::Ordering::Equal => format!("{}; {}", by_quorum_words(), by_ha_words()),
            };
            kept.push(Kept::new(name, KeptBecause::Floor, reason));
            continue;
        }
        if let Some(reason) = per_node.arriving(n) {
            kept.push(Kept::new(name, KeptBecause::Arriving, reason));
            continue;
        }
        if let Some(reason) = per_node.cooling(n) {
            kept.push(Kept::new(name, KeptBecause::Unmovable, reason));
            continue;
        }
        if search.spent() {
            kept.push(Kept::new(name, KeptBecause::Budget, search.spent_words()));
            continue;
        }
        if let Some((because, reason)) = search.grow(&mut freed, n)? {
            kept.push(Kept::new(name, because, reason));
        }
    }

    let work = search.work;
    let budget_spent = kept.iter().any(|k| k.because == KeptBecause::Budget);
    let mut plan = match search.plan(&freed)? {
        Some(p) => p,
        None => empty_plan(cluster, rules, state, &ceiling, &evac),
    };
    if budget_spent {
        plan.warnings.push(
            Warning::general(format!(
                "work budget of {} units spent after {work}: the nodes not tried yet stay (raise \
                 --effort to try them)",
                options.budget()
            ))
            .with_kind(WarningKind::BudgetSpent),
        );
    }
    plan.method = crate::balance::PlanSource::Consolidate;
    renumber_steps(&mut plan);
    let freed: Vec<Freed> = freed
        .iter()
        .map(|&n| {
            let node = cluster.node(n).name.clone();
            let migrations = plan.migrations.iter().filter(|m| m.from == node).count();
            Freed {
                node,
                migrations,
                resumed: resumed.contains(&n),
            }
        })
        .collect();
    kept.sort_by(|a, b| a.node.cmp(&b.node));
    let summary = if freed.is_empty() {
        format!("consolidate: no node can be freed; {online} of {total} node(s) stay online")
    } else {
        let names: Vec<&str> = freed.iter().map(|f| f.node.as_str()).collect();
        format!(
            "consolidate: free {} with {} migration(s), {} to copy; {} of {total} node(s) stay online",
            names.join(", "),
            plan.migrations.len(),
            fmt_bytes(plan.bytes),
            online - freed.len()
        )
    };
    plan.summary.clone_from(&summary);
    Ok(Consolidation {
        plan,
        freed,
        kept,
        nodes_total: total,
        nodes_online: online,
        min_online: quorum.max(options.min_nodes.min(hosts.len())),
        summary,
        work,
    })
}

/// What every trial reads: the cluster, the limits and the nodes that can take guests.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    cluster: &'a Cluster,
    rules: &'a Rules,
    /// The state as the snapshot reports it.
    state: &'a State,
    /// The zone's pipeline (its reserves count for the headroom).
    placer: &'a Placer,
    /// The pipeline with the memory ceiling added to the reserves (targets are chosen with it).
    ceiling: &'a Placer,
    options: &'a ConsolidateOptions,
    evac: &'a EvacuateOptions,
    hosts: &'a [NodeIdx],
    /// Guests migrating to a known node.
    landing: &'a [crate::cluster::GuestIdx],
}

/// Per-node facts read once (each would be a sweep over every guest per node).
struct NodeFacts {
    /// Memory of the running guests and how many guests (any state), per node.
    guests: Vec<(u64, usize)>,
    /// Why a node is not freed now (a guest moved within the cooldown), per node.
    cooling: Vec<Option<String>>,
    /// Why a node is not empty though nothing is on it (a guest arriving), per node.
    arriving: Vec<Option<String>>,
}

impl NodeFacts {
    fn new(cluster: &Cluster, state: &State, cooldown_secs: i64) -> Self {
        let n = cluster.nodes().len();
        let mut guests = vec![(0u64, 0usize); n];
        let mut cooling: Vec<Option<String>> = vec![None; n];
        let now = cluster.time.or_else(|| cluster.tasks.newest_time());
        for g in cluster.guest_indexes() {
            let guest = cluster.guest(g);
            let at = state.location(g).get();
            guests[at].1 += 1;
            if guest.running {
                guests[at].0 += guest.mem_footprint();
            }
            if cooling[at].is_none() {
                cooling[at] = now.and_then(|now| cooling_words(cluster, g, now, cooldown_secs));
            }
        }
        // The first guest (by vmid) arriving on each node, as `arriving` names it: one sweep.
        let mut arriving: Vec<Option<String>> = vec![None; n];
        for g in cluster.guests() {
            if let Some(to) = g.migrating_to() {
                if arriving[to.get()].is_none() {
                    let among = std::iter::once(g);
                    let mut only = vec![false; n];
                    only[to.get()] = true;
                    arriving[to.get()] = arriving_among(cluster, among, &only, Some(to));
                }
            }
        }
        Self {
            guests,
            cooling,
            arriving,
        }
    }

    fn guests(&self, n: NodeIdx) -> (u64, usize) {
        self.guests[n.get()]
    }

    fn cooling(&self, n: NodeIdx) -> Option<String> {
        self.cooling[n.get()].clone()
    }

    fn arriving(&self, n: NodeIdx) -> Option<String> {
        self.arriving[n.get()].clone()
    }
}

/// The trials, their work count, and (on large clusters) the incremental packing.
struct Search<'a> {
    ctx: Ctx<'a>,
    facts: &'a NodeFacts,
    /// Work units spent so far.
    work: u64,
    budget: u64,
    /// The plan of the last accepted full re-plan (small clusters).
    best: Option<Plan>,
    /// The incremental packing (large clusters).
    packer: Option<incremental::Packer<'a>>,
}

impl<'a> Search<'a> {
    fn new(ctx: Ctx<'a>, facts: &'a NodeFacts) -> Self {
        let size = ctx.cluster.guests().len().saturating_mul(ctx.hosts.len());
        Self {
            ctx,
            facts,
            work: 0,
            budget: ctx.options.budget(),
            best: None,
            packer: (size > EXACT_SIZE).then(|| incremental::Packer::new(ctx)),
        }
    }

    /// Whether the budget is spent: no further node is tried.
    fn spent(&self) -> bool {
        self.work >= self.budget
    }

    fn spent_words(&self) -> String {
        format!(
            "not tried: the planner's work budget of {} units was spent (raise --effort)",
            self.budget
        )
    }

    /// Frees the nodes of `set` and `n` together: `set` grows, or why not.
    fn grow(
        &mut self,
        set: &mut Vec<NodeIdx>,
        n: NodeIdx,
    ) -> Result<Option<(KeptBecause, String)>> {
        let ctx = self.ctx;
        let trial = [set.as_slice(), &[n]].concat();
        let guests = ctx.cluster.guests().len() as u64;
        let hosts = ctx.hosts.len() as u64;
        let outcome = match &mut self.packer {
            Some(packer) => {
                // Only n's guests are placed, each judged over every host; then one sweep.
                let cost = self.facts.guests(n).1 as u64 * hosts + guests;
                packer.try_add(&trial, (&mut self.work, cost))?
            }
            None => {
                let placed: u64 = trial.iter().map(|&t| self.facts.guests(t).1 as u64).sum();
                let cost = placed * hosts + guests;
                let run = |p: &Placer| -> Result<Trial<Plan>> {
                    let plan = evacuate(ctx.cluster, ctx.rules, ctx.state, p, &trial, ctx.evac)?;
                    Ok(Trial {
                        unplaced: plan.unplaced.clone(),
                        skipped: plan.skipped.clone(),
                        after: apply(ctx.cluster, ctx.state, &plan),
                        payload: plan,
                    })
                };
                match try_free(
                    &ctx,
                    &trial,
                    (&mut self.work, cost),
                    (Vec::new(), false),
                    run,
                )? {
                    Ok(t) => {
                        self.best = Some(t.payload);
                        Ok(())
                    }
                    Err(why) => Err(why),
                }
            }
        };
        Ok(match outcome {
            Ok(()) => {
                *set = trial;
                None
            }
            Err(why) => Some(why),
        })
    }

    /// The plan that frees `freed` (the nodes accepted); `None` when none is.
    fn plan(self, freed: &[NodeIdx]) -> Result<Option<Plan>> {
        match self.packer {
            Some(packer) if !freed.is_empty() => packer.plan(freed).map(Some),
            Some(_) => Ok(None),
            None => Ok(self.best),
        }
    }
}

/// Why node `n` is not freed now: guest `g` on it migrated within the cooldown; `None` otherwise.
fn cooling_words(
    cluster: &Cluster,
    g: crate::cluster::GuestIdx,
    now: i64,
    cooldown_secs: i64,
) -> Option<String> {
    let guest = cluster.guest(g);
    let ago = now - cluster.tasks.last_migration(guest.vmid)?;
    (ago < cooldown_secs).then(|| {
        format!(
            "guest {} migrated {} s ago, within the {cooldown_secs} s cooldown",
            guest.label(),
            ago.max(0)
        )
    })
}

/// Why the nodes of `nodes` are not empty though nothing is on them: a guest whose running
/// migration takes it onto one of them (the last of `nodes` first), named with where it comes
/// from; `None` when none is arriving. Such a guest is on its source until it lands, so an
/// evacuation of its target does not move it, and a target switched off stops it.
pub fn arriving(cluster: &Cluster, nodes: &[NodeIdx]) -> Option<String> {
    let mut among = vec![false; cluster.nodes().len()];
    for &n in nodes {
        among[n.get()] = true;
    }
    arriving_among(cluster, cluster.guests(), &among, nodes.last().copied())
}

/// [`arriving`] for the nodes flagged in `among` (indexed like `Cluster::nodes`), a guest
/// arriving on `first` named first: one sweep over the guests.
fn arriving_among<'c>(
    cluster: &'c Cluster,
    guests: impl IntoIterator<Item = &'c crate::cluster::Guest>,
    among: &[bool],
    first: Option<NodeIdx>,
) -> Option<String> {
    let mut found: Option<&crate::cluster::Guest> = None;
    for g in guests {
        if let Some(to) = g.migrating_to().filter(|to| among[to.get()]) {
            if Some(to) == first {
                found = Some(g);
                break;
            }
            found.get_or_insert(g);
        }
    }
    found.and_then(|g| {
        let to = g.migrating_to()?;
        Some(format!(
            "guest {} is migrating onto {} (from {}): it holds the node once it lands",
            g.label(),
            cluster.node(to).name,
            cluster.node(g.node).name
        ))
    })
}

/// Numbers the plan's steps in the order they run: waves reorder the planning steps.
fn renumber_steps(plan: &mut Plan) {
    let mut renumbered: Vec<u32> = Vec::new();
    for m in &mut plan.migrations {
        let at = match renumbered.iter().position(|&s| s == m.step) {
            Some(i) => i,
            None => {
                renumbered.push(m.step);
                renumbered.len() - 1
            }
        };
        m.step = u32::try_from(at).unwrap_or(u32::MAX);
    }
}

/// What one try at freeing a set of nodes left: the guests that fit nowhere or stayed, the state
/// after its moves, and what the caller keeps of it (a plan, or migrations).
struct Trial<T> {
    unplaced: Vec<Unplaced>,
    skipped: Vec<Skipped>,
    after: State,
    payload: T,
}

/// The try (`run`, handed the pipeline to place with) that frees `trial` within every limit, or
/// why none was found. It places by memory; a target it would push over the CPU ceiling is closed
/// to it and it runs again, so the ceiling shapes the choice of targets and does not only veto
/// the first choice, up to [`MAX_CLOSED`] runs again. When none is found, the first CPU breach
/// is the reason given. Each run adds `cost` to `work`. `closed` starts closed (targets that
/// cannot take more CPU anyway); with `close_all`, every target a run overloads is closed at
/// once, not only the first (fewer runs on large clusters).
fn try_free<T>(
    ctx: &Ctx<'_>,
    trial: &[NodeIdx],
    (work, cost): (&mut u64, u64),
    (mut closed, close_all): (Vec<NodeIdx>, bool),
    mut run: impl FnMut(&Placer) -> Result<Trial<T>>,
) -> Result<std::result::Result<Trial<T>, (KeptBecause, String)>> {
    let (cluster, state, options) = (ctx.cluster, ctx.state, ctx.options);
    let mut reruns = 0;
    let mut first_cpu: Option<String> = None;
    let mut in_trial = vec![false; cluster.nodes().len()];
    for &n in trial {
        in_trial[n.get()] = true;
    }
    let remaining: Vec<NodeIdx> = ctx
        .hosts
        .iter()
        .copied()
        .filter(|n| !in_trial[n.get()])
        .collect();
    loop {
        *work += cost;
        let t = if closed.is_empty() {
            run(ctx.ceiling)?
        } else {
            let mut o = ctx.ceiling.options().clone();
            for &n in &closed {
                let node = cluster.node(n);
                o.node_reserve_bytes.insert(node.name.clone(), node.maxmem);
            }
            run(&ctx.ceiling.with_options(o)?)?
        };
        match judge(ctx, trial, &in_trial, &remaining, &t) {
            Ok(()) => return Ok(Ok(t)),
            Err((because, reason)) => {
                let breach = (because == KeptBecause::Cpu)
                    .then(|| cpu_breach(cluster, state, &t.after, options, &remaining))
                    .flatten()
                    .filter(|(n, _)| !closed.contains(n) && reruns < MAX_CLOSED);
                match breach {
                    Some((n, _)) => {
                        // Named by the guest that needs the CPUs: the node it would overload
                        // may be one this plan frees later.
                        let why = cpu_hungry(cluster, state, &t.after, n)
                            .map(|g| {
                                let guest = cluster.guest(g);
                                format!(
                                    "guest {} uses {:.1} CPUs: no remaining node can take it \
                                     within the {:.0}% CPU ceiling",
                                    guest.label(),
                                    guest.cpu_cores(),
                                    100.0 * options.max_cpu
                                )
                            })
                            .unwrap_or(reason);
                        first_cpu.get_or_insert(why);
                        closed.push(n);
                        reruns += 1;
                        if close_all {
                            let more = remaining.iter().copied().filter(|&r| {
                                r != n
                                    && !closed.contains(&r)
                                    && cpu_over(cluster, state, &t.after, options, r)
                            });
                            closed.extend(more.collect::<Vec<_>>());
                        }
                    }
                    None => {
                        return Ok(Err(match first_cpu {
                            Some(cpu) => (KeptBecause::Cpu, cpu),
                            None => (because, reason),
                        }));
                    }
                }
            }
        }
    }
}

/// The guest moved onto `node` by the plan (from `state` to `after`) that uses the most CPU.
fn cpu_hungry(
    cluster: &Cluster,
    state: &State,
    after: &State,
    node: NodeIdx,
) -> Option<crate::cluster::GuestIdx> {
    cluster
        .guest_indexes()
        .filter(|&g| after.location(g) == node && state.location(g) != node)
        .max_by(|&a, &b| {
            cluster
                .guest(a)
                .cpu_cores()
                .total_cmp(&cluster.guest(b).cpu_cores())
                .then(cluster.guest(b).vmid.cmp(&cluster.guest(a).vmid))
        })
}

/// Whether `after` puts node `r` above the CPU ceiling with more than `state` has on it.
fn cpu_over(
    cluster: &Cluster,
    state: &State,
    after: &State,
    options: &ConsolidateOptions,
    r: NodeIdx,
) -> bool {
    let cap = cluster.node(r).maxcpu * options.max_cpu;
    let (was, now) = (state.usage(r).cpu, after.usage(r).cpu);
    now > was + 1e-9 && now > cap + 1e-9
}

/// A remaining node the plan's result pushes above the CPU ceiling, and the words for it.
fn cpu_breach(
    cluster: &Cluster,
    state: &State,
    after: &State,
    options: &ConsolidateOptions,
    remaining: &[NodeIdx],
) -> Option<(NodeIdx, String)> {
    remaining.iter().find_map(|&r| {
        let node = cluster.node(r);
        let cap = node.maxcpu * options.max_cpu;
        let (was, now) = (state.usage(r).cpu, after.usage(r).cpu);
        (now > was + 1e-9 && now > cap + 1e-9).then(|| {
            (
                r,
                format!(
                    "{} would use {:.0}% of its CPUs, above the {:.0}% ceiling",
                    node.name,
                    100.0 * now / node.maxcpu.max(f64::MIN_POSITIVE),
                    100.0 * options.max_cpu
                ),
            )
        })
    })
}

/// Whether the try at freeing `trial` (flagged in `in_trial`; `remaining` the other hosts) keeps
/// every limit; else why not.
fn judge<T>(
    ctx: &Ctx<'_>,
    trial: &[NodeIdx],
    in_trial: &[bool],
    remaining: &[NodeIdx],
    t: &Trial<T>,
) -> std::result::Result<(), (KeptBecause, String)> {
    let (cluster, state, options) = (ctx.cluster, ctx.state, ctx.options);
    // The node just added to the trial first: its own guest is the reason it stays.
    let newest = trial.last().map(|&n| cluster.node(n).name.as_str());
    if let Some(u) = t
        .unplaced
        .iter()
        .find(|u| Some(u.node.as_str()) == newest)
        .or_else(|| t.unplaced.first())
    {
        // A guest of a node freed before this one: this node was its only room.
        let reason = match newest {
            Some(newest) if newest != u.node => format!(
                "freeing {newest} too would leave guest {} of {}, which is freed, no node within \
                 the limits: {}",
                u.vmid, u.node, u.reason
            ),
            _ => format!(
                "guest {} on {} fits on no other node within the limits: {}",
                u.vmid, u.node, u.reason
            ),
        };
        return Err((KeptBecause::NoRoom, reason));
    }
    let landing = ctx.landing.iter().map(|&g| cluster.guest(g));
    if let Some(reason) = arriving_among(cluster, landing, in_trial, trial.last().copied()) {
        return Err((KeptBecause::Arriving, reason));
    }
    let after = &t.after;
    // A guest whose migration off its node is in flight (an interrupted run's, say) is leaving,
    // unless it lands on a node being freed too.
    let leaving = |g: crate::cluster::GuestIdx| {
        let guest = cluster.guest(g);
        after.location(g) == guest.node
            && guest.migrating_to().is_some_and(|to| !in_trial[to.get()])
    };
    let stuck = |g: &crate::cluster::GuestIdx| in_trial[after.location(*g).get()] && !leaving(*g);
    if let Some(g) = cluster
        .guest_indexes()
        .filter(stuck)
        .find(|&g| trial.last() == Some(&after.location(g)))
        .or_else(|| cluster.guest_indexes().find(stuck))
    {
        let guest = cluster.guest(g);
        let why = t
            .skipped
            .iter()
            .find(|s| s.vmid == guest.vmid)
            .map_or_else(|| "it cannot be moved".to_owned(), |s| s.reason.clone());
        return Err((
            KeptBecause::Unmovable,
            format!(
                "guest {} stays on {}: {why}",
                guest.label(),
                cluster.node(after.location(g)).name
            ),
        ));
    }
    if let Some((_, reason)) = cpu_breach(cluster, state, after, options, remaining) {
        return Err((KeptBecause::Cpu, reason));
    }
    if let Some(max) = options.max_load {
        let l = load(cluster, after, remaining);
        if l > max + 1e-9 {
            return Err((
                KeptBecause::Load,
                format!(
                    "the other {} node(s) would carry {:.0}% of their capacity, above the {:.0}% \
                     the auto mode allows (halfway between consolidate-below and wake-above)",
                    remaining.len(),
                    100.0 * l,
                    100.0 * max
                ),
            ));
        }
    }
    if options.headroom {
        if let Some(why) = headroom_breach(cluster, after, remaining, ctx.placer.options()) {
            return Err((KeptBecause::Headroom, why));
        }
    }
    Ok(())
}

/// Why the nodes `hosts` lack N+1 headroom in `state`: a node whose running guests would not fit
/// on the others (their free memory less the reserves) if it failed; `None` when every node's
/// would. Packed largest guest first, each onto the node with the most room left: a packing it
/// finds exists, so `None` is a proof.
///
/// A failed node's m guests only ever land on the m roomiest other nodes (each goes to the
/// roomiest, and an untouched node is touched only once it is the roomiest left), so the rooms
/// are sorted once and each failure packs onto its own few: O(H log H + G log G) in all.
pub fn headroom_breach(
    cluster: &Cluster,
    state: &State,
    hosts: &[NodeIdx],
    options: &PlacementOptions,
) -> Option<String> {
    let mut slot = vec![usize::MAX; cluster.nodes().len()];
    for (i, &h) in hosts.iter().enumerate() {
        slot[h.get()] = i;
    }
    let mut on: Vec<Vec<u64>> = vec![Vec::new(); hosts.len()];
    for g in cluster.guest_indexes() {
        let guest = cluster.guest(g);
        if !guest.running {
            continue;
        }
        if let Some(items) = on.get_mut(slot[state.location(g).get()]) {
            items.push(guest.mem_footprint());
        }
    }
    // Every host's room, roomiest first (ties by position, so the order is fixed).
    let room: Vec<u64> = hosts
        .iter()
        .map(|&h| {
            let node = cluster.node(h);
            node.maxmem
                .saturating_sub(state.usage(h).mem)
                .saturating_sub(options.reserve_for(node))
        })
        .collect();
    let mut roomiest: Vec<usize> = (0..hosts.len()).collect();
    roomiest.sort_by(|&a, &b| room[b].cmp(&room[a]).then(a.cmp(&b)));
    for (i, &failed) in hosts.iter().enumerate() {
        let mut items = std::mem::take(&mut on[i]);
        if items.is_empty() {
            continue;
        }
        items.sort_unstable_by(|a, b| b.cmp(a));
        let mut free: std::collections::BinaryHeap<u64> = roomiest
            .iter()
            .filter(|&&j| j != i)
            .take(items.len())
            .map(|&j| room[j])
            .collect();
        for &item in &items {
            match free.peek_mut() {
                Some(mut top) if *top >= item => *top -= item,
                _ => {
                    let sum: u64 = items.iter().sum();
                    return Some(format!(
                        "if {} failed, its {} running guest(s) ({}) would not fit on the other {} node(s)",
                        cluster.node(failed).name,
                        items.len(),
                        fmt_bytes(sum),
                        hosts.len() - 1
                    ));
                }
            }
        }
    }
    None
}

/// The load of some nodes: the larger of the shares of their memory and of their CPUs in use
/// (0 for no capacity). The daemon's auto mode compares it with its two levels.
pub fn load(cluster: &Cluster, state: &State, nodes: &[NodeIdx]) -> f64 {
    let (mut mem, mut maxmem, mut cpu, mut maxcpu) = (0.0, 0.0, 0.0, 0.0);
    for &n in nodes {
        let node = cluster.node(n);
        let u = state.usage(n);
        mem += u.mem as f64;
        maxmem += node.maxmem as f64;
        cpu += u.cpu;
        maxcpu += node.maxcpu;
    }
    let share = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    share(mem, maxmem).max(share(cpu, maxcpu))
}

/// The zone's pipeline with the memory ceiling added to each node's reserve.
fn ceiling_placer(
    cluster: &Cluster,
    placer: &Placer,
    options: &ConsolidateOptions,
) -> Result<Placer> {
    let mut o = placer.options().clone();
    for node in cluster.nodes() {
        let above = node.maxmem - (node.maxmem as f64 * options.max_memory) as u64;
        let reserve = o.reserve_for(node).max(above);
        o.node_reserve_bytes.insert(node.name.clone(), reserve);
    }
    placer.with_options(o)
}

/// The state once a plan's migrations have run.
fn apply(cluster: &Cluster, state: &State, plan: &Plan) -> State {
    let mut s = state.clone();
    for m in &plan.migrations {
        if let (Some(g), Some(to)) = (cluster.guest_idx(m.vmid), cluster.node_idx(&m.to)) {
            s.move_guest(cluster, g, to);
        }
    }
    s
}

/// A plan that moves nothing, with the cluster's figures.
fn empty_plan(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &EvacuateOptions,
) -> Plan {
    let measure = options.measure;
    let kind = measure.load_kind(options.metric);
    let draft = Draft::new(cluster, rules, placer, state, kind, measure, 0, usize::MAX);
    let threshold = measure.default_threshold();
    finish(
        draft,
        state,
        crate::balance::PlanSource::Consolidate,
        options.metric,
        threshold,
        threshold / 2.0,
    )
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    fn placer() -> Placer {
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap()
    }

    fn run(c: &Cluster, o: &ConsolidateOptions) -> Consolidation {
        let rules = Rules::compile(c);
        let p = placer();
        consolidate(
            c,
            &rules,
            &State::new(c),
            &p,
            o,
            &EvacuateOptions::default(),
        )
        .unwrap()
    }

    /// Packing onto as few as one node, with no headroom for a node's failure.
    fn packing() -> ConsolidateOptions {
        ConsolidateOptions {
            min_nodes: 1,
            headroom: false,
            ..ConsolidateOptions::default()
        }
    }

    fn kept(c: &Consolidation, node: &str) -> KeptBecause {
        c.kept.iter().find(|k| k.node == node).unwrap().because
    }

    /// Five 64 GiB nodes, each with one 8 GiB guest: room to pack them onto three.
    fn light() -> ClusterBuilder {
        let mut b = ClusterBuilder::new();
        for (i, n) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            b = b
                .node(node(n))
                .guest(vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB));
        }
        b
    }

    #[test]
    fn a_light_cluster_frees_nodes_down_to_the_quorum_floor() {
        let c = run(&light().build(), &ConsolidateOptions::default());
        assert_eq!(c.freed_names(), vec!["a", "b"]);
        assert_eq!(c.plan.migrations.len(), 2);
        assert_eq!(c.min_online, 3);
        assert_eq!(kept(&c, "c"), KeptBecause::Floor);
        assert!(
            c.kept[0].reason.contains("quorum needs more than half"),
            "{}",
            c.kept[0].reason
        );
        assert!(c.plan.migrations.iter().all(|m| m.to != "a" && m.to != "b"));
        // Only hypothetically in maintenance: not said to be, and no rule broken before.
        assert!(
            c.plan.violations_before.is_empty(),
            "{:?}",
            c.plan.violations_before
        );
        assert!(c.plan.nodes_before.iter().all(|n| !n.maintenance));
        for m in &c.plan.migrations {
            assert!(
                m.reason.contains("is being freed by the consolidation"),
                "{}",
                m.reason
            );
        }
    }

    #[test]
    fn a_node_to_keep_is_never_freed_nor_finished() {
        let why = "a holds flxp's lease of zone lab".to_owned();
        let o = ConsolidateOptions {
            keep: [("a".to_owned(), why.clone())].into(),
            ..ConsolidateOptions::default()
        };
        let c = run(&light().build(), &o);
        assert_eq!(c.freed_names(), vec!["b", "c"]);
        let a = c.kept.iter().find(|k| k.node == "a").unwrap();
        assert_eq!(
            (a.because, a.reason.as_str()),
            (KeptBecause::Required, why.as_str())
        );
        // An earlier run marked it: it is given back, not finished.
        let cluster = five_nodes_one_marked("a");
        let o = ConsolidateOptions {
            resume: vec!["a".into()],
            ..o
        };
        let c = run(&cluster, &o);
        assert!(!c.freed_names().contains(&"a".to_owned()), "{c:?}");
        let a = c.kept.iter().find(|k| k.node == "a").unwrap();
        assert!(a.resumed && a.because == KeptBecause::Required, "{a:?}");
    }

    #[test]
    fn the_ha_minimum_can_be_the_binding_floor() {
        let o = ConsolidateOptions {
            min_nodes: 4,
            ..ConsolidateOptions::default()
        };
        let c = run(&light().build(), &o);
        assert_eq!(c.freed_names(), vec!["a"]);
        assert!(c.kept.iter().any(|k| k.reason.contains("min-nodes = 4")));
    }

    #[test]
    fn a_pinned_or_ignored_guest_keeps_its_node_with_the_reason() {
        let mut b = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b"))
            .guest(vm(200, "a").mem(GIB, GIB).tagged("flxp.node.a"))
            .guest(vm(201, "b").mem(GIB, GIB).tagged("flxp.ignore"));
        for (i, n) in ["c", "d", "e"].iter().enumerate() {
            b = b
                .node(node(n))
                .guest(vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB));
        }
        let c = run(&b.build(), &ConsolidateOptions::default());
        assert_eq!(kept(&c, "a"), KeptBecause::NoRoom, "{:#?}", c.kept);
        assert_eq!(kept(&c, "b"), KeptBecause::Unmovable, "{:#?}", c.kept);
        assert_eq!(c.freed_names(), vec!["c", "d"]);
        // b was only tried as freed: it is not said to be in maintenance.
        for k in &c.kept {
            assert!(!k.reason.contains("in maintenance"), "{}", k.reason);
        }
    }

    #[test]
    fn headroom_keeps_a_node_a_failure_would_need() {
        // Six 64 GiB nodes with 33 GiB each (11 guests of 3 GiB): four nodes hold the 198 GiB
        // within the 80% ceiling, but if one of four failed, three could not.
        let mut b = ClusterBuilder::new();
        for (i, n) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
            b = b.node(node(n));
            for j in 0..11 {
                b = b.guest(vm(100 + 20 * i as u32 + j, n).mem(3 * GIB, 3 * GIB));
            }
        }
        let c = run(&b.build(), &ConsolidateOptions::default());
        assert_eq!(c.freed.len(), 1, "{:#?}", c.kept);
        assert!(
            c.kept.iter().any(|k| k.because == KeptBecause::Headroom),
            "{:#?}",
            c.kept
        );
        let without = ConsolidateOptions {
            headroom: false,
            ..ConsolidateOptions::default()
        };
        assert_eq!(run(&b.build(), &without).freed.len(), 2);
    }

    #[test]
    fn the_memory_ceiling_is_kept_on_every_remaining_node() {
        let c = run(
            &light().build(),
            &ConsolidateOptions {
                max_memory: 0.2,
                ..ConsolidateOptions::default()
            },
        );
        // 8 GiB + 8 GiB is 25% of 64 GiB: nothing can take a second guest.
        assert!(c.freed.is_empty());
        assert_eq!(kept(&c, "a"), KeptBecause::NoRoom);
    }

    #[test]
    fn the_cpu_ceiling_is_checked_on_the_result() {
        let mut b = ClusterBuilder::new();
        for (i, n) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            b = b
                .node(node(n))
                .guest(vm(101 + i as u32, n).mem(GIB, GIB).cores(8.0, 1.0));
        }
        let c = run(&b.build(), &ConsolidateOptions::default());
        assert!(c.freed.is_empty());
        assert_eq!(kept(&c, "a"), KeptBecause::Cpu);
    }

    /// n1 runs near the CPU ceiling and is the least loaded by memory among
    /// the targets. The cheapest node, n3, is freed onto a node that stays under the ceiling,
    /// not kept because n1 would go over it.
    #[test]
    fn targets_are_chosen_within_the_cpu_ceiling() {
        let mib = GIB / 1024;
        let c = ClusterBuilder::new()
            .nodes(&["n1", "n2", "n3", "n4"])
            .guest(vm(101, "n1").mem(2 * GIB, 4 * GIB).cores(16.0, 0.75))
            .guest(vm(102, "n2").mem(1536 * mib, 2 * GIB))
            .guest(vm(103, "n2").mem(1536 * mib, 2 * GIB))
            .guest(vm(104, "n3").mem(1229 * mib, 2 * GIB).cores(4.0, 0.25))
            .guest(vm(105, "n4").mem(3 * GIB, 4 * GIB))
            .build();
        let c = run(&c, &packing());
        assert_eq!(c.freed_names(), vec!["n3"]);
        assert_eq!(c.plan.migrations.len(), 1);
        assert_eq!(c.plan.migrations[0].vmid, 104);
        assert_ne!(c.plan.migrations[0].to, "n1");
        assert_eq!(kept(&c, "n1"), KeptBecause::Floor);
    }

    /// A node already above the ceiling receives nothing, and does not keep
    /// every other node.
    #[test]
    fn a_node_above_the_cpu_ceiling_takes_nothing_but_keeps_nothing() {
        let c = ClusterBuilder::new()
            .nodes(&["n1", "n2", "n3", "n4"])
            .guest(vm(101, "n1").mem(GIB, 2 * GIB).cores(16.0, 0.9))
            .guest(vm(102, "n2").mem(GIB, 2 * GIB))
            .guest(vm(103, "n2").mem(GIB, 2 * GIB))
            .guest(vm(104, "n3").mem(GIB, 2 * GIB).cores(4.0, 0.25))
            .guest(vm(105, "n4").mem(3 * GIB, 4 * GIB))
            .build();
        let c = run(&c, &packing());
        assert_eq!(c.freed_names(), vec!["n3"]);
        assert_ne!(c.plan.migrations[0].to, "n1");
    }

    /// Four anti-affine guests on n1..n4 and one large guest on n5. Once n1
    /// is freed (its guest onto n5), n5 is kept for that guest: the reason says so, and calls
    /// the nodes the plan frees "being freed", not "in maintenance".
    #[test]
    fn a_kept_nodes_reason_names_the_plan_not_maintenance() {
        let mut b = ClusterBuilder::new();
        for (i, n) in ["n1", "n2", "n3", "n4"].iter().enumerate() {
            b = b.node(node(n)).guest(
                vm(101 + i as u32, n)
                    .mem(GIB, 2 * GIB)
                    .tagged("flxp.anti-affinity.db"),
            );
        }
        let c = b
            .node(node("n5"))
            .guest(vm(110, "n5").mem(6 * GIB, 8 * GIB))
            .build();
        let c = run(&c, &packing());
        assert_eq!(c.freed_names(), vec!["n1"]);
        for k in &c.kept {
            assert!(!k.reason.contains("maintenance"), "{k:?}");
        }
        let k5 = c.kept.iter().find(|k| k.node == "n5").unwrap();
        assert_eq!(k5.because, KeptBecause::NoRoom);
        assert!(
            k5.reason.starts_with(
                "freeing n5 too would leave guest 101 of n1, which is freed, no node within \
                 the limits: n5: being freed by this plan; n2, n3, n4: anti-affinity"
            ),
            "{k5:?}"
        );
        let k2 = c.kept.iter().find(|k| k.node == "n2").unwrap();
        assert!(
            k2.reason.starts_with(
                "guest 102 on n2 fits on no other node within the limits: n1: being freed by \
                 this plan; n3, n4, n5: anti-affinity"
            ),
            "{k2:?}"
        );
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let c = light().build();
        let rules = Rules::compile(&c);
        let p = Placer::new(PlacementOptions::default(), Vec::new()).unwrap();
        let o = ConsolidateOptions {
            max_cpu: 1.5,
            ..ConsolidateOptions::default()
        };
        let e = consolidate(
            &c,
            &rules,
            &State::new(&c),
            &p,
            &o,
            &EvacuateOptions::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("max-cpu"), "{e}");
    }

    #[test]
    fn min_nodes_above_the_node_count_frees_nothing_and_says_why() {
        let o = ConsolidateOptions {
            min_nodes: 9,
            ..ConsolidateOptions::default()
        };
        let c = run(&light().build(), &o);
        assert!(c.freed.is_empty());
        assert_eq!(c.kept.len(), 5);
        assert!(
            c.kept[0]
                .reason
                .contains("min-nodes = 9 is more than the cluster's 5 node(s)"),
            "{}",
            c.kept[0].reason
        );
        // Two nodes with the default min-nodes = 3: both floors bind, both named.
        let two = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b"))
            .guest(vm(101, "a").mem(GIB, GIB))
            .build();
        let c = run(&two, &ConsolidateOptions::default());
        assert!(c.freed.is_empty());
        for k in &c.kept {
            assert_eq!(k.because, KeptBecause::Floor);
            assert!(k.reason.contains("min-nodes = 3"), "{}", k.reason);
            assert!(k.reason.contains("quorum"), "{}", k.reason);
        }
    }

    #[test]
    fn a_guest_moved_within_the_cooldown_keeps_its_node() {
        let task = crate::snapshot::Task {
            kind: Some("qmigrate".into()),
            id: Some("101".into()),
            starttime: Some(900),
            endtime: Some(1000),
            status: Some("OK".into()),
            ..crate::snapshot::Task::default()
        };
        let cluster = light().task(task).time(1010).build();
        assert_eq!(
            run(&cluster, &ConsolidateOptions::default()).freed_names(),
            vec!["a", "b"]
        );
        let o = ConsolidateOptions {
            cooldown_secs: 60,
            ..ConsolidateOptions::default()
        };
        let c = run(&cluster, &o);
        assert_eq!(c.freed_names(), vec!["b", "c"], "{:#?}", c.kept);
        let a = c.kept.iter().find(|k| k.node == "a").unwrap();
        assert_eq!(a.because, KeptBecause::Unmovable);
        assert!(
            a.reason
                .contains("migrated 10 s ago, within the 60 s cooldown"),
            "{}",
            a.reason
        );
    }

    /// One node per name with one 8 GiB guest each (vmids from 101), as `guest` finishes it; the
    /// nodes in `marked` carry an earlier run's maintenance mark.
    fn one_guest_each(
        names: &[&str],
        marked: &[&str],
        guest: impl Fn(&str, GuestSpec) -> GuestSpec,
    ) -> ClusterBuilder {
        let mut b = ClusterBuilder::new();
        for (i, n) in names.iter().enumerate() {
            let spec = if marked.contains(n) {
                node(n).notes("flxp.maintenance")
            } else {
                node(n)
            };
            let g = guest(n, vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB));
            b = b.node(spec).guest(g);
        }
        b
    }

    /// Nodes a..e with one 8 GiB guest each; `marked` carries an earlier run's maintenance mark.
    fn five_nodes_one_marked(marked: &str) -> Cluster {
        one_guest_each(&["a", "b", "c", "d", "e"], &[marked], |_, g| g).build()
    }

    #[test]
    fn an_interrupted_consolidation_is_finished_not_skipped() {
        // b was marked and part emptied by an earlier run: it is freed first, its guest moves.
        let cluster = five_nodes_one_marked("b");
        let plain = run(&cluster, &ConsolidateOptions::default());
        assert_eq!(kept(&plain, "b"), KeptBecause::NotCandidate);
        let o = ConsolidateOptions {
            resume: vec!["b".into()],
            ..ConsolidateOptions::default()
        };
        let c = run(&cluster, &o);
        assert_eq!(c.freed_names(), vec!["b", "a"], "{:#?}", c.kept);
        assert!(c.freed[0].resumed && !c.freed[1].resumed);
        assert!(c.plan.migrations.iter().any(|m| m.vmid == 102));
        assert!(c.plan.migrations.iter().all(|m| m.to != "a" && m.to != "b"));
        // Quorum still counts b as going: 3 of 5 stay online.
        assert_eq!(kept(&c, "c"), KeptBecause::Floor);
    }

    /// [`five_nodes_one_marked`] with 102 (on b) migrating to `to`, as a killed run left it.
    fn b_migrating_to(to: &str) -> Cluster {
        let task = crate::snapshot::Task {
            kind: Some("qmigrate".into()),
            id: Some("102".into()),
            starttime: Some(1000),
            target: Some(to.into()),
            ..crate::snapshot::Task::default()
        };
        let locked = |n: &str, g: GuestSpec| if n == "b" { g.locked("migrate") } else { g };
        one_guest_each(&["a", "b", "c", "d", "e"], &["b"], locked)
            .task(task)
            .time(1010)
            .build()
    }

    #[test]
    fn a_guest_migrating_off_a_resumed_node_counts_as_leaving() {
        let o = ConsolidateOptions {
            resume: vec!["b".into()],
            ..ConsolidateOptions::default()
        };
        let c = run(&b_migrating_to("d"), &o);
        assert_eq!(c.freed_names(), vec!["b", "a"], "{:#?}", c.kept);
        assert!(c.freed[0].resumed);
        assert!(c.plan.migrations.iter().all(|m| m.vmid != 102), "{c:#?}");
        // Landing on another node being freed, it would still be stuck there.
        let c = run(&b_migrating_to("a"), &o);
        assert!(c.freed_names().iter().all(|n| n != "a"), "{:#?}", c.freed);
    }

    #[test]
    fn a_node_a_guest_is_migrating_onto_is_not_freed_and_says_which_guest() {
        // 105 runs on e and is migrating onto a (started by hand): a, the cheapest node, holds
        // nothing yet, but is not empty.
        let task = crate::snapshot::Task {
            kind: Some("qmigrate".into()),
            id: Some("105".into()),
            node: Some("e".into()),
            starttime: Some(1000),
            target: Some("a".into()),
            ..crate::snapshot::Task::default()
        };
        let mut b = ClusterBuilder::new();
        for (i, n) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let g = vm(101 + i as u32, n).mem(8 * GIB, 8 * GIB);
            let g = if *n == "e" { g.locked("migrate") } else { g };
            b = b.node(node(n)).guest(g);
        }
        let cluster = b.task(task).time(1010).build();
        let c = run(&cluster, &ConsolidateOptions::default());
        assert_eq!(c.freed_names(), vec!["b", "c"], "{:#?}", c.kept);
        let a = c.kept.iter().find(|k| k.node == "a").unwrap();
        assert_eq!(a.because, KeptBecause::Arriving, "{a:?}");
        assert_eq!(
            a.reason,
            "guest 105 (qemu105) is migrating onto a (from e): it holds the node once it lands"
        );
        // The judge says so too, whatever tried the node: a set holding it is refused.
        let hosts: Vec<NodeIdx> = cluster.node_indexes().collect();
        let (a, b) = (
            cluster.node_idx("a").unwrap(),
            cluster.node_idx("b").unwrap(),
        );
        let rules = Rules::compile(&cluster);
        let state = State::new(&cluster);
        let (p, o, evac) = (
            placer(),
            ConsolidateOptions::default(),
            EvacuateOptions::default(),
        );
        let ctx = Ctx {
            cluster: &cluster,
            rules: &rules,
            state: &state,
            placer: &p,
            ceiling: &p,
            options: &o,
            evac: &evac,
            hosts: &hosts,
            landing: &[cluster.guest_idx(105).unwrap()],
        };
        let mut in_trial = vec![false; hosts.len()];
        in_trial[a.get()] = true;
        in_trial[b.get()] = true;
        let remaining: Vec<NodeIdx> = hosts
            .iter()
            .copied()
            .filter(|&n| n != a && n != b)
            .collect();
        let nothing = Trial {
            unplaced: Vec::new(),
            skipped: Vec::new(),
            after: state.clone(),
            payload: (),
        };
        let why = judge(&ctx, &[b, a], &in_trial, &remaining, &nothing).unwrap_err();
        assert_eq!(why.0, KeptBecause::Arriving);
        assert!(
            why.1.starts_with("guest 105 (qemu105) is migrating onto a"),
            "{}",
            why.1
        );
    }

    /// 40 nodes of 64 GiB with 15 guests of 1 GiB each: 24,000 guest-nodes, above
    /// [`EXACT_SIZE`], so candidates are tried incrementally.
    fn forty_light_nodes() -> Cluster {
        let mut b = ClusterBuilder::new();
        for i in 0..40u32 {
            let n = format!("n{i:02}");
            b = b.node(node(&n));
            for j in 0..15 {
                b = b.guest(vm(1000 + 15 * i + j, &n).mem(GIB, GIB));
            }
        }
        b.build()
    }

    #[test]
    fn a_large_cluster_is_packed_incrementally_down_to_the_floor_and_safely() {
        let c = forty_light_nodes();
        assert!(c.guests().len() * c.nodes().len() > EXACT_SIZE);
        let o = ConsolidateOptions::default();
        let out = run(&c, &o);
        // Quorum: 21 of 40 stay online, so 19 are freed.
        assert_eq!(out.freed.len(), 19, "{:#?}", out.kept);
        assert_eq!(out.plan.migrations.len(), 19 * 15);
        assert!(out.work < o.budget(), "{}", out.work);
        assert!(
            out.plan
                .warnings
                .iter()
                .all(|w| w.kind != WarningKind::BudgetSpent)
        );
        // Each step passes the placement filters on the state the steps before it leave, and no
        // guest stays on a freed node.
        let rules = Rules::compile(&c);
        let state = State::new(&c);
        let end =
            crate::balance::replay(&c, &rules, &state, &placer(), &out.plan.migrations).unwrap();
        for f in &out.freed {
            let n = c.node_idx(&f.node).unwrap();
            assert_eq!(end.usage(n).guests, 0, "{}", f.node);
            assert_eq!(f.migrations, 15);
        }
        for m in &out.plan.migrations {
            let from = format!("consolidate: {} is being freed", m.from);
            assert!(m.reason.contains(&from), "{m:?}");
        }
        let steps: Vec<u32> = out.plan.migrations.iter().map(|m| m.step).collect();
        assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
    }

    #[test]
    fn the_work_budget_bounds_the_planner_and_says_so() {
        let c = forty_light_nodes();
        // One try costs 15 guests × 40 hosts + 600 guests = 1,200 units: a budget of 5,000
        // lets five tries start (the fifth ends past it), then no node is tried.
        let o = ConsolidateOptions {
            work_budget: Some(5_000),
            ..ConsolidateOptions::default()
        };
        let out = run(&c, &o);
        assert_eq!(out.work, 6_000);
        assert_eq!(out.freed.len(), 5, "{:#?}", out.kept);
        let budget: Vec<&Kept> = out
            .kept
            .iter()
            .filter(|k| k.because == KeptBecause::Budget)
            .collect();
        assert_eq!(budget.len(), 35);
        assert_eq!(
            budget[0].reason,
            "not tried: the planner's work budget of 5000 units was spent (raise --effort)"
        );
        let w = out
            .plan
            .warnings
            .iter()
            .find(|w| w.kind == WarningKind::BudgetSpent)
            .unwrap();
        assert!(
            w.message
                .starts_with("work budget of 5000 units spent after 6000"),
            "{w:?}"
        );
        // Still a whole plan: the five nodes are emptied.
        assert_eq!(out.plan.migrations.len(), 5 * 15);
        // `effort-secs` only raises the default budget.
        let thorough = ConsolidateOptions {
            effort_secs: 60.0,
            ..ConsolidateOptions::default()
        };
        assert_eq!(thorough.budget(), 180_000_000);
        assert_eq!(ConsolidateOptions::default().budget(), WORK);
    }

    /// n5's guest uses 7.2 of 8 CPUs. The reason n5 stays names that guest,
    /// not one node it would overload, which the same plan may free.
    #[test]
    fn a_cpu_reason_names_the_guest_not_a_node_being_freed() {
        let mut b = ClusterBuilder::new();
        let mem = [6, 6, 6, 2, 1, 1];
        for (i, n) in ["n1", "n2", "n3", "n4", "n5", "n6", "n7"]
            .iter()
            .enumerate()
        {
            let used = mem.get(i).map_or(GIB / 2, |&g| g * GIB);
            let guest = vm(101 + i as u32, n).mem(used, used);
            let guest = if *n == "n5" {
                guest.cores(8.0, 0.9)
            } else {
                guest.cores(1.0, 0.01)
            };
            b = b.node(node(n).memory(16 * GIB).cpus(8.0)).guest(guest);
        }
        let c = run(&b.build(), &ConsolidateOptions::default());
        let n5 = c.kept.iter().find(|k| k.node == "n5").unwrap();
        assert_eq!(n5.because, KeptBecause::Cpu, "{n5:?}");
        assert!(n5.reason.contains("guest 105"), "{}", n5.reason);
        assert!(n5.reason.contains("7.2 CPUs"), "{}", n5.reason);
        for f in c.freed_names() {
            assert!(!n5.reason.contains(&f), "{f} is freed: {}", n5.reason);
        }
    }

    #[test]
    fn finishing_only_frees_no_new_node() {
        let o = ConsolidateOptions {
            resume: vec!["b".into()],
            finish_only: true,
            ..ConsolidateOptions::default()
        };
        let c = run(&five_nodes_one_marked("b"), &o);
        assert_eq!(c.freed_names(), vec!["b"], "{:#?}", c.kept);
        assert_eq!(kept(&c, "a"), KeptBecause::Finishing, "{:#?}", c.kept);
        assert_eq!(c.kept.len(), 4, "{:#?}", c.kept);
    }

    #[test]
    fn each_unfinished_node_is_given_up_for_its_own_guest() {
        // a and b were both marked by an interrupted run; a's guest may not move (ignored), b's
        // may: a is given back naming its own guest, b is still freed.
        let ignored = |n: &str, g: GuestSpec| if n == "a" { g.tagged("flxp.ignore") } else { g };
        let cluster = one_guest_each(&["a", "b", "c", "d", "e", "f", "g"], &["a", "b"], ignored);
        let o = ConsolidateOptions {
            resume: vec!["a".into(), "b".into()],
            ..ConsolidateOptions::default()
        };
        let c = run(&cluster.build(), &o);
        let a = c.kept.iter().find(|k| k.node == "a").unwrap();
        assert!(a.resumed, "{a:?}");
        assert!(a.reason.contains("101"), "{}", a.reason);
        assert_eq!(
            c.freed_names().first().map(String::as_str),
            Some("b"),
            "{:#?}",
            c.kept
        );
        assert!(c.freed[0].resumed);
        assert!(c.kept.iter().all(|k| k.node != "b"), "{:#?}", c.kept);
    }

    #[test]
    fn the_auto_modes_load_limit_stops_freeing_before_the_wake_level() {
        // Four 64 GiB nodes with 24 GiB of guests each (no host memory): 37.5% of the zone.
        // Freeing one puts three at 50%: allowed under 0.55, refused under 0.45.
        let mut b = ClusterBuilder::new();
        for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
            b = b
                .node(node(n))
                .guest(vm(101 + i as u32, n).mem(24 * GIB, 24 * GIB));
        }
        let c = b.build();
        let base = ConsolidateOptions {
            min_nodes: 1,
            headroom: false,
            max_memory: 1.0,
            ..ConsolidateOptions::default()
        };
        let o = |l| ConsolidateOptions {
            max_load: Some(l),
            ..base.clone()
        };
        assert_eq!(run(&c, &o(0.55)).freed.len(), 1);
        let refused = run(&c, &o(0.45));
        assert!(refused.freed.is_empty());
        assert_eq!(
            kept(&refused, "a"),
            KeptBecause::Load,
            "{:#?}",
            refused.kept
        );
    }
}
