//! `flxp serve` (being built).

use std::process::ExitCode;

/// Arguments of `flxp serve`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `flxp serve`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp serve is not available in this build yet")
}
