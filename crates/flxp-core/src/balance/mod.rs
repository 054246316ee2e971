//! Rebalancing: how balanced a cluster is, when to act, and the plan of live migrations.
//!
//! - [`measure`]: per-node loads, spread and Proxmox's CV.
//! - [`trigger`]: threshold, hold count, margin, minimum gain, pressure gate.
//! - [`plan()`]: rule fixes first, then a greedy multi-move search (bundles, swaps) that keeps every
//!   intermediate state safe; or Proxmox's single-move methods ([`Method`]).
//! - [`check_step`] / [`replay`]: re-checking a planned migration against a fresh cluster.
//! - [`bounds`]: what no plan with as many migrations could beat.
//!
//! Evacuation of nodes in maintenance lives in [`crate::evacuate`] and shares the machinery.

pub mod bounds;
mod check;
mod explain;
pub(crate) mod fix;
pub mod measure;
mod movable;
mod objective;
mod options;
mod plan;
pub(crate) mod planner;
mod problems;
mod pve;
mod room;
mod search;
pub(crate) mod sim;
mod softness;
pub mod trigger;
pub(crate) mod units;

pub use check::{StepFailure, check_step, replay};
pub use measure::{LoadKind, Measure, Metric, NodeLoad, cv, imbalance, spread};
pub use movable::{Intent, Stay, stays};
pub use options::{BalanceOptions, EvacuateOptions, Method};
pub use plan::{Bounds, Migration, Plan, Purpose, Skipped, Unplaced};
pub use planner::plan;
pub use pve::{PveMove, rank_moves, run_until_stable};
pub use trigger::{Decision, PressureGate, Trigger};
