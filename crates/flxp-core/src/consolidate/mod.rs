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
//! steps. Such a try judges only what it changed (the guests on the nodes being freed, the ones
//! it moved, the nodes they left and reached for the ceilings and N+1), keeps closed the targets
//! an earlier try found full of CPU and the nodes to be tried next (a guest put there would move
//! again), and runs again with them open before it gives a node up. With the `least-loaded`
//! target policy a guest's target is ranked among the first few open nodes, least loaded
//! first, that its filters accept (`balance::shortlist`), not among every node.
//! Either way the work is counted in units (a guest judged on one node; a sweep over the
//! guests to judge a full re-plan; a guest or node an incremental judgement looks at) against a
//! deterministic budget ([`WORK`], raised by `effort-secs`):
//! once it is spent no further node is tried, the rest say so, and the plan (safe, as every
//! accepted step was judged) carries a warning of kind `budget-spent`.

mod incremental;
mod judge;
pub mod power;

use serde::{Deserialize, Serialize};

use crate::balance::draft::Draft;
use crate::balance::planner::finish;
use crate::balance::{EvacuateOptions, Plan};
use crate::cluster::{Cluster, MaintenanceSource, NodeIdx};
use crate::constraints::Rules;
use crate::evacuate::evacuate;
use crate::placement::Placer;
use crate::state::State;
use crate::units::fmt_bytes;
use crate::{Error, Result, Warning, WarningKind};
#[cfg(test)]
use judge::judge;
use judge::{Trial, arriving_among, try_free};
pub use judge::{arriving, headroom_breach, load};

/// Largest cluster (guests × candidate nodes) whose candidates are each tried by a full re-plan
/// of every node freed so far; larger ones are tried incrementally (module doc).
pub const EXACT_SIZE: usize = 20_000;
/// Work units (module doc) a consolidation may spend by default: about 4 to 13 seconds on one
/// core of the project's shared machine when every node is judged for every guest (2 to 7
/// million units a second, by its load); the 1,000-node benchmark cluster, 50,000 guests, needs
/// 0.26 million to reach its quorum floor with the `least-loaded` target policy (a shortlist of
/// targets), about 25 million with a policy that ranks every node.
pub const WORK: u64 = 40_000_000;
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

/// A node the consolidation has judged, for a progress line: on a thousand nodes the search
/// takes seconds, and an admin should see it moving.
#[derive(Debug, Clone, Copy)]
pub struct Judged<'a> {
    /// Its place in the order nodes are tried (1-based).
    pub index: usize,
    /// Nodes to judge in all.
    pub total: usize,
    /// The node.
    pub node: &'a str,
    /// `None`: it is freed; else why it stays.
    pub kept: Option<&'a str>,
}

/// Where news of nodes judged goes.
pub type TellJudged<'a> = &'a (dyn Fn(Judged<'_>) + Sync);

/// Plans a consolidation: the nodes to empty, cheapest first, within every limit (module doc).
///
/// `placer` is the zone's pipeline: its reserves count for the headroom, and the ceiling is added
/// to them for packing. Stopped guests move too (a node switched off cannot start them). `Err` for
/// an invalid option or a scorer bug. `judged`
/// hears of each candidate node as it is judged.
pub fn consolidate(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &ConsolidateOptions,
    evacuate_options: &EvacuateOptions,
    judged: TellJudged<'_>,
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
        } else if let Some((because, reason)) = search.grow(&mut resumed, n, &[])? {
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
    for (i, &n) in order.iter().enumerate() {
        let freed_before = freed.len();
        'judge: {
            let name = cluster.node(n).name.clone();
            if let Some(why) = required(n) {
                kept.push(Kept::new(name, KeptBecause::Required, why.clone()));
                break 'judge;
            }
            if options.finish_only {
                kept.push(Kept::new(
                    name,
                    KeptBecause::Finishing,
                    "only the interrupted consolidation is finished now; freeing more waits for a \
                     consolidation of its own"
                        .into(),
                ));
                break 'judge;
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
                    std::cmp::Ordering::Equal => {
                        format!("{}; {}", by_quorum_words(), by_ha_words())
                    }
                };
                kept.push(Kept::new(name, KeptBecause::Floor, reason));
                break 'judge;
            }
            if let Some(reason) = per_node.arriving(n) {
                kept.push(Kept::new(name, KeptBecause::Arriving, reason));
                break 'judge;
            }
            if let Some(reason) = per_node.cooling(n) {
                kept.push(Kept::new(name, KeptBecause::Unmovable, reason));
                break 'judge;
            }
            if search.spent() {
                kept.push(Kept::new(name, KeptBecause::Budget, search.spent_words()));
                break 'judge;
            }
            // The nodes to be tried next, as many as the floors leave room to free after n: the
            // incremental packing keeps guests off them while it can, so that a guest is not moved
            // onto a node that is emptied a few steps later.
            let slots = max_free - (freed.len() - resumed.len());
            let next = &order[(i + 1).min(order.len())..(i + slots).min(order.len())];
            if let Some((because, reason)) = search.grow(&mut freed, n, next)? {
                kept.push(Kept::new(name, because, reason));
            }
        }
        let kept_why = (freed.len() == freed_before)
            .then(|| kept.last().map(|k| k.reason.as_str()).unwrap_or_default());
        judged(Judged {
            index: i + 1,
            total: order.len(),
            node: &cluster.node(n).name,
            kept: kept_why,
        });
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

    /// Frees the nodes of `set` and `n` together: `set` grows, or why not. `next` are the
    /// nodes to be tried after n (the incremental packing avoids them as targets).
    fn grow(
        &mut self,
        set: &mut Vec<NodeIdx>,
        n: NodeIdx,
        next: &[NodeIdx],
    ) -> Result<Option<(KeptBecause, String)>> {
        let ctx = self.ctx;
        let trial = [set.as_slice(), &[n]].concat();
        let guests = ctx.cluster.guests().len() as u64;
        let hosts = ctx.hosts.len() as u64;
        let outcome = match &mut self.packer {
            // Only the guests on n are placed, each judged over every host; the judgement adds
            // what it looks at.
            Some(packer) => packer.try_add(&trial, next, &mut self.work)?,
            None => {
                let placed: u64 = trial.iter().map(|&t| self.facts.guests(t).1 as u64).sum();
                let cost = placed * hosts + guests;
                let run = |p: &Placer, closed: &[NodeIdx]| -> Result<Trial<Plan>> {
                    let shut = judge::closed_placer(&ctx, closed)?;
                    let p = shut.as_ref().unwrap_or(p);
                    let plan = evacuate(ctx.cluster, ctx.rules, ctx.state, p, &trial, ctx.evac)?;
                    Ok(Trial {
                        unplaced: plan.unplaced.clone(),
                        skipped: plan.skipped.clone(),
                        after: apply(ctx.cluster, ctx.state, &plan),
                        payload: plan,
                        moved: None,
                        closed: Vec::new(),
                    })
                };
                match try_free(
                    &ctx,
                    &trial,
                    (&mut self.work, cost),
                    (Vec::new(), false),
                    None,
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

/// Numbers the plan's steps in the order they run: waves reorder the planning steps.
/// Each old step gets the next number at its first migration (a map: a plan of tens of thousands
/// of steps is not searched once per migration).
fn renumber_steps(plan: &mut Plan) {
    let mut renumbered: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for m in &mut plan.migrations {
        let next = u32::try_from(renumbered.len()).unwrap_or(u32::MAX);
        m.step = *renumbered.entry(m.step).or_insert(next);
    }
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
    let kind = measure.kind_for(options.metric, cluster, state);
    let draft = Draft::new(cluster, rules, placer, state, kind, measure, 0, usize::MAX);
    let threshold = measure.default_threshold();
    finish(
        draft,
        state,
        crate::balance::PlanSource::Consolidate,
        threshold,
        threshold / 2.0,
    )
}

#[cfg(test)]
mod tests;
