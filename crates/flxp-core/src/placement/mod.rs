//! Placement: filters, then weighted scorers, then the pick.
//!
//! A filter or scorer is one file under `filters/` or `scorers/` plus one line in their `mod.rs`.
//! Filters judge one node of a possibly hypothetical state (the planner hands them the cluster after
//! earlier moves); work shared by all nodes is done once in [`Ctx`]. The pipeline, not each scorer,
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
pub use decision::{Candidate, Placement};
pub use figures::{guest_figures, new_vm_figures, node_figures};
pub use normalize::{as_is, by_max, min_max};
pub use options::PlacementOptions;
pub use pipeline::{Placer, Ranked};
pub use policy::{Policy, SOFT_RULE_WEIGHT, SOFT_RULES};
pub use reason::Reason;
pub use subject::{NotCores, PlacementRequest, Subject, check_cores, parse_cores};

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

/// A hard check of one node.
pub trait Filter: Send + Sync {
    /// Stable kebab-case name, shown in explanations.
    fn name(&self) -> &'static str;
    /// Whether `--host` may bypass it.
    fn kind(&self) -> FilterKind;
    /// `Ok` if the subject may go to the node, else why not.
    fn check(&self, ctx: &Ctx, node: &NodeView) -> Result<(), Reason>;
    /// Whether the node passes, without building the reason (the planner's hot path); must agree
    /// with `check`.
    fn passes(&self, ctx: &Ctx, node: &NodeView) -> bool {
        self.check(ctx, node).is_ok()
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
