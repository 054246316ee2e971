//! `flxp`: rule fixes, then a multi-move greedy search with bundles and swaps (see `planner.rs`).

use super::super::planner;
use super::{Builtin, MethodName};

/// The method's name.
pub const NAME: MethodName = MethodName::builtin(&METHOD);

/// flxp's own planner, the default.
pub static METHOD: Builtin = Builtin {
    name: "flxp",
    description: "flxp's planner: rule fixes, then many moves at once with bundles and swaps (the default)",
    plan: planner::plan_flxp,
    reads_usage: false,
};
