//! `flxp status`: each node's load, guests and rule violations, and the cluster's spread.

use std::process::ExitCode;

use anyhow::Result;

use super::{SourceArgs, load};
use crate::output;

/// Arguments of `flxp status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs `flxp status`.
pub fn run(args: Args) -> Result<ExitCode> {
    let config = load::config(&args.source)?;
    let loaded = load::load(&args.source, &config)?;
    let report = flxp_core::status::status(&loaded.cluster, &loaded.rules, &loaded.state);
    if args.json {
        output::print_json(&report)?;
    } else {
        output::print_status(&report);
    }
    Ok(ExitCode::SUCCESS)
}
