//! `flxp`: rule fixes, then a multi-move greedy search with bundles and swaps (see `planner.rs`).

use crate::Result;

use super::super::options::BalanceOptions;
use super::super::plan::Plan;
use super::super::planner;
use super::{BalanceMethod, MethodName, PlanInput};

/// The method's name.
pub const NAME: MethodName = MethodName::builtin("flxp");

/// flxp's own planner, the default.
pub struct Flxp;

impl BalanceMethod for Flxp {
    fn name(&self) -> &'static str {
        NAME.as_str()
    }

    fn description(&self) -> &'static str {
        "flxp's planner: rule fixes, then many moves at once with bundles and swaps (the default)"
    }

    fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        let PlanInput {
            cluster,
            rules,
            state,
            placer,
        } = *input;
        planner::plan_flxp(cluster, rules, state, placer, options)
    }
}
