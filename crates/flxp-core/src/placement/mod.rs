//! Placement: filters, then weighted scorers, then the pick.
//!
//! A filter or scorer is one file under `filters/` or `scorers/` plus one line in their `mod.rs`.
//! Filters judge one node of a possibly hypothetical state (the planner hands them the cluster after
//! earlier moves); work shared by all nodes is done once per decision, each filter's own in its
//! prepared state ([`Filter::prepare`]), what filters and scorers share in [`Ctx`]. The pipeline, not each scorer,
//! enforces the score contract (0..=100 after normalisation), applies weights and keeps each
//! scorer's share per node: that breakdown is `--explain`.

mod ctx;
mod decision;
mod figures;
pub mod filters;
mod normalize;
mod options;
mod pipeline;
mod plugins;
mod policy;
mod reason;
pub mod registry;
pub mod scorers;
mod subject;

pub use ctx::{Ctx, GroupPresence};
pub use decision::{Candidate, Placement, Score};
pub use figures::{guest_figures, new_vm_figures, node_figures};
pub use normalize::{as_is, by_max, min_max};
pub use options::{ExtraFilters, PlacementOptions};
pub use pipeline::{Placer, Ranked};
pub use policy::{Policy, SOFT_RULE_WEIGHT, SOFT_RULES};
pub use reason::Reason;
pub use subject::{NotCores, PlacementRequest, Subject, check_cores, parse_cores};

use std::any::Any;

use crate::cluster::{Node, NodeIdx};
use crate::state::Usage;

/// One node as a filter or scorer sees it: its facts and what it carries in the state at hand.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// The node's index.
    pub idx: NodeIdx,
    /// The node's facts.
    pub node: &'a Node,
    /// What it carries in the state being judged.
    pub usage: &'a Usage,
}

/// How a filter's verdict weighs when the user names a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterKind {
    /// The node must be up: never bypassed.
    Availability,
    /// The node must have room: never bypassed.
    Resource,
    /// A rule: with `--host` a broken rule becomes a warning.
    Rule,
}

/// What a filter works out once per decision for every node to use: its own, typed state
/// behind `Any`, which only that filter reads back (kube-scheduler's PreFilter state in its
/// CycleState). A filter without state prepares `()`, which a box holds without allocating.
pub type FilterState = dyn Any + Send + Sync;

/// A hard check of one node.
///
/// The pipeline calls [`Filter::prepare`] once per decision ([`Ctx::new`]) and hands each
/// filter its own state back on every node, so a filter keeps what it precomputes and why it
/// refuses to itself: built-in filters are [`registry::BuiltinFilter`] (no state) or
/// [`registry::StatefulFilter`] (typed state) statics listed in `filters/mod.rs`; others are
/// registered on a pipeline with [`Placer::with_filter`] and refuse with [`Reason::Custom`].
pub trait Filter: Send + Sync {
    /// Stable kebab-case name, shown in explanations.
    fn name(&self) -> &'static str;
    /// One line for users (GUIDE, explanations).
    fn doc(&self) -> &'static str;
    /// Whether `--host` may bypass it.
    fn kind(&self) -> FilterKind;
    /// Whether it judges only some subjects (those with rules of its kind, or local disks): such
    /// a filter tends to leave few nodes, so the planner's fast path runs it first.
    fn is_conditional(&self) -> bool {
        false
    }
    /// The work shared by every node of one decision, done once: `None` when it passes every
    /// node for this subject (the pipeline then skips it). Must depend only on what
    /// [`Ctx::new`] is given.
    fn prepare(&self, ctx: &Ctx) -> Option<Box<FilterState>>;
    /// `Ok` if the subject may go to the node, else why not; `state` is what [`Filter::prepare`]
    /// returned for this `ctx`.
    fn check_with(&self, ctx: &Ctx, state: &FilterState, node: &NodeView) -> Result<(), Reason>;
    /// Whether the node passes, without building the reason (the planner's hot path); must agree
    /// with [`Filter::check_with`].
    fn passes_with(&self, ctx: &Ctx, state: &FilterState, node: &NodeView) -> bool {
        self.check_with(ctx, state, node).is_ok()
    }
    /// Keeps the nodes that pass, in order (the fast path: one call per filter, not per node).
    fn retain(&self, ctx: &Ctx, state: &FilterState, nodes: &mut Vec<NodeIdx>) {
        nodes.retain(|&n| self.passes_with(ctx, state, &ctx.view(n)));
    }
    /// [`Filter::check_with`] on a state prepared for this call alone (tests, one-off checks;
    /// the pipeline prepares once per decision).
    fn check(&self, ctx: &Ctx, node: &NodeView) -> Result<(), Reason> {
        self.prepare(ctx)
            .map_or(Ok(()), |state| self.check_with(ctx, &*state, node))
    }
    /// [`Filter::passes_with`] on a state prepared for this call alone.
    fn passes(&self, ctx: &Ctx, node: &NodeView) -> bool {
        self.prepare(ctx)
            .is_none_or(|state| self.passes_with(ctx, &*state, node))
    }
}

/// A preference among feasible nodes.
pub trait Scorer: Send + Sync {
    /// Stable kebab-case name, used in policies, config and explanations.
    fn name(&self) -> &'static str;
    /// Whether it has anything to say about this subject (rule scorers without rules do not).
    fn applies(&self, _ctx: &Ctx) -> bool {
        true
    }
    /// Raw score of one node, higher is better.
    fn score(&self, ctx: &Ctx, node: &NodeView) -> f64;
    /// Raw scores of all feasible nodes; override when a node's score depends on the others.
    fn score_all(&self, ctx: &Ctx, nodes: &[NodeView]) -> Vec<f64> {
        nodes.iter().map(|n| self.score(ctx, n)).collect()
    }
    /// Rescales raw scores to 0..=100 in place; by default proportionally to the best.
    fn normalize(&self, scores: &mut [f64]) {
        by_max(scores);
    }
}
