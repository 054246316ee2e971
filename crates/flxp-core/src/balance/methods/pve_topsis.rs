//! `pve-topsis`: Proxmox's `topsis` auto-rebalance selection (see `pve.rs`).

use crate::Result;

use super::super::options::BalanceOptions;
use super::super::plan::Plan;
use super::super::pve::{self, Ranking};
use super::{BalanceMethod, MethodName, PlanInput};

/// The method's name.
pub const NAME: MethodName = MethodName::builtin("pve-topsis");

/// One round of Proxmox's TOPSIS selection.
pub struct PveTopsis;

impl BalanceMethod for PveTopsis {
    fn name(&self) -> &'static str {
        NAME.as_str()
    }

    fn description(&self) -> &'static str {
        "Proxmox's topsis auto-rebalance selection: the single move TOPSIS ranks best"
    }

    fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        let PlanInput {
            cluster,
            rules,
            state,
            placer,
        } = *input;
        pve::plan(cluster, rules, state, placer, options, Ranking::Topsis)
    }
}
