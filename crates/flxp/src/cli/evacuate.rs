//! `flxp evacuate NODE`: empty a node for maintenance, rules honoured, its guests spread over the
//! rest of the cluster; carried out in a zone unless `--dry-run` (`--from-file` only plans).

use std::process::ExitCode;

use anyhow::Result;
use flxp_engine::Goal;

use super::{RunArgs, balance, load};

/// Arguments of `flxp evacuate`.
#[derive(Debug, clap::Args)]
// A negative number is a value the parser names its option for, not an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct Args {
    /// The node to empty.
    #[arg(value_name = "NODE")]
    node: String,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

/// Runs `flxp evacuate`: exit 3 when a guest that must leave fits nowhere (named with the reason).
pub fn run(args: Args) -> Result<ExitCode> {
    let config = load::config(&args.run.source)?;
    let nodes = vec![args.node];
    let goal = Goal::Evacuate {
        nodes: nodes.clone(),
        options: config.evacuate.clone(),
    };
    let scheduler = load::scheduler(&config)?;
    balance::carry_out(
        &args.run.source,
        &config,
        &scheduler,
        &goal,
        args.run.acting("evacuate").naming(&nodes),
        args.run.json,
    )
}
