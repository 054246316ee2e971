//! `pve-bruteforce`: Proxmox's `bruteforce` auto-rebalance selection (see `pve.rs`).

use crate::Result;

use super::super::options::BalanceOptions;
use super::super::plan::Plan;
use super::super::pve::{self, Ranking};
use super::{BalanceMethod, MethodName, PlanInput};

/// The method's name.
pub const NAME: MethodName = MethodName::builtin("pve-bruteforce");

/// One round of Proxmox's bruteforce selection.
pub struct PveBruteforce;

impl BalanceMethod for PveBruteforce {
    fn name(&self) -> &'static str {
        NAME.as_str()
    }

    fn description(&self) -> &'static str {
        "Proxmox's bruteforce auto-rebalance selection: the single move with the lowest CV"
    }

    fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        let PlanInput {
            cluster,
            rules,
            state,
            placer,
        } = *input;
        pve::plan(cluster, rules, state, placer, options, Ranking::Bruteforce)
    }
}
