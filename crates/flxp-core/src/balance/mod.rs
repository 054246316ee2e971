//! Rebalancing: how balanced a cluster is, when to act, and the plan of live migrations.
//!
//! - [`measure`]: per-node loads, spread (pp) and Proxmox's CV (raw and normalised).
//! - [`trigger`]: threshold, hold count, margin, minimum gain, optional pressure gate.
//! - [`plan()`]: broken hard rules first (pins, selectors, strict HA node affinity, anti-affinity,
//!   split affinity groups, nodes in maintenance), then a greedy multi-move search over single
//!   guests, affinity bundles and swaps; or Proxmox's single-move methods (the [`methods`]).
//! - [`check_step`] / [`replay`]: re-checking a planned migration against a fresh cluster.
//! - [`bounds`]: what no plan with as many migrations could beat.
//! - [`exact`]: the fewest migrations reaching an imbalance, by exhaustive search; the planner runs
//!   it within a work budget on small clusters (`refine.rs`), the quality benchmark as its baseline.
//!
//! The search minimises Σ(load − mean)² over the balanced nodes and reports the chosen measure:
//! spread is flat for most single moves, so a search on it stalls where ProxLB does, while every
//! move from a fuller to an emptier node that does not overshoot lowers the sum of squares (see
//! `objective.rs`). A balancing decision (one move, a swap, or two moves the exact step judged
//! together) may never raise the reported measure, and a plan ends on a decision that lowered
//! it. Every step is checked with the placement filters on the state the earlier steps leave, so
//! no intermediate state overcommits a node or breaks a hard rule.
//!
//! Evacuation of nodes in maintenance lives in [`crate::evacuate`] and shares the machinery.

pub mod bounds;
mod check;
mod commit;
#[cfg(test)]
mod disks_tests;
pub(crate) mod draft;
pub mod exact;
pub(crate) mod explain;
pub(crate) mod fix;
pub mod measure;
pub mod methods;
mod movable;
mod objective;
mod options;
mod plan;
pub(crate) mod planner;
mod problems;
mod pve;
mod refine;
#[cfg(test)]
mod return_hold_tests;
mod room;
mod search;
mod shorten;
pub(crate) mod shortlist;
mod softness;
mod stop;
pub mod trigger;
pub(crate) mod units;

pub use check::{StepFailure, StepReason, check_step, replay};
pub use measure::{
    LoadKind, Measure, Metric, NodeFigures, NodeLoad, cv, imbalance, imbalance_in, spread,
};
pub use methods::{BalanceMethod, MethodError, MethodName, PlanInput, Registry};
pub use movable::{Intent, Stay, StayKind, stays};
pub use options::{
    BalanceOptions, BalanceOptionsOf, EvacuateOptions, RawBalanceOptions, UsageChoice,
};
pub use plan::{
    Bounds, LeftInPlace, Migration, Overfull, Plan, PlanSource, PluginOutcome, ProposalVerdict,
    Purpose, Refusal, Skipped, Unplaced, UsageMode, UsageUsed, WaitingRule,
};
pub use planner::plan;
pub use pve::{PveMove, Ranking, rank_moves, run_until_stable};
pub use stop::PlanStop;
pub use trigger::{Decision, Figures, PressureGate, Trigger};
