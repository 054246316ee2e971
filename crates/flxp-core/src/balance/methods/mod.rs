//! Rebalancing methods: how the migrations of a balancing plan are chosen.
//!
//! Each built-in method is one file here defining a [`Builtin`] and one line in the list below;
//! [`Registry`] parses method names against that list (options, config file, `--method`, GraphQL)
//! and dispatches [`crate::balance::plan`] to the named method. The GUIDE documents every
//! registered name (checked by a test).

mod name;
pub mod plugin;
mod registry;

pub use name::MethodName;
pub(crate) use registry::run;
pub use registry::{MethodError, Registry};

use crate::Result;
use crate::cluster::Cluster;
use crate::constraints::Rules;
use crate::placement::Placer;
use crate::state::State;

use super::options::BalanceOptions;
use super::plan::Plan;

/// A way of choosing a balancing plan's migrations.
pub trait BalanceMethod: Send + Sync {
    /// The stable name used in options and output (`flxp`, `pve-topsis`).
    fn name(&self) -> &'static str;
    /// One line for users: CLI help, GraphQL and the GUIDE.
    fn description(&self) -> &'static str;
    /// The plan on `input`; `options` are already validated. [`Registry::plan`] sets the plan's
    /// `method` to this method, also when it plans through another.
    fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan>;
    /// Whether the method balances on [`BalanceOptions::usage`] (`--usage`): Proxmox's methods
    /// do; the others weigh their own figures, so the option means nothing to them.
    fn reads_usage(&self) -> bool {
        false
    }
}

/// What every method plans on.
#[derive(Clone, Copy)]
pub struct PlanInput<'a> {
    /// Nodes and guests.
    pub cluster: &'a Cluster,
    /// Compiled placement rules.
    pub rules: &'a Rules,
    /// Where guests are now.
    pub state: &'a State,
    /// Placement filters and scorers every step is checked with.
    pub placer: &'a Placer,
}

impl<'a> PlanInput<'a> {
    /// The input of a plan from `state` of `cluster`, under `rules`, checked by `placer`.
    pub fn new(
        cluster: &'a Cluster,
        rules: &'a Rules,
        state: &'a State,
        placer: &'a Placer,
    ) -> Self {
        Self {
            cluster,
            rules,
            state,
            placer,
        }
    }
}

/// A built-in method: its name, a line for users and the function that plans. Each method file
/// defines one as `METHOD`, so a method is data, not another copy of the trait's plumbing.
pub struct Builtin {
    name: &'static str,
    description: &'static str,
    plan: fn(&PlanInput<'_>, &BalanceOptions) -> Result<Plan>,
    reads_usage: bool,
}

impl BalanceMethod for Builtin {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &'static str {
        self.description
    }

    fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        (self.plan)(input, options)
    }

    fn reads_usage(&self) -> bool {
        self.reads_usage
    }
}

/// Declares each method's module and lists it in [`BUILTIN`], so a method is one line here.
macro_rules! methods {
    ($($module:ident :: $method:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every built-in method, the default first.
        pub static BUILTIN: &[&dyn BalanceMethod] = &[$(&$module::$method),*];
    };
}

methods! {
    flxp::METHOD,
    pve_bruteforce::METHOD,
    pve_topsis::METHOD,
}
