//! `flxp daemon` (being built).

use std::process::ExitCode;

/// Arguments of `flxp daemon`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `flxp daemon`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp daemon is not available in this build yet")
}
